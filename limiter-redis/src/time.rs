//! Where "now" comes from, and the microsecond quota the script works in.
//!
//! The script keeps every time as integer **microseconds**: Redis 7 runs Lua
//! 5.1, whose numbers are doubles, and a double holds every integer below
//! 2^53 exactly. Microseconds since the Unix epoch stay below 2^53 until the
//! year 2255; nanoseconds would overflow that in 1970 + 104 days. The price is
//! resolution: a period is a whole number of µs, so one key admits at most
//! 1,000,000 permits per second. [`ScriptQuota::new`] rejects other periods
//! with a typed error instead of rounding them behind the caller's back;
//! [`quota_in_micros`] rounds one up explicitly (never admitting more).
//!
//! Two sources of `now` ([`TimeSource`]):
//!
//! * **Redis' `TIME`** (the default): every decision on a key uses one clock,
//!   Redis', so clients' clock skew cannot matter.
//! * **A client clock**: the caller passes `now` in µs (from any
//!   [`Clock`], e.g. [`SystemClock`]) for deployments that forbid `TIME` in
//!   scripts. All clients of a key must then share an epoch and be synced;
//!   a client whose clock runs behind is only stricter on its own requests,
//!   one that runs ahead admits early by its skew.
//!
//! Local bookkeeping (deny cache, leases, circuit breaker, local fallback)
//! reads a [`LocalClock`]: nanoseconds since the limiter was built, from a
//! `MonotonicClock` in `TIME` mode, from the client clock otherwise.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use limiter_core::{Clock, MonotonicClock, Quota};

use crate::error::RedisLimitError;

const NANOS_PER_MICRO: u64 = 1_000;

/// A quota in the script's units: `t` in whole µs and the burst.
///
/// Bounds: a valid [`Quota`] has `t · burst ≤ 2^60 ns`, so here
/// `t · burst < 2^50 µs`, and every sum the script forms with a `now` below
/// 2^52 µs (the year 2112) stays under 2^53.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScriptQuota {
    /// The emission interval in µs, at least 1.
    pub(crate) t: u64,
    /// The burst, at least 1.
    pub(crate) burst: u32,
}

impl ScriptQuota {
    /// The quota in µs, or an error if its period is not a whole number of µs.
    pub(crate) fn new(quota: Quota) -> Result<ScriptQuota, RedisLimitError> {
        let t = quota.period_nanos();
        if t < NANOS_PER_MICRO || !t.is_multiple_of(NANOS_PER_MICRO) {
            return Err(RedisLimitError::UnsupportedQuota {
                period: quota.period(),
            });
        }
        Ok(ScriptQuota {
            t: t / NANOS_PER_MICRO,
            burst: quota.burst(),
        })
    }
}

/// `quota` with its period rounded **up** to a whole microsecond, so that a
/// [`RedisLimiter`](crate::RedisLimiter) accepts it. Rounding up never admits
/// more than asked: `Quota::per_second(3)` (333,333,334 ns) becomes
/// 333,334 µs.
///
/// # Errors
///
/// [`RedisLimitError::UnsupportedQuota`] if the rounded period times the burst
/// no longer fits a [`Quota`].
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::Quota;
/// use limiter_redis::quota_in_micros;
///
/// let q = quota_in_micros(Quota::per_second(3)?.with_burst(5)?).unwrap();
/// assert_eq!(q.period(), Duration::from_micros(333_334));
/// assert_eq!(q.burst(), 5);
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
pub fn quota_in_micros(quota: Quota) -> Result<Quota, RedisLimitError> {
    let t = quota.period_nanos().div_ceil(NANOS_PER_MICRO) * NANOS_PER_MICRO;
    Quota::from_nanos(t, quota.burst()).map_err(|_| RedisLimitError::UnsupportedQuota {
        period: Duration::from_nanos(t),
    })
}

/// Nanoseconds since the Unix epoch from the system's real-time clock: the
/// shared epoch a client-clock deployment needs (see [`TimeSource`]).
///
/// It can step backwards (NTP); the GCRA decision takes `max(tat, now)`, so a
/// backwards step only makes the limiter stricter.
///
/// # Examples
///
/// ```
/// use limiter_core::Clock;
/// use limiter_redis::SystemClock;
///
/// // Nanoseconds since 1970: after 2020-01-01 on any machine set to today.
/// assert!(SystemClock.now() > 1_577_836_800_000_000_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        // Before 1970 reads as 0; u64 ns last until the year 2554.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// Where a [`RedisLimiter`](crate::RedisLimiter) gets `now` for its script
/// (set with
/// [`RedisLimiterBuilder::time_source`](crate::RedisLimiterBuilder::time_source)).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use limiter_redis::{SystemClock, TimeSource};
///
/// assert!(matches!(TimeSource::default(), TimeSource::Redis));
/// let shared_epoch = TimeSource::Client(Arc::new(SystemClock));
/// assert_eq!(format!("{shared_epoch:?}"), "Client(..)");
/// ```
#[derive(Clone, Default)]
pub enum TimeSource {
    /// Redis' own `TIME`, read inside the script (the default).
    #[default]
    Redis,
    /// A client clock read in ns and passed in whole µs; all clients of a key
    /// must share its epoch (use [`SystemClock`] across machines).
    Client(Arc<dyn Clock>),
}

impl fmt::Debug for TimeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeSource::Redis => f.write_str("Redis"),
            TimeSource::Client(_) => f.write_str("Client(..)"),
        }
    }
}

/// Nanoseconds since the limiter was built: the clock of the deny cache, the
/// leases, the circuit breaker and the local fallback limiters.
///
/// It reads the client clock in client-clock mode (floored to the µs the
/// script sees, so cached answers use the script's own instants) and a
/// `MonotonicClock` otherwise.
#[derive(Clone)]
pub(crate) struct LocalClock {
    inner: Arc<dyn Clock>,
    origin: u64,
    micros: bool,
}

impl LocalClock {
    pub(crate) fn new(source: &TimeSource) -> LocalClock {
        let (inner, micros): (Arc<dyn Clock>, bool) = match source {
            TimeSource::Redis => (Arc::new(MonotonicClock::new()), false),
            TimeSource::Client(clock) => (clock.clone(), true),
        };
        let mut clock = LocalClock {
            inner,
            origin: 0,
            micros,
        };
        clock.origin = clock.raw();
        clock
    }

    /// The source reading, floored to µs in client-clock mode.
    fn raw(&self) -> u64 {
        let now = self.inner.now();
        if self.micros {
            now - now % NANOS_PER_MICRO
        } else {
            now
        }
    }

    /// The client clock's reading in µs for the script, or `None` in `TIME`
    /// mode; and the local time of the same instant.
    pub(crate) fn script_now(&self) -> (Option<u64>, u64) {
        let raw = self.raw();
        let local = raw.saturating_sub(self.origin);
        (self.micros.then_some(raw / NANOS_PER_MICRO), local)
    }
}

impl Clock for LocalClock {
    fn now(&self) -> u64 {
        self.raw().saturating_sub(self.origin)
    }
}

impl fmt::Debug for LocalClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalClock")
            .field("origin", &self.origin)
            .field("client", &self.micros)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use limiter_core::ManualClock;

    #[test]
    fn only_whole_microsecond_periods_are_accepted() {
        let q = Quota::with_period(Duration::from_micros(250)).unwrap();
        assert_eq!(
            ScriptQuota::new(q.with_burst(4).unwrap()).unwrap(),
            ScriptQuota { t: 250, burst: 4 }
        );
        for nanos in [1, 999, 1_001, 333_333_334] {
            let q = Quota::with_period(Duration::from_nanos(nanos)).unwrap();
            assert!(matches!(
                ScriptQuota::new(q),
                Err(RedisLimitError::UnsupportedQuota { .. })
            ));
        }
    }

    #[test]
    fn rounding_to_micros_goes_up() {
        let q = Quota::with_period(Duration::from_nanos(1)).unwrap();
        assert_eq!(quota_in_micros(q).unwrap().period_nanos(), 1_000);
        let exact = Quota::with_period(Duration::from_micros(7)).unwrap();
        assert_eq!(quota_in_micros(exact).unwrap(), exact);
    }

    #[test]
    fn the_local_clock_counts_from_construction_in_client_micros() {
        let manual = ManualClock::starting_at(5_000_700);
        let local = LocalClock::new(&TimeSource::Client(Arc::new(manual.clone())));
        assert_eq!(local.script_now(), (Some(5_000), 0));
        manual.advance(Duration::from_nanos(2_500));
        assert_eq!(local.script_now(), (Some(5_003), 3_000));
        assert_eq!(local.now(), 3_000);
    }
}
