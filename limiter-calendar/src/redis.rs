//! [`RedisCalendar`] (feature `redis`): a calendar quota counted in Redis,
//! so the count survives restarts and is shared by every instance.
//!
//! One key per subject and period: the caller's key (already encoded by
//! the caller's key encoding), `:` and the period's start in Unix seconds.
//! The start has no `:`, so splitting at the last `:` recovers both parts:
//! the mapping is injective. One script call per decision reads the count,
//! refuses if `used + n > limit` (writing nothing), else `INCRBY` and
//! `PEXPIRE` until the period's end plus [`EXPIRY_GRACE`], measured on the
//! caller's clock (a relative time to live, so the Redis server's own clock
//! does not matter): keys expire after their period, and the grace covers
//! instances whose clocks lag.
//!
//! The period is found on the caller's clock (Unix nanoseconds), as in
//! [`CalendarLimiter`](crate::CalendarLimiter); instances should run NTP so
//! they agree on which period an instant belongs to.

use core::time::Duration;

use limiter_core::{AcquireError, Clock, Headroom};
use redis::aio::ConnectionLike;

use crate::clock::UnixClock;
use crate::limiter::CalendarGrant;
use crate::period::{CalendarQuota, Window};

/// How long after its period a count key is kept (1 hour).
pub const EXPIRY_GRACE: u32 = 3_600;

const SCRIPT: &str = r"
-- KEYS[1]: the period's count. ARGV: n, limit, time to live (ms).
-- Reply: {granted (0/1), used after}.
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[1])
if used + n > tonumber(ARGV[2]) then
  return {0, used}
end
if n > 0 then
  used = redis.call('INCRBY', KEYS[1], n)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {1, used}
";

/// A calendar quota counted in Redis (see the module documentation).
#[derive(Debug, Clone)]
pub struct RedisCalendar<C: Clock = UnixClock> {
    quota: CalendarQuota,
    script: redis::Script,
    clock: C,
}

impl RedisCalendar<UnixClock> {
    /// `quota` counted in Redis on the system's wall clock.
    pub fn new(quota: CalendarQuota) -> RedisCalendar<UnixClock> {
        RedisCalendar::with_clock(quota, UnixClock)
    }
}

impl<C: Clock> RedisCalendar<C> {
    /// `quota` counted in Redis on `clock` (Unix nanoseconds).
    pub fn with_clock(quota: CalendarQuota, clock: C) -> RedisCalendar<C> {
        RedisCalendar {
            quota,
            script: redis::Script::new(SCRIPT),
            clock,
        }
    }

    /// The quota.
    pub fn quota(&self) -> &CalendarQuota {
        &self.quota
    }

    /// The current period on the limiter's clock.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimeOutOfRange`] for a clock outside 1970 to 2106.
    pub fn window(&self) -> Result<Window, AcquireError> {
        let now = self.clock.now();
        u32::try_from(now / 1_000_000_000)
            .ok()
            .and_then(|second| self.quota.window_at(second).ok())
            .ok_or(AcquireError::TimeOutOfRange { now })
    }

    /// The Redis key holding `key`'s count in the period starting at
    /// `start`.
    pub fn count_key(key: &str, start: u32) -> String {
        format!("{key}:{start}")
    }

    /// Takes `n` permits of `key`'s current period, all or nothing.
    ///
    /// # Errors
    ///
    /// The outer error is Redis's (nothing is known about the count); the
    /// inner one is the decision's, as
    /// [`CalendarLimiter::acquire_n`](crate::CalendarLimiter::acquire_n).
    pub async fn acquire_n<K: ConnectionLike>(
        &self,
        conn: &mut K,
        key: &str,
        n: u32,
    ) -> Result<Result<CalendarGrant, AcquireError>, redis::RedisError> {
        let now = self.clock.now();
        let limit = self.quota.limit();
        let out_of_range = AcquireError::TimeOutOfRange { now };
        if n > limit {
            return Ok(Err(AcquireError::InsufficientCapacity {
                requested: n,
                burst: limit,
            }));
        }
        let Ok(second) = u32::try_from(now / 1_000_000_000) else {
            return Ok(Err(out_of_range));
        };
        let Ok(window) = self.quota.window_at(second) else {
            return Ok(Err(out_of_range));
        };
        let end_ns = u64::from(window.end) * 1_000_000_000;
        let ttl_ms = (end_ns.saturating_sub(now) / 1_000_000) + u64::from(EXPIRY_GRACE) * 1_000;
        let (granted, used): (i64, i64) = self
            .script
            .key(Self::count_key(key, window.start))
            .arg(n)
            .arg(limit)
            .arg(ttl_ms)
            .invoke_async(conn)
            .await?;
        let until =
            Duration::from_nanos((u64::from(window.end) * 1_000_000_000).saturating_sub(now));
        if granted == 0 {
            return Ok(Err(AcquireError::RateLimited { wait: until }));
        }
        let used = u32::try_from(used).unwrap_or(u32::MAX);
        Ok(Ok(CalendarGrant {
            headroom: Headroom {
                remaining: limit.saturating_sub(used),
                refill_in: until,
            },
            reset_at: window.end,
        }))
    }
}
