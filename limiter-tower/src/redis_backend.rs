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
//! The limiter's own [`WhenDown`](limiter_redis::WhenDown) answers
//! first: `Local` and `Open` grant (the layer sees a grant), `Closed` denies
//! (the layer answers `429` with the breaker's `Retry-After`). Under
//! `WhenDown::Error` every unavailability (timeout, refused connection,
//! open breaker) reaches the layer as
//! [`Denial::Unavailable`](limiter_core::Denial::Unavailable), and the
//! layer's `fail_open` decides: `503` by default, or the request goes
//! through. Either way the layer counts it in `rate_limit_backend_errors`.
//!
//! # Cancel
//!
//! A Redis grant cannot be given back (the script has no refund, see
//! docs/distributed.md): a delayed request whose client disconnects keeps
//! its slot consumed, and [`AsyncDecide::cancel`] returns `false`.

use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use limiter_async::AsyncDecide;
use limiter_core::{Denial, Grant, Unavailable, debt::Debt};
use limiter_redis::RedisLimiter;

use crate::key_encoding::{EncodeKey, encode_key};

/// The layer's [`Backend`](crate::Backend) over a [`RedisLimiter`], counting by keys of type
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
}

/// One script call per decision, on the encoded key (written by the key
/// encoding); the policy is the limiter's quota.
impl<K: EncodeKey> AsyncDecide for RedisBackend<K> {
    type Key = K;
    type Ticket = ();

    fn cancel(&self, _key: &K, _ticket: ()) -> bool {
        false
    }

    fn decide_async(
        &self,
        key: &K,
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<()>, Denial>> + Send {
        let key = Self::key_string(key);
        async move { self.limiter.decide_async(&key, cost, max_wait).await }
    }

    /// One call of the debt script on the encoded key
    /// ([`RedisLimiter::charge_after`]).
    fn charge_after_async(
        &self,
        key: &K,
        permits: u64,
        cap: Duration,
    ) -> impl Future<Output = Result<Debt, Unavailable>> + Send {
        let key = Self::key_string(key);
        async move {
            self.limiter
                .charge_after(&key, permits, cap)
                .await
                .map_err(|e| Box::new(e) as Unavailable)
        }
    }
}
