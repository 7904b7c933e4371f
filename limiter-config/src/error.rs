//! The errors of a rule set at run time: [`RuleError`], why a rule's
//! limiter did not grant a library caller (the HTTP layer answers with a
//! status instead), and the file's [`ConfigErrors`] under the path the
//! watcher names them by.

use std::fmt;
use std::time::Duration;

use limiter_core::AcquireError;
use limiter_keyed::KeyedError;
#[cfg(feature = "redis")]
use limiter_redis::RedisLimitError;

pub(crate) use limiter_rules::ConfigErrors;

/// Why a rule's limiter did not grant.
#[derive(Debug)]
#[non_exhaustive]
pub enum RuleError {
    /// The core limiter's answer: `RateLimited { wait }` (see
    /// [`RuleError::retry_after`]) or a request that can never conform.
    Limited(AcquireError),
    /// A keyed rule could not hold another key (never under the eviction
    /// keyed rules use; kept for a table that refuses new keys).
    KeysFull {
        /// The cap.
        max_keys: usize,
    },
    /// The Redis limiter's answer (a denial, or Redis unavailable under
    /// `failure_policy: error`).
    #[cfg(feature = "redis")]
    Redis(RedisLimitError),
    /// The rule's calendar `quota` could not decide (its wall clock
    /// outside 1970 to 2106, or Redis unavailable): why.
    QuotaUnavailable {
        /// The store's message.
        reason: String,
    },
    /// A keyed rule was asked without a key: use the `_key` methods.
    NeedsKey {
        /// The rule.
        rule: String,
    },
    /// A `concurrency` or `adaptive_concurrency` rule was asked for a
    /// permit that nothing gives back: take one from
    /// [`RuleLimiter::concurrency`](crate::RuleLimiter::concurrency) (a permit released when dropped).
    Concurrency {
        /// The rule.
        rule: String,
    },
}

impl RuleError {
    /// How long to wait before the same request could succeed, if waiting
    /// helps.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RuleError::Limited(e) => e.retry_after(),
            #[cfg(feature = "redis")]
            RuleError::Redis(e) => e.retry_after(),
            _ => None,
        }
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleError::Limited(e) => e.fmt(f),
            RuleError::KeysFull { max_keys } => write!(
                f,
                "the rule holds its maximum of {max_keys} keys; raise `max_keys`"
            ),
            #[cfg(feature = "redis")]
            RuleError::Redis(e) => e.fmt(f),
            RuleError::QuotaUnavailable { reason } => {
                write!(f, "the calendar quota could not decide: {reason}")
            }
            RuleError::NeedsKey { rule } => write!(
                f,
                "rule `{rule}` is keyed; call try_acquire_key / take_key with the client's key"
            ),
            RuleError::Concurrency { rule } => write!(
                f,
                "rule `{rule}` limits concurrency; take a permit from RuleLimiter::concurrency() and drop it when the work is done"
            ),
        }
    }
}

impl std::error::Error for RuleError {}

impl From<KeyedError> for RuleError {
    fn from(e: KeyedError) -> RuleError {
        match e {
            KeyedError::Limited(e) => RuleError::Limited(e),
            KeyedError::TooManyKeys { max_keys } => RuleError::KeysFull { max_keys },
            // `KeyedError` is non-exhaustive; any other refusal is the
            // limiter's own and says why.
            _ => RuleError::KeysFull { max_keys: 0 },
        }
    }
}

impl From<AcquireError> for RuleError {
    fn from(e: AcquireError) -> RuleError {
        RuleError::Limited(e)
    }
}
