//! [`RedisLimitError`]: why a distributed decision could not be made.
//!
//! A *denial* is not an error: it is a [`Decision`](crate::Decision) with
//! `allowed == false`. Errors are requests that can never succeed as asked
//! (`InsufficientCapacity`), limiters that cannot be built (`UnsupportedQuota`,
//! `InvalidParameter`), and Redis failures that the
//! [`FailurePolicy`](crate::FailurePolicy) chose to surface rather than answer.

use core::fmt;
use core::time::Duration;

/// Why a [`RedisLimiter`](crate::RedisLimiter) call or construction failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisLimitError {
    /// More permits were asked for at once than the burst: never satisfiable
    /// under this quota. Ask for at most `burst`, or raise it.
    InsufficientCapacity {
        /// The permits asked for.
        requested: u32,
        /// The quota's burst.
        burst: u32,
    },
    /// The quota's period is not a whole number of microseconds (or is under
    /// one), the script's resolution. Use a period in whole µs, for example
    /// with [`quota_in_micros`](crate::quota_in_micros).
    UnsupportedQuota {
        /// The period asked for.
        period: Duration,
    },
    /// A builder parameter was out of range.
    InvalidParameter {
        /// Which parameter.
        name: &'static str,
        /// What it must satisfy.
        requirement: &'static str,
    },
    /// The Redis call did not answer within the call timeout. It may still
    /// have been applied; it is never retried.
    Timeout {
        /// The timeout that elapsed.
        after: Duration,
    },
    /// The circuit breaker is open after a recent failure: Redis was not
    /// called. Retry after the breaker's interval.
    CircuitOpen,
    /// Redis answered with an error, or the connection failed.
    Redis(redis::RedisError),
    /// The script's reply did not have the expected shape (a different
    /// script under the same SHA, or a proxy rewriting replies).
    UnexpectedReply(String),
}

impl RedisLimitError {
    /// Whether this error means "Redis could not be reached in time" (as
    /// opposed to a request or reply that is wrong): these trip the circuit
    /// breaker and are answered by the failure policy.
    pub fn is_unavailable(&self) -> bool {
        match self {
            RedisLimitError::Timeout { .. } | RedisLimitError::CircuitOpen => true,
            RedisLimitError::Redis(e) => {
                e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
                    || matches!(
                        e.kind(),
                        redis::ErrorKind::Server(
                            redis::ServerErrorKind::BusyLoading
                                | redis::ServerErrorKind::TryAgain
                                | redis::ServerErrorKind::ClusterDown
                                | redis::ServerErrorKind::MasterDown
                        ) | redis::ErrorKind::ClusterConnectionNotFound
                    )
            }
            _ => false,
        }
    }
}

impl fmt::Display for RedisLimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisLimitError::InsufficientCapacity { requested, burst } => write!(
                f,
                "{requested} permits requested but the burst is {burst}; request at most {burst} at once or raise the burst"
            ),
            RedisLimitError::UnsupportedQuota { period } => write!(
                f,
                "a period of {period:?} is not a whole number of microseconds, the Redis limiter's resolution; use a period of whole µs (at most 1,000,000 permits per second per key)"
            ),
            RedisLimitError::InvalidParameter { name, requirement } => {
                write!(f, "invalid `{name}`: it must be {requirement}")
            }
            RedisLimitError::Timeout { after } => write!(
                f,
                "Redis did not answer within {after:?}; the call may have been applied and is not retried"
            ),
            RedisLimitError::CircuitOpen => f.write_str(
                "Redis failed recently and the circuit breaker is open; Redis was not called",
            ),
            RedisLimitError::Redis(e) => write!(f, "Redis error: {e}"),
            RedisLimitError::UnexpectedReply(what) => {
                write!(f, "unexpected reply from the limiter script: {what}")
            }
        }
    }
}

impl std::error::Error for RedisLimitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisLimitError::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for RedisLimitError {
    fn from(e: redis::RedisError) -> RedisLimitError {
        RedisLimitError::Redis(e)
    }
}
