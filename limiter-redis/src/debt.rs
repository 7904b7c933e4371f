//! [`RedisLimiter::charge_after`]: "admit now, charge the rest later" on
//! Redis, in the same GCRA units as the decisions (`debt.lua`, one script
//! call) and with limiter-core's cap: after a charge the key's next permit
//! is at most `max(cap, t)` away; the permits above the cap are dropped and
//! reported ([`Debt::dropped`]).
//!
//! The script moves the key's `tat` (integer µs) forward from
//! `max(tat, now)` by `k · t`, `k` the most whole permits of the charge
//! that keep `tat ≤ now + tau + t + max(cap − t, 0)`: exactly what
//! limiter-core's [`ChargeAfter`](limiter_core::debt::ChargeAfter) charges a
//! [`RateLimiter`](limiter_core::RateLimiter) in the same state (the
//! tests compare them), in one atomic call instead of one reservation per
//! burst. The cap is taken in whole µs, rounded down (never more debt).
//!
//! No failure policy applies: a charge that cannot reach Redis is an error
//! for the caller to count (the request it belongs to was admitted
//! already). The deny cache stays right: debt only makes a key wait longer
//! than a cached denial says. Leased permits were charged on Redis when
//! they were leased.

use core::time::Duration;

use limiter_core::{Quota, debt::Debt};

use crate::error::RedisLimitError;
use crate::limiter::RedisLimiter;
use crate::time::ScriptQuota;

/// The script source.
pub(crate) const SOURCE: &str = include_str!("debt.lua");

impl RedisLimiter {
    /// Charges `key` `permits` more after admission, as capped debt: its
    /// next permit comes at most `max(cap, t)` after the charge; the part
    /// of `permits` above the cap is reported as dropped. One script call,
    /// through the circuit breaker and the call timeout; never retried.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::Timeout`], [`RedisLimitError::CircuitOpen`] or
    /// [`RedisLimitError::Redis`]: nothing is known to be charged (a call
    /// that timed out may have been applied). No failure policy answers
    /// for Redis here.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::{debt::Debt, Quota};
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(100)?.with_burst(100)?)?;
    /// limiter.try_acquire("tenant-7").await?; // the up-front cost
    /// // The response reported 250 tokens: 249 more, 99 of them from the burst.
    /// let debt = limiter.charge_after("tenant-7", 249, Duration::from_secs(60)).await?;
    /// assert_eq!(debt, Debt { charged: 249, dropped: 0 });
    /// # Ok(())
    /// # }
    /// ```
    pub async fn charge_after(
        &self,
        key: &str,
        permits: u64,
        cap: Duration,
    ) -> Result<Debt, RedisLimitError> {
        self.charge(key, self.inner.script_quota, permits, cap, None)
            .await
    }

    /// [`charge_after`](RedisLimiter::charge_after) on a key decided under
    /// its own `quota` (as [`try_acquire_all`](RedisLimiter::try_acquire_all)
    /// takes one per key), with the call cut short at `deadline` when that
    /// comes before the call timeout (a caller's budget for a whole request).
    ///
    /// # Errors
    ///
    /// As [`charge_after`](RedisLimiter::charge_after), plus
    /// [`RedisLimitError::UnsupportedQuota`] for a quota not in whole µs
    /// (without a call).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let per_minute = Quota::per_minute(2)?.with_burst(2)?;
    /// let limiter = RedisLimiter::new(conn, per_minute)?;
    /// let deadline = tokio::time::Instant::now() + Duration::from_millis(10);
    /// // A cost already incurred: counted past the limit, at most a minute of debt.
    /// limiter
    ///     .charge_after_until("{d}:svc", per_minute, 3, Duration::from_secs(60), deadline)
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn charge_after_until(
        &self,
        key: &str,
        quota: Quota,
        permits: u64,
        cap: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<Debt, RedisLimitError> {
        let quota = ScriptQuota::new(quota)?;
        self.charge(key, quota, permits, cap, Some(deadline)).await
    }

    /// The one script call of both.
    async fn charge(
        &self,
        key: &str,
        quota: ScriptQuota,
        permits: u64,
        cap: Duration,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Debt, RedisLimitError> {
        if permits == 0 {
            return Ok(Debt {
                charged: 0,
                dropped: 0,
            });
        }
        let inner = &self.inner;
        let cap_us = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX);
        // Never more than the cap can hold, so every number stays < 2^53:
        // t · burst < 2^50 µs, and the cap is bounded by the same.
        let cap_us = cap_us.min(crate::script::Call::MAX_WAIT_MICROS);
        let fits = (u64::from(quota.burst) + cap_us / quota.t).saturating_add(1);
        let asked = permits.min(fits);
        let (now, _) = inner.clock.script_now();
        let args = [
            quota.t.to_string(),
            quota.burst.to_string(),
            asked.to_string(),
            cap_us.to_string(),
            inner.margin_ms.to_string(),
            now.map(|n| n.to_string()).unwrap_or_default(),
        ];
        let redis_key = self.redis_key(key);
        let mut conn = inner.conn.clone();
        let script = &inner.script_debt;
        let values = self
            .guarded_until(deadline, async move {
                script.eval(&mut conn, &[&redis_key], &args).await
            })
            .await?;
        let bad = || RedisLimitError::UnexpectedReply(format!("{values:?}"));
        let &[charged, _dropped, _reset_after] = values.as_slice() else {
            return Err(bad());
        };
        let charged = u64::try_from(charged)
            .ok()
            .filter(|&c| c <= asked)
            .ok_or_else(bad)?;
        Ok(Debt {
            charged,
            dropped: permits - charged,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_writes_integers_only() {
        assert!(!SOURCE.contains("tostring"));
        assert!(SOURCE.contains("string.format('%d', new_tat)"));
    }
}
