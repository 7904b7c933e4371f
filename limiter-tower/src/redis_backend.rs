//! [`RedisBackend`]: the layer over a [`RedisLimiter`], so every instance of
//! a service shares one quota per key (feature `redis`).
//!
//! The layer's keys are typed (`IpAddr`, `HeaderValue`, tuples); Redis keys
//! are strings. A key is written by the workspace's one key encoding,
//! [`key_encoding`](crate::key_encoding): injective (two different keys
//! never share a Redis key) and free of hash tags (a client cannot pick
//! its cluster slot).
//!
//! # Failure
//!
//! The limiter's own [`FailurePolicy`](limiter_redis::FailurePolicy) answers
//! first: `Local` and `Open` grant (the layer sees a grant), `Closed` denies
//! (the layer answers `429` with the breaker's `Retry-After`). Under
//! `FailurePolicy::Error` every unavailability (timeout, refused connection,
//! open breaker) reaches the layer as [`Denial::Unavailable`], and the
//! layer's `fail_open` decides: `503` by default, or the request goes
//! through. Either way the layer counts it in `rate_limit_backend_errors`.
//!
//! # Cancel
//!
//! A Redis grant cannot be given back (the script has no refund, see
//! docs/distributed.md): a delayed request whose client disconnects keeps
//! its slot consumed, and [`Backend::cancel`] returns `false`.

use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use limiter_redis::{Admission, RedisLimitError, RedisLimiter};

use crate::backend::{Backend, Denial, Grant, Policy};
use crate::key_encoding::{EncodeKey, encode_key};

/// The layer's [`Backend`] over a [`RedisLimiter`], counting by keys of type
/// `K`.
///
/// # Examples
///
/// ```no_run
/// use limiter_core::Quota;
/// use limiter_redis::RedisLimiter;
/// use limiter_tower::{PeerIp, RateLimitLayer, RedisBackend};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
/// let conn = redis::aio::ConnectionManager::new(client).await?;
/// let shared = RedisLimiter::builder(conn, Quota::per_second(100)?)
///     .key_prefix("api-per-ip")
///     .build()?;
/// let layer = RateLimitLayer::new(RedisBackend::new(shared), PeerIp::new());
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
pub struct RedisBackend<K> {
    limiter: RedisLimiter,
    key: PhantomData<fn(&K)>,
}

impl<K> std::fmt::Debug for RedisBackend<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("limiter", &self.limiter)
            .finish()
    }
}

impl<K> Clone for RedisBackend<K> {
    fn clone(&self) -> RedisBackend<K> {
        RedisBackend {
            limiter: self.limiter.clone(),
            key: PhantomData,
        }
    }
}

impl<K: EncodeKey> RedisBackend<K> {
    /// The backend over `limiter` (its clones share the same connection).
    pub fn new(limiter: RedisLimiter) -> RedisBackend<K> {
        RedisBackend {
            limiter,
            key: PhantomData,
        }
    }

    /// The limiter decisions go to.
    pub fn limiter(&self) -> &RedisLimiter {
        &self.limiter
    }

    /// The string `key` is asked about (the limiter adds its prefix and hash
    /// tag: see [`RedisLimiter::redis_key`]).
    pub fn key_string(key: &K) -> String {
        let mut out = String::with_capacity(48);
        encode_key(key, &mut out);
        out
    }

    /// The grant for `admission`: the time until one more permit is derived
    /// from the time until full (`reset_after`), when the script knows it.
    fn grant(&self, admission: Admission) -> Grant<()> {
        let quota = self.limiter.quota();
        let missing = quota.burst().saturating_sub(admission.remaining);
        let reset = if admission.reset_after.is_zero() || missing == 0 {
            Duration::ZERO
        } else {
            // Full at `reset_after`, one permit every `t` before it: the
            // next of the `missing` ones comes `(missing − 1)·t` earlier.
            admission
                .reset_after
                .saturating_sub(quota.period().saturating_mul(missing - 1))
        };
        Grant {
            ticket: (),
            wait: admission.wait,
            remaining: admission.remaining,
            reset,
        }
    }
}

impl From<RedisLimitError> for Denial {
    fn from(e: RedisLimitError) -> Denial {
        match e {
            RedisLimitError::RateLimited { retry_after, .. } => Denial::RateLimited { retry_after },
            RedisLimitError::InsufficientCapacity { requested, burst } => Denial::OverBurst {
                cost: requested,
                burst,
            },
            other => Denial::Unavailable(Box::new(other)),
        }
    }
}

impl<K: EncodeKey> Backend for RedisBackend<K> {
    type Key = K;
    type Ticket = ();

    fn decide(
        &self,
        key: &K,
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<()>, Denial>> + Send {
        let key = Self::key_string(key);
        let this = self.clone();
        async move {
            match this.limiter.reserve_n(&key, cost, max_wait).await {
                Ok(admission) => Ok(this.grant(admission)),
                Err(e) => Err(Denial::from(e)),
            }
        }
    }

    fn cancel(&self, _key: &K, _ticket: ()) -> bool {
        false
    }

    fn policy(&self, _key: &K) -> Policy {
        self.limiter.quota().into()
    }
}
