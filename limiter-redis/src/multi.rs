//! Several limits in one atomic decision on Redis:
//! [`RedisLimiter::try_acquire_all`] and [`RedisLimiter::reserve_all`] run
//! one script (`gcra_all.lua`) over every key, so all are charged or none,
//! in one round trip.
//!
//! Invariants:
//!
//! * **All or nothing.** The script checks every key before it writes any;
//!   a denial writes nothing, an error reply (a `tat` past 2^53) writes
//!   nothing.
//! * **The wait is the longest.** A grant's permits are usable after the
//!   longest of the keys' slots; a denial's `retry_after` is when every key
//!   conforms at once (the longest of their waits), exact as of the
//!   decision.
//! * **One slot.** On a Redis Cluster all keys of one decision must hash to
//!   one slot: give them a common hash tag (`{acct:7}:user:42`,
//!   `{acct:7}:global`; see [`RedisLimiter::redis_key`]). The limiter checks
//!   this before calling and returns [`RedisLimitError::CrossSlot`]; one
//!   server takes any keys.
//! * Each key is read under the quota given with it: use a key with one
//!   quota only (as limiters with different quotas use different prefixes).
//! * The deny cache and leases are not used (they hold single-key answers);
//!   the circuit breaker, the call timeout and the failure policy are. Under
//!   [`WhenDown::Local`] the in-process fallback decides all the keys
//!   together with `limiter_core::composite::reserve_all`, all or nothing too.

use core::time::Duration;
use std::collections::HashSet;

use limiter_core::Quota;

use crate::admission::{Admission, Source};
use crate::error::RedisLimitError;
use crate::limiter::RedisLimiter;
use crate::outage::WhenDown;
use crate::script::Call;
use crate::time::ScriptQuota;

/// The multi-key script, shown in `docs/distributed.md`.
pub(crate) const SOURCE: &str = include_str!("gcra_all.lua");

impl RedisLimiter {
    /// Takes `n` permits on every `(key, quota, n)` of `limits` now, in one
    /// atomic script call, or takes none. The answer is one [`Admission`] per
    /// limit, in order (its `remaining` and `reset_after` are that key's).
    /// An empty list is granted without a call.
    ///
    /// # Errors
    ///
    /// * [`RedisLimitError::RateLimited`] if any limit refuses; nothing was
    ///   charged. `retry_after` is when all of them conform at once,
    ///   `remaining` the smallest of the keys', `reset_after` the longest.
    /// * [`RedisLimitError::InsufficientCapacity`] if an `n` exceeds its
    ///   quota's burst, [`RedisLimitError::UnsupportedQuota`] for a quota not
    ///   in whole µs, [`RedisLimitError::DuplicateKey`] for a key listed
    ///   twice, [`RedisLimitError::CrossSlot`] on a cluster for keys without
    ///   a common hash tag: all without a call.
    /// * Otherwise as [`try_acquire_n`](RedisLimiter::try_acquire_n).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let user = Quota::per_second(1)?.with_burst(2)?;
    /// let global = Quota::per_second(1_000)?.with_burst(100)?;
    /// let limiter = RedisLimiter::new(conn, user)?;
    /// // One hash tag: the keys meet in one slot on a cluster too.
    /// let limits = [("{api}:user:42", user, 1), ("{api}:global", global, 1)];
    /// limiter.try_acquire_all(&limits).await?;
    /// limiter.try_acquire_all(&limits).await?;
    /// match limiter.try_acquire_all(&limits).await {
    ///     // The user's limit refused: the global permit was not charged.
    ///     Err(RedisLimitError::RateLimited { retry_after, .. }) => println!("retry in {retry_after:?}"),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_acquire_all(
        &self,
        limits: &[(&str, Quota, u32)],
    ) -> Result<Vec<Admission>, RedisLimitError> {
        self.decide_all(limits, Duration::ZERO, None).await
    }

    /// [`try_acquire_all`](RedisLimiter::try_acquire_all) with the call
    /// timeout cut short at `deadline` when that comes first (a caller's
    /// budget for a whole request of several calls). A deadline already
    /// past makes no call: the failure policy answers at once, as for a
    /// timeout, and the breaker is left as it is.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_all`](RedisLimiter::try_acquire_all).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let q = Quota::per_second(10)?;
    /// let limiter = RedisLimiter::new(conn, q)?;
    /// // Two calls for one request, 10 ms for both together.
    /// let deadline = tokio::time::Instant::now() + Duration::from_millis(10);
    /// limiter.try_acquire_all_until(&[("{d}:a", q, 1)], deadline).await?;
    /// limiter.try_acquire_all_until(&[("{d}:b", q, 1)], deadline).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_acquire_all_until(
        &self,
        limits: &[(&str, Quota, u32)],
        deadline: tokio::time::Instant,
    ) -> Result<Vec<Admission>, RedisLimitError> {
        self.decide_all(limits, Duration::ZERO, Some(deadline))
            .await
    }

    /// Claims the earliest slot at which every `(key, quota, n)` of `limits`
    /// conforms, if it is at most `max_wait` away, in one atomic script call;
    /// otherwise claims nothing. Every [`Admission`] carries the same
    /// `wait`, the longest of the keys' slots; a key whose own slot is
    /// earlier is charged from its own slot (the strict side). This method
    /// does not sleep.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::RateLimited`] at once, consuming nothing, if the
    /// slot is more than `max_wait` away (`retry_after` is the wait the slot
    /// would need); otherwise as
    /// [`try_acquire_all`](RedisLimiter::try_acquire_all).
    ///
    /// # Cancel safety
    ///
    /// As [`reserve_n`](RedisLimiter::reserve_n): a call whose future is
    /// dropped may have been applied; nothing is refunded.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let fast = Quota::per_second(10)?;
    /// let slow = Quota::per_second(4)?;
    /// let limiter = RedisLimiter::new(conn, fast)?;
    /// let limits = [("{job}:a", fast, 1), ("{job}:b", slow, 1)];
    /// limiter.reserve_all(&limits, Duration::from_secs(1)).await?;
    /// let next = limiter.reserve_all(&limits, Duration::from_secs(1)).await?;
    /// assert!(next[0].wait <= Duration::from_millis(250)); // the slower key's slot
    /// tokio::time::sleep(next[0].wait).await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reserve_all(
        &self,
        limits: &[(&str, Quota, u32)],
        max_wait: Duration,
    ) -> Result<Vec<Admission>, RedisLimitError> {
        self.decide_all(limits, max_wait, None).await
    }

    /// The shared path of `try_acquire_all` and `reserve_all`.
    async fn decide_all(
        &self,
        limits: &[(&str, Quota, u32)],
        max_wait: Duration,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Vec<Admission>, RedisLimitError> {
        if limits.is_empty() {
            return Ok(Vec::new());
        }
        let inner = &self.inner;
        let mut args = Vec::with_capacity(3 + 3 * limits.len());
        let max_wait_ns = u64::try_from(max_wait.as_nanos()).unwrap_or(u64::MAX);
        let max_wait_us = (max_wait_ns / 1_000).min(Call::MAX_WAIT_MICROS);
        let (now, _) = inner.clock.script_now();
        args.push(max_wait_us.to_string());
        args.push(inner.margin_ms.to_string());
        args.push(now.map(|n| n.to_string()).unwrap_or_default());
        let mut keys = Vec::with_capacity(limits.len());
        let mut seen = HashSet::with_capacity(limits.len());
        for &(key, quota, n) in limits {
            let q = ScriptQuota::new(quota)?;
            if n > q.burst {
                return Err(RedisLimitError::InsufficientCapacity {
                    requested: n,
                    burst: q.burst,
                });
            }
            let redis_key = self.redis_key(key);
            if !seen.insert(redis_key.clone()) {
                return Err(RedisLimitError::DuplicateKey {
                    key: key.to_owned(),
                });
            }
            keys.push(redis_key);
            args.extend([q.t.to_string(), q.burst.to_string(), n.to_string()]);
        }
        if let Err((first, other)) = inner.conn.same_slot(&keys) {
            return Err(RedisLimitError::CrossSlot {
                first: first.to_owned(),
                other: other.to_owned(),
            });
        }
        let mut conn = inner.conn.clone();
        let script = &inner.script_all;
        let result = self
            .guarded_until(deadline, async {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                script.eval(&mut conn, &keys, &args).await
            })
            .await;
        match result {
            Ok(values) => parse_all(&values, limits.len()),
            Err(e) if e.is_unavailable() => self.fail_all(limits, max_wait, e),
            Err(e) => Err(e),
        }
    }

    /// The failure policy's answer to a multi-key request.
    fn fail_all(
        &self,
        limits: &[(&str, Quota, u32)],
        max_wait: Duration,
        error: RedisLimitError,
    ) -> Result<Vec<Admission>, RedisLimitError> {
        let inner = &self.inner;
        match (&inner.policy, &inner.fallback) {
            (WhenDown::Open, _) => Ok(vec![Admission::open(); limits.len()]),
            (WhenDown::Local { .. }, Some(f)) => f.reserve_all(limits, max_wait),
            _ => self.fail("", 0, max_wait, error).map(|_| Vec::new()),
        }
    }
}

/// The multi-key script's reply: `{allowed, wait|retry, (remaining,
/// reset_after) per key}`, in µs.
fn parse_all(values: &[i64], keys: usize) -> Result<Vec<Admission>, RedisLimitError> {
    let bad = || RedisLimitError::UnexpectedReply(format!("{values:?}"));
    if values.len() != 2 + 2 * keys {
        return Err(bad());
    }
    let micros = |v: i64| {
        u64::try_from(v)
            .map(Duration::from_micros)
            .map_err(|_| bad())
    };
    let time = micros(values[1])?;
    let mut each = Vec::with_capacity(keys);
    for pair in values[2..].chunks_exact(2) {
        each.push(Admission {
            remaining: u32::try_from(pair[0]).map_err(|_| bad())?,
            reset_after: micros(pair[1])?,
            wait: time,
            source: Source::Redis,
        });
    }
    match values[0] {
        1 => Ok(each),
        0 => Err(RedisLimitError::RateLimited {
            retry_after: time,
            reset_after: each.iter().map(|a| a.reset_after).max().unwrap_or_default(),
            remaining: each.iter().map(|a| a.remaining).min().unwrap_or_default(),
            source: Source::Redis,
        }),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_into_one_admission_per_key() {
        let granted = parse_all(&[1, 250_000, 3, 100_000, 0, 500_000], 2).unwrap();
        assert_eq!(granted.len(), 2);
        assert_eq!(granted[0].remaining, 3);
        assert_eq!(granted[1].reset_after, Duration::from_millis(500));
        assert!(granted.iter().all(|a| a.wait == Duration::from_millis(250)));
        match parse_all(&[0, 40_000, 2, 100_000, 0, 900_000], 2) {
            Err(RedisLimitError::RateLimited {
                retry_after,
                reset_after,
                remaining,
                source: Source::Redis,
            }) => {
                assert_eq!(retry_after, Duration::from_millis(40));
                assert_eq!(reset_after, Duration::from_millis(900));
                assert_eq!(remaining, 0);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse_all(&[1, 0, 3], 2).is_err());
        assert!(parse_all(&[2, 0, 3, 0], 1).is_err());
    }
}
