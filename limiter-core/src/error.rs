//! The errors a caller can match on and act on.
//!
//! [`QuotaError`] rejects a quota whose numbers the limiter cannot represent
//! exactly; [`AcquireError`] says why a request for permits was not granted
//! and, where waiting would help, for how long.

use core::fmt;
use core::time::Duration;

/// Why a [`Quota`](crate::Quota) could not be built.
///
/// Every variant names the number to change. No quota is ever silently
/// clamped to something representable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// A rate of zero permits per interval admits nothing; use at least 1.
    ZeroRate,
    /// A period of zero would admit infinitely many permits.
    ZeroPeriod,
    /// A burst of zero would admit nothing; the smallest burst is 1.
    ZeroBurst,
    /// The rate asks for more than one permit per nanosecond, the resolution
    /// of the limiter's clock.
    RateTooHigh {
        /// The permits asked for.
        permits: u32,
        /// The interval they were asked for.
        per: Duration,
    },
    /// `period · burst` is longer than the [`MAX_SPAN`](crate::clock::MAX_SPAN) the
    /// state word can hold (2^60 ns, about 36.5 years).
    SpanTooLong {
        /// The emission interval `t`.
        period: Duration,
        /// The burst asked for.
        burst: u32,
    },
    /// A parameter that must be a finite positive number was not (an adaptive
    /// rate, a warm-up length, a share, a cold factor...).
    InvalidParameter {
        /// Which parameter.
        name: &'static str,
        /// What it must satisfy.
        requirement: &'static str,
    },
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaError::ZeroRate => {
                f.write_str("a quota of zero permits admits nothing; ask for at least 1 permit")
            }
            QuotaError::ZeroPeriod => f.write_str(
                "a period of zero would admit without limit; use a period of at least 1 ns",
            ),
            QuotaError::ZeroBurst => {
                f.write_str("a burst of zero admits nothing; use a burst of at least 1")
            }
            QuotaError::RateTooHigh { permits, per } => write!(
                f,
                "{permits} permits per {per:?} is more than one permit per nanosecond; lower the rate or lengthen the interval"
            ),
            QuotaError::SpanTooLong { period, burst } => write!(
                f,
                "a period of {period:?} times a burst of {burst} exceeds the 2^60 ns (about 36.5 years) the limiter can represent; lower the burst or shorten the period"
            ),
            QuotaError::InvalidParameter { name, requirement } => {
                write!(f, "invalid `{name}`: it must be {requirement}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for QuotaError {}

/// Why permits were not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireError {
    /// More permits were asked for at once than the burst: this can never
    /// succeed under the current quota. Ask for at most `burst`, or raise it.
    InsufficientCapacity {
        /// The permits asked for.
        requested: u32,
        /// The burst of the quota in force.
        burst: u32,
    },
    /// The request would exceed the quota now (or its slot lies past the
    /// allowed wait). It would conform after `wait`; nothing was consumed.
    RateLimited {
        /// The exact time until the same request would conform, as of the
        /// decision.
        wait: Duration,
    },
    /// A priority class past the last was asked for.
    UnknownClass {
        /// The class asked for.
        class: usize,
        /// How many classes the limiter has (valid: `0..classes`).
        classes: usize,
        /// The permits asked for.
        requested: u32,
    },
    /// The clock reads (or the slot would lie) more than 2^60 ns, about
    /// 36.5 years, after the limiter was made (the span its state word can
    /// hold), or past the clock's own `u64::MAX`. A limiter counts from its
    /// creation whatever the clock's origin, so only a limiter that lives
    /// that long, a slot reserved that far ahead, or a clock that jumps gets
    /// here. Waiting cannot cure it.
    TimeOutOfRange {
        /// The clock reading, in nanoseconds since the clock's origin.
        now: u64,
    },
    /// A decider outside this crate could not decide (its
    /// [`Denial::Unavailable`](crate::Denial::Unavailable), whose error says
    /// why); this crate's limiters never answer it.
    Unavailable,
}

impl AcquireError {
    /// How long to wait before the same request could succeed:
    /// `Some(wait)` for [`RateLimited`](AcquireError::RateLimited), `None`
    /// for the errors that waiting does not cure. An HTTP handler can answer
    /// `429` with this as `Retry-After` without matching the variants.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(4)?, ManualClock::new());
    /// limiter.try_acquire()?;
    /// let denied = limiter.try_acquire().unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(250)));
    /// let never = limiter.try_acquire_n(2).unwrap_err(); // more than the burst
    /// assert_eq!(never.retry_after(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AcquireError::RateLimited { wait } => Some(*wait),
            _ => None,
        }
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::InsufficientCapacity { requested, burst } => write!(
                f,
                "{requested} permits requested but the burst is {burst}; request at most {burst} at once or raise the burst"
            ),
            AcquireError::RateLimited { wait } => {
                write!(f, "rate limited; the request would conform in {wait:?}")
            }
            AcquireError::UnknownClass {
                class,
                classes,
                requested,
            } => write!(
                f,
                "{requested} permits asked for priority class {class}, but the limiter has classes 0 to {}; use one of those",
                classes.saturating_sub(1)
            ),
            AcquireError::TimeOutOfRange { now } => write!(
                f,
                "the clock reading {now} ns, or the slot asked for, lies more than 2^60 ns (about 36.5 years) after the limiter was made; make a new limiter, or reserve less far ahead"
            ),
            AcquireError::Unavailable => {
                f.write_str("the rate limiter could not decide; its own error says why")
            }
        }
    }
}

impl core::error::Error for AcquireError {}
