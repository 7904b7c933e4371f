//! [`RedisBackend`]: the layer over a [`RedisLimiter`], so every instance of
//! a service shares one quota per key (feature `redis`).
//!
//! The layer's keys are typed (`IpAddr`, `HeaderValue`, tuples); Redis keys
//! are strings. [`RedisKey`] writes a key as the string the limiter is asked
//! about, injectively: two different keys never share a Redis key. Parts of
//! a composite key are joined with `:`, and a `:` or `\` inside a part is
//! escaped with `\`, so `("a:b", "c")` and `("a", "b:c")` stay apart.
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
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use limiter_redis::{Admission, RedisLimitError, RedisLimiter};

use crate::backend::{Backend, Denial, Grant, Policy};

/// A key that can name a Redis key: written into `out` so that different
/// keys never write the same string.
pub trait RedisKey: Send + Sync + 'static {
    /// Appends this key to `out`.
    fn write_key(&self, out: &mut String);
}

/// Appends `part`, escaping the separator `:` and the escape `\`.
fn escaped(part: &str, out: &mut String) {
    for c in part.chars() {
        if c == ':' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
}

impl RedisKey for () {
    fn write_key(&self, out: &mut String) {
        out.push_str("global");
    }
}

impl RedisKey for IpAddr {
    fn write_key(&self, out: &mut String) {
        escaped(&self.to_string(), out);
    }
}

impl RedisKey for String {
    fn write_key(&self, out: &mut String) {
        escaped(self, out);
    }
}

impl RedisKey for Arc<str> {
    fn write_key(&self, out: &mut String) {
        escaped(self, out);
    }
}

impl RedisKey for &'static str {
    fn write_key(&self, out: &mut String) {
        escaped(self, out);
    }
}

impl RedisKey for u64 {
    fn write_key(&self, out: &mut String) {
        out.push_str(&self.to_string());
    }
}

/// A header value: its text when it is visible ASCII, else `%` and the hex
/// of every byte (a `%` in visible text is written `%25`, so the two never
/// meet).
impl RedisKey for HeaderValue {
    fn write_key(&self, out: &mut String) {
        match self.to_str() {
            Ok(text) => {
                for c in text.chars() {
                    match c {
                        '%' => out.push_str("%25"),
                        ':' | '\\' => {
                            out.push('\\');
                            out.push(c);
                        }
                        c => out.push(c),
                    }
                }
            }
            Err(_) => {
                for b in self.as_bytes() {
                    out.push_str(&format!("%{b:02x}"));
                }
            }
        }
    }
}

impl<A: RedisKey, B: RedisKey> RedisKey for (A, B) {
    fn write_key(&self, out: &mut String) {
        self.0.write_key(out);
        out.push(':');
        self.1.write_key(out);
    }
}

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

impl<K: RedisKey> RedisBackend<K> {
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
        let mut out = String::new();
        key.write_key(&mut out);
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

impl<K: RedisKey> Backend for RedisBackend<K> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key<K: RedisKey>(k: K) -> String {
        let mut out = String::new();
        k.write_key(&mut out);
        out
    }

    #[test]
    fn composite_keys_never_collide() {
        assert_ne!(key(("a:b", "c")), key(("a", "b:c")));
        assert_ne!(key(("a\\", ":b")), key(("a\\:", "b")));
        assert_eq!(key(("user-7", "/orders/{id}")), "user-7:/orders/{id}");
        assert_eq!(key(()), "global");
    }

    #[test]
    fn header_values_are_written_injectively() {
        let visible = HeaderValue::from_static("%ff");
        let opaque = HeaderValue::from_bytes(&[0xff]).unwrap();
        assert_eq!(key(visible), "%25ff");
        assert_eq!(key(opaque), "%ff");
        assert_eq!(key(HeaderValue::from_static("k:1")), "k\\:1");
    }

    #[test]
    fn addresses_are_their_text() {
        assert_eq!(key("10.0.0.7".parse::<IpAddr>().unwrap()), "10.0.0.7");
        assert_eq!(
            key("2001:db8::".parse::<IpAddr>().unwrap()),
            "2001\\:db8\\:\\:"
        );
    }
}
