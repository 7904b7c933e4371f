//! [`RedisLimitError`]: why a request got no permits, or a limiter could not
//! be built.
//!
//! A denial is an error like any other: [`RedisLimitError::RateLimited`],
//! with when to retry, when the key is full again, and which path denied.
//! The other variants are requests that can never succeed as asked
//! (`InsufficientCapacity`), limiters that cannot be built (`UnsupportedQuota`,
//! `InvalidParameter`), and Redis failures that the
//! [`FailurePolicy`](crate::FailurePolicy) chose to surface rather than answer.
//! [`RedisLimitError::retry_after`] says, without matching, whether and when
//! waiting helps.

use core::fmt;
use core::time::Duration;

use std::path::PathBuf;

use crate::admission::Source;

/// Why a [`RedisLimiter`](crate::RedisLimiter) call or construction failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisLimitError {
    /// The permits are not available within the request's allowance (now
    /// for a try, within its wait for a reservation); nothing was consumed.
    ///
    /// `source` says who denied: [`Source::Redis`] (the script),
    /// [`Source::DenyCache`] (a denial Redis gave earlier, replayed exactly),
    /// [`Source::Local`] (the per-key fallback while Redis is unavailable) or
    /// [`Source::FailClosed`] (Redis is unavailable and the policy is
    /// [`FailurePolicy::Closed`](crate::FailurePolicy::Closed)).
    RateLimited {
        /// How long until the same request would conform: exact as of the
        /// decision for `Redis`, `DenyCache` and `Local` (a lower bound when
        /// other clients keep consuming); for `FailClosed`, the time until
        /// the circuit breaker lets the next call probe Redis.
        retry_after: Duration,
        /// How long until the key would be full again if nothing more came
        /// (zero under `FailClosed`, where it is unknown).
        reset_after: Duration,
        /// Permits a plain try could still take right now: a denial of `n`
        /// permits can leave fewer than `n` available (0 under `FailClosed`).
        remaining: u32,
        /// Which path denied.
        source: Source,
    },
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
    /// called (returned only under
    /// [`FailurePolicy::Error`](crate::FailurePolicy::Error), and by
    /// [`reset`](crate::RedisLimiter::reset)).
    CircuitOpen {
        /// How long until the breaker lets one call probe Redis again (see
        /// [`RedisLimiterBuilder::retry_interval`](crate::RedisLimiterBuilder::retry_interval)).
        retry_after: Duration,
    },
    /// A multi-key decision named one key twice (after the prefix is
    /// applied); list each key once, with the permits added up.
    DuplicateKey {
        /// The key given twice.
        key: String,
    },
    /// On a Redis Cluster, the keys of one multi-key decision hash to
    /// different slots, so no single script call can see them all. Give
    /// them a common hash tag (`{acct:7}:user`, `{acct:7}:global`).
    CrossSlot {
        /// The first Redis key of the decision.
        first: String,
        /// A Redis key on another slot.
        other: String,
    },
    /// The local tier of a [`TwoTierLimiter`](crate::TwoTierLimiter) refused
    /// for a reason other than its rate (its clock out of range); nothing
    /// was asked of Redis.
    LocalTier(limiter_keyed::KeyedError),
    /// The server refused the credentials (`WRONGPASS`, `NOAUTH`, a failed
    /// `AUTH`) or the ACL user may not run the limiter's commands
    /// (`NOPERM`): check the user and password of the
    /// [`RedisEndpoint`](crate::RedisEndpoint) and the user's ACL (it needs
    /// `EVALSHA`, `EVAL`, `SCRIPT LOAD`, and its keys). Counts as
    /// unavailable: the failure policy answers it unless it is
    /// [`FailurePolicy::Error`](crate::FailurePolicy::Error).
    Auth(redis::RedisError),
    /// The TLS handshake failed: the server's certificate is not signed by
    /// the CA trusted, does not name the host (see
    /// [`RedisTls::skip_hostname_verification`](crate::RedisTls::skip_hostname_verification)),
    /// or the server refused the client certificate. Counts as unavailable,
    /// as [`Auth`](RedisLimitError::Auth).
    Tls(redis::RedisError),
    /// Redis answered with an error, or the connection failed.
    Redis(redis::RedisError),
    /// The script's reply did not have the expected shape (a different
    /// script under the same SHA, or a proxy rewriting replies).
    UnexpectedReply(String),
}

impl RedisLimitError {
    /// When a retry can help: `Some(retry_after)` for
    /// [`RateLimited`](RedisLimitError::RateLimited) (the request conforms
    /// then, unless others consume first) and for
    /// [`CircuitOpen`](RedisLimitError::CircuitOpen) (the breaker lets a
    /// probe through then; whether Redis answers is unknown). `None` for
    /// every other error: waiting does not cure a request over the burst or
    /// a bad parameter, and after a `Timeout` or a `Redis` error the breaker
    /// decides (the next call within its interval gets `CircuitOpen`, with a
    /// time).
    ///
    /// An HTTP handler can answer `429` (or `503` for `CircuitOpen`) with
    /// this as `Retry-After` without matching the variants.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_redis::{RedisLimitError, Source};
    ///
    /// let denied = RedisLimitError::RateLimited {
    ///     retry_after: Duration::from_millis(40),
    ///     reset_after: Duration::from_millis(240),
    ///     remaining: 0,
    ///     source: Source::Redis,
    /// };
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(40)));
    ///
    /// let breaker = RedisLimitError::CircuitOpen { retry_after: Duration::from_millis(700) };
    /// assert_eq!(breaker.retry_after(), Some(Duration::from_millis(700)));
    ///
    /// let never = RedisLimitError::InsufficientCapacity { requested: 9, burst: 5 };
    /// assert_eq!(never.retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RedisLimitError::RateLimited { retry_after, .. }
            | RedisLimitError::CircuitOpen { retry_after } => Some(*retry_after),
            _ => None,
        }
    }

    /// Whether this error means "Redis could not be reached in time" (as
    /// opposed to a request or reply that is wrong): these trip the circuit
    /// breaker and are answered by the failure policy. On a cluster, a
    /// `MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN` or `READONLY` that the
    /// client could not follow within its retries counts too (the topology
    /// is changing: a failover or a resharding). A denial
    /// ([`RateLimited`](RedisLimitError::RateLimited)) is not one, even under
    /// [`Source::FailClosed`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_redis::{RedisLimitError, Source};
    ///
    /// let slow = RedisLimitError::Timeout { after: Duration::from_millis(100) };
    /// assert!(slow.is_unavailable());
    /// let closed = RedisLimitError::RateLimited {
    ///     retry_after: Duration::from_secs(1),
    ///     reset_after: Duration::ZERO,
    ///     remaining: 0,
    ///     source: Source::FailClosed,
    /// };
    /// assert!(!closed.is_unavailable());
    /// ```
    pub fn is_unavailable(&self) -> bool {
        match self {
            RedisLimitError::Timeout { .. }
            | RedisLimitError::CircuitOpen { .. }
            | RedisLimitError::Auth(_)
            | RedisLimitError::Tls(_) => true,
            RedisLimitError::Redis(e) => {
                e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
                    || matches!(
                        e.kind(),
                        // A redirection or a read-only replica that reaches
                        // us means the cluster's topology is changing (a
                        // failover or resharding the client could not follow
                        // within its retries): transient, never a decision.
                        redis::ErrorKind::Server(
                            redis::ServerErrorKind::BusyLoading
                                | redis::ServerErrorKind::TryAgain
                                | redis::ServerErrorKind::ClusterDown
                                | redis::ServerErrorKind::MasterDown
                                | redis::ServerErrorKind::Moved
                                | redis::ServerErrorKind::Ask
                                | redis::ServerErrorKind::ReadOnly
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
            RedisLimitError::RateLimited {
                retry_after,
                source,
                ..
            } => match source {
                Source::FailClosed => write!(
                    f,
                    "Redis is unavailable and the failure policy is Closed: denied; Redis is tried again in {retry_after:?}"
                ),
                Source::InstanceCap => write!(
                    f,
                    "rate limited by this instance's cap (Redis was not asked); the request would conform in {retry_after:?}"
                ),
                Source::Local => write!(
                    f,
                    "rate limited by the local fallback while Redis is unavailable; the request would conform in {retry_after:?}"
                ),
                _ => write!(
                    f,
                    "rate limited; the request would conform in {retry_after:?}"
                ),
            },
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
            RedisLimitError::CircuitOpen { retry_after } => write!(
                f,
                "Redis failed recently and the circuit breaker is open; Redis was not called and is tried again in {retry_after:?}"
            ),
            RedisLimitError::DuplicateKey { key } => write!(
                f,
                "the key `{key}` is listed twice in one multi-key decision; list it once with the permits added up"
            ),
            RedisLimitError::CrossSlot { first, other } => write!(
                f,
                "the Redis keys `{first}` and `{other}` are on different cluster slots, so one script cannot decide both; give the keys of one decision a common hash tag such as `{{tenant}}:user`"
            ),
            RedisLimitError::LocalTier(e) => write!(f, "the local tier refused: {e}"),
            RedisLimitError::Auth(e) => write!(
                f,
                "Redis refused the credentials or the user's permissions (check the user, password and ACL): {e}"
            ),
            RedisLimitError::Tls(e) => write!(
                f,
                "TLS to Redis failed (check the CA, the server's certificate names and the client certificate): {e}"
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
            RedisLimitError::Redis(e) | RedisLimitError::Auth(e) | RedisLimitError::Tls(e) => {
                Some(e)
            }
            RedisLimitError::LocalTier(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for RedisLimitError {
    /// [`Auth`](RedisLimitError::Auth) and [`Tls`](RedisLimitError::Tls)
    /// for the errors that say so, [`Redis`](RedisLimitError::Redis) for
    /// the others.
    fn from(e: redis::RedisError) -> RedisLimitError {
        let auth = e.kind() == redis::ErrorKind::AuthenticationFailed
            || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
            || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"));
        if auth {
            RedisLimitError::Auth(e)
        } else if is_tls_failure(&e) {
            RedisLimitError::Tls(e)
        } else {
            RedisLimitError::Redis(e)
        }
    }
}

/// Whether a rustls error is among the causes of `e` (a handshake that
/// failed, on our side or by the server's alert). redis-rs keeps an I/O
/// error behind an `Arc`, and the rustls error inside the I/O error: both
/// are looked through.
fn is_tls_failure(e: &redis::RedisError) -> bool {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    fn is_tls(e: &(dyn std::error::Error + 'static)) -> bool {
        if e.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(shared) = e.downcast_ref::<Shared>() {
            return is_tls(&**shared);
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            return is_tls(inner);
        }
        e.source().is_some_and(is_tls)
    }
    std::error::Error::source(e).is_some_and(is_tls)
}

/// Why an endpoint could not be described or connected.
#[derive(Debug)]
#[non_exhaustive]
pub enum EndpointError {
    /// The URL does not have one of the forms of [`RedisEndpoint::parse`](crate::RedisEndpoint::parse).
    InvalidUrl {
        /// What is wrong, without the password.
        reason: String,
    },
    /// A CA, certificate or key file could not be read.
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The TLS material does not parse (not PEM, a key without its
    /// certificate, a certificate that does not match its key).
    InvalidTls {
        /// What is wrong.
        reason: String,
    },
    /// A Redis Cluster cannot connect lazily: use
    /// [`RedisEndpoint::connect`](crate::RedisEndpoint::connect).
    ClusterNeedsConnect,
    /// Connecting to a cluster failed.
    Redis(redis::RedisError),
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointError::InvalidUrl { reason } => write!(f, "invalid Redis URL: {reason}"),
            EndpointError::File { path, error } => {
                write!(f, "cannot read {}: {error}", path.display())
            }
            EndpointError::InvalidTls { reason } => {
                write!(f, "invalid Redis TLS material: {reason}")
            }
            EndpointError::ClusterNeedsConnect => f.write_str(
                "a Redis Cluster connects when built (RedisEndpoint::connect), not lazily",
            ),
            EndpointError::Redis(e) => write!(f, "connecting to the Redis Cluster: {e}"),
        }
    }
}

impl std::error::Error for EndpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EndpointError::File { error, .. } => Some(error),
            EndpointError::Redis(e) => Some(e),
            _ => None,
        }
    }
}
