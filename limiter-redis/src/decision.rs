//! [`Decision`]: what a distributed limiter answered, and [`Source`]: which
//! path answered it.
//!
//! A decision is a value, not an error: `allowed == false` is an ordinary
//! denial. Times are `Duration`s from the moment of the decision; a decision
//! that came from Redis was made at Redis' `now` (or the client's, in
//! client-clock mode), somewhere within the call's round trip.

use core::time::Duration;

/// Which path produced a [`Decision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// The script on Redis decided.
    Redis,
    /// The local deny cache answered "rate limited" without calling Redis,
    /// from a denial Redis returned earlier (exact: see
    /// [`crate::deny_cache`]).
    DenyCache,
    /// Permits were spent from a local lease taken from Redis earlier.
    Lease,
    /// Redis was unavailable and the policy is [`FailurePolicy::Open`](crate::FailurePolicy::Open).
    FailOpen,
    /// Redis was unavailable and the policy is [`FailurePolicy::Closed`](crate::FailurePolicy::Closed).
    FailClosed,
    /// Redis was unavailable and the in-process fallback limiter decided
    /// ([`FailurePolicy::Local`](crate::FailurePolicy::Local)).
    Local,
}

/// The answer to one request for permits on one key.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_redis::{Decision, Source};
///
/// let denied = Decision {
///     allowed: false,
///     remaining: 0,
///     retry_after: Some(Duration::from_millis(40)),
///     reset_after: Duration::from_millis(240),
///     wait: Duration::ZERO,
///     source: Source::Redis,
/// };
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Some(Duration::from_millis(40)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the permits were granted (now, or after `wait` for a
    /// reservation). On denial nothing was consumed.
    pub allowed: bool,
    /// Permits a plain try could still take right after this decision (0
    /// when unknown, as under [`Source::FailOpen`]).
    pub remaining: u32,
    /// On denial, how long until the same request would conform (a lower
    /// bound when other clients keep consuming); `None` when allowed.
    pub retry_after: Option<Duration>,
    /// How long until the key would be full again (and its Redis key
    /// expires) if nothing more came.
    pub reset_after: Duration,
    /// For a granted reservation, how long to wait before using the permits
    /// (zero for a plain try).
    pub wait: Duration,
    /// Which path answered.
    pub source: Source,
}

impl Decision {
    /// A grant with nothing known beyond it (fail-open).
    pub(crate) fn open() -> Decision {
        Decision {
            allowed: true,
            remaining: 0,
            retry_after: None,
            reset_after: Duration::ZERO,
            wait: Duration::ZERO,
            source: Source::FailOpen,
        }
    }

    /// A denial that suggests retrying after `retry_after` (fail-closed).
    pub(crate) fn closed(retry_after: Duration) -> Decision {
        Decision {
            allowed: false,
            remaining: 0,
            retry_after: Some(retry_after),
            reset_after: Duration::ZERO,
            wait: Duration::ZERO,
            source: Source::FailClosed,
        }
    }
}
