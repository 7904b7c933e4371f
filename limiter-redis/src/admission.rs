//! [`Admission`]: what a distributed limiter granted, and [`Source`]: which
//! path answered.
//!
//! A grant is an `Ok(Admission)`; a denial is an
//! `Err(`[`RedisLimitError::RateLimited`](crate::RedisLimitError::RateLimited)`)`
//! carrying the same [`Source`]. Times are `Duration`s from the moment of the
//! decision; an answer from Redis was made at Redis' `now` (or the client's,
//! in client-clock mode), somewhere within the call's round trip.

use core::time::Duration;

/// Which path answered a request: the `source` of an [`Admission`] and of a
/// [`RedisLimitError::RateLimited`](crate::RedisLimitError::RateLimited).
///
/// # Examples
///
/// ```
/// use limiter_redis::Source;
///
/// // Answers that did not come from the shared state on Redis.
/// fn degraded(source: Source) -> bool {
///     matches!(source, Source::FailOpen | Source::FailClosed | Source::Local)
/// }
/// assert!(!degraded(Source::DenyCache)); // a denial Redis gave, replayed exactly
/// assert!(degraded(Source::Local));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// The script on Redis decided.
    Redis,
    /// The local deny cache answered "rate limited" without calling Redis,
    /// replaying a denial Redis returned earlier (exact: see
    /// [`RedisLimiterBuilder::deny_cache`](crate::RedisLimiterBuilder::deny_cache)).
    /// Only ever on a denial.
    DenyCache,
    /// Permits were spent from a local lease taken from Redis earlier (see
    /// [`RedisLimiterBuilder::lease`](crate::RedisLimiterBuilder::lease)).
    /// Only ever on a grant.
    Lease,
    /// Redis was unavailable and the policy is
    /// [`WhenDown::Open`](crate::WhenDown::Open). Only ever on a
    /// grant.
    FailOpen,
    /// Redis was unavailable and the policy is
    /// [`WhenDown::Closed`](crate::WhenDown::Closed). Only ever on
    /// a denial.
    FailClosed,
    /// Redis was unavailable and the in-process fallback limiter decided
    /// ([`WhenDown::Local`](crate::WhenDown::Local)).
    Local,
    /// The per-instance cap of a [`TwoTierLimiter`](crate::TwoTierLimiter)
    /// denied, without calling Redis. Only ever on a denial.
    InstanceCap,
}

/// What was granted to one request for permits on one key.
///
/// Returned as `Ok` by every acquisition of a
/// [`RedisLimiter`](crate::RedisLimiter); a denial is
/// [`RedisLimitError::RateLimited`](crate::RedisLimitError::RateLimited)
/// instead.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_redis::{Admission, Source};
///
/// let granted = Admission {
///     remaining: 3,
///     reset_after: Duration::from_millis(200),
///     wait: Duration::ZERO,
///     source: Source::Redis,
/// };
/// // `X-RateLimit-Remaining` and `X-RateLimit-Reset` headers.
/// assert_eq!(granted.remaining, 3);
/// assert_eq!(granted.reset_after.as_millis(), 200);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Permits a plain try could still take right after this grant (0 when
    /// unknown, as under [`Source::FailOpen`]). Under leases it includes the
    /// permits held locally.
    pub remaining: u32,
    /// How long until the key would be full again (and its Redis key
    /// expires) if nothing more came; zero when unknown (a lease, fail-open).
    pub reset_after: Duration,
    /// How long after the decision the permits may be used: the slot of a
    /// reservation, zero for a plain try. A `take*` returns after sleeping
    /// it and reports the wait it slept.
    pub wait: Duration,
    /// Which path answered.
    pub source: Source,
}

impl Admission {
    /// A grant with nothing known beyond it (fail-open).
    pub(crate) fn open() -> Admission {
        Admission {
            remaining: 0,
            reset_after: Duration::ZERO,
            wait: Duration::ZERO,
            source: Source::FailOpen,
        }
    }
}
