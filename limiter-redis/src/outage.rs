//! What to answer when Redis cannot: [`WhenDown`], the circuit
//! [`Breaker`] that keeps a dead Redis from costing one timeout per call, and
//! the in-process [`LocalFallback`] limiters.
//!
//! # The breaker
//!
//! One `AtomicU64`, `open_until`, in [`LocalClock`] nanoseconds (0 = closed).
//! A failed call sets it to `now + interval`. While `now < open_until` no call
//! goes to Redis. The first caller at or past `open_until` moves it forward by
//! one interval with a CAS and so becomes the only *probe*; everyone else
//! keeps answering from the policy. A probe that succeeds closes the breaker
//! (stores 0); one that fails leaves it open for another interval. So a dead
//! or paused Redis costs at most one timeout per interval per limiter.
//!
//! # The local fallback
//!
//! [`WhenDown::Local`] keeps one in-process
//! [`limiter_core::RateLimiter`] **per key** (a single one per limiter would
//! let one busy key starve all others during an outage), at `share` of the
//! quota: period `t / share` rounded up, burst `max(1, ⌊burst · share⌋)`.
//! With `k` instances behind one Redis, `share = 1/k` keeps the total near the
//! quota while Redis is down. The map holds at most
//! [`LocalFallback::MAX_KEYS`]; when
//! full, limiters that are full again (idle long enough) are dropped, which is
//! exact because a full limiter equals a new one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use limiter_core::{AcquireError, Quota, RateLimiter, composite::Limit};

use crate::admission::{Admission, Source};
use crate::error::RedisLimitError;
use crate::time::LocalClock;

/// What a [`RedisLimiter`](crate::RedisLimiter) answers when Redis fails or
/// times out (and while the circuit breaker stays open after that).
///
/// | policy | answer while Redis is unavailable | use when |
/// |---|---|---|
/// | `Local { share }` (default, `share = 1.0`) | an in-process limiter per key at `share` of the quota | limits should hold roughly through an outage; `share = 1/instances` |
/// | `Open` | `Ok`, source [`Source::FailOpen`] | the limit protects little and availability comes first |
/// | `Closed` | `Err(RateLimited)`, source [`Source::FailClosed`] | exceeding the limit is worse than refusing service (costly downstream, abuse) |
/// | `Error` | the failure itself | the caller has its own fallback |
///
/// # Examples
///
/// ```
/// use limiter_redis::WhenDown;
///
/// assert_eq!(WhenDown::default(), WhenDown::Local { share: 1.0 });
/// // Four instances behind one Redis: each keeps a quarter during an outage.
/// let policy = WhenDown::Local { share: 0.25 };
/// # let _ = policy;
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum WhenDown {
    /// Admit every request: `Ok(Admission)` with [`Source::FailOpen`].
    /// Availability over limits.
    Open,
    /// Deny every request: [`RedisLimitError::RateLimited`] with
    /// [`Source::FailClosed`] and `retry_after` the time until the circuit
    /// breaker probes Redis again. Limits over availability.
    Closed,
    /// Decide with an in-process limiter per key at `share` of the quota
    /// ([`Source::Local`], on grants and denials alike). `share` is in
    /// `(0, 1]`; use `1/instances`. The default, with `share = 1.0`.
    Local {
        /// The fraction of the quota each instance may use on its own.
        share: f64,
    },
    /// Return the error ([`RedisLimitError::Timeout`], [`RedisLimitError::Redis`]
    /// or [`RedisLimitError::CircuitOpen`]) and let the caller decide.
    Error,
}

impl Default for WhenDown {
    fn default() -> WhenDown {
        WhenDown::Local { share: 1.0 }
    }
}

/// The circuit breaker: see the module docs.
#[derive(Debug)]
pub(crate) struct Breaker {
    open_until: AtomicU64,
    interval: u64,
}

impl Breaker {
    pub(crate) fn new(interval: Duration) -> Breaker {
        Breaker {
            open_until: AtomicU64::new(0),
            interval: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Whether this caller may call Redis at local time `now`.
    pub(crate) fn allow(&self, now: u64) -> bool {
        // Relaxed: the breaker publishes no other data; a stale read only
        // lets one more call through or answers one more from the policy.
        let until = self.open_until.load(Ordering::Relaxed);
        if until == 0 {
            return true;
        }
        if now < until {
            return false;
        }
        // Relaxed: as above; the CAS elects exactly one probe per interval.
        self.open_until
            .compare_exchange(
                until,
                self.reopen_at(now),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// How long until the breaker lets a probe through (zero when closed).
    pub(crate) fn remaining(&self, now: u64) -> Duration {
        // Relaxed: an estimate for a retry hint.
        Duration::from_nanos(self.open_until.load(Ordering::Relaxed).saturating_sub(now))
    }

    pub(crate) fn record_success(&self) {
        // Relaxed: as in `allow`.
        self.open_until.store(0, Ordering::Relaxed);
    }

    pub(crate) fn record_failure(&self, now: u64) {
        // Relaxed: as in `allow`.
        self.open_until
            .store(self.reopen_at(now), Ordering::Relaxed);
    }

    fn reopen_at(&self, now: u64) -> u64 {
        now.saturating_add(self.interval).max(1)
    }
}

/// In-process limiters per key for [`WhenDown::Local`].
#[derive(Debug)]
pub(crate) struct LocalFallback {
    quota: Quota,
    share: f64,
    clock: LocalClock,
    limiters: Mutex<HashMap<String, Arc<RateLimiter<LocalClock>>>>,
}

impl LocalFallback {
    /// The most keys the local fallback tracks at once.
    pub(crate) const MAX_KEYS: usize = 4_096;

    /// The fallback for `quota` at `share` of it.
    pub(crate) fn new(
        quota: Quota,
        share: f64,
        clock: LocalClock,
    ) -> Result<LocalFallback, RedisLimitError> {
        let invalid = RedisLimitError::InvalidParameter {
            name: "share",
            requirement: "a number in (0, 1]",
        };
        if !(share > 0.0 && share <= 1.0) {
            return Err(invalid);
        }
        let quota = scaled(quota, share).ok_or(invalid)?;
        Ok(LocalFallback {
            quota,
            share,
            clock,
            limiters: Mutex::new(HashMap::new()),
        })
    }

    /// The per-key limiter, created full on first use.
    fn limiter(&self, key: &str) -> Arc<RateLimiter<LocalClock>> {
        self.limiter_with(key, self.quota)
    }

    /// The per-key limiter at the (already scaled) `quota`, created full on
    /// first use, or afresh if the key was used with another quota.
    fn limiter_with(&self, key: &str, quota: Quota) -> Arc<RateLimiter<LocalClock>> {
        let mut map = self.limiters.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = map.get(key)
            && l.quota() == quota
        {
            return l.clone();
        }
        map.remove(key);
        if map.len() >= Self::MAX_KEYS {
            let burst = self.quota.burst();
            map.retain(|_, l| l.available() < burst);
        }
        let limiter = Arc::new(RateLimiter::with_clock(quota, self.clock.clone()));
        if map.len() < Self::MAX_KEYS {
            map.insert(key.to_owned(), limiter.clone());
        }
        limiter
    }

    /// Decides `n` permits on `key` with a slot at most `max_wait` away.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::RateLimited`] with [`Source::Local`] on denial.
    pub(crate) fn reserve(
        &self,
        key: &str,
        n: u32,
        max_wait: Duration,
    ) -> Result<Admission, RedisLimitError> {
        let limiter = self.limiter(key);
        let reset = |l: &RateLimiter<LocalClock>| {
            let missing = self.quota.burst() - l.available().min(self.quota.burst());
            self.quota.period() * missing
        };
        match limiter.reserve_n(n, max_wait) {
            Ok(r) => Ok(Admission {
                remaining: limiter.available(),
                reset_after: reset(&limiter),
                wait: r.wait(),
                source: Source::Local,
            }),
            Err(e) => {
                let retry_after = match e {
                    AcquireError::RateLimited { wait } => wait,
                    // n ≤ burst was checked against the full quota, but the
                    // local burst may be smaller: no local wait helps, so
                    // suggest one full refill.
                    _ => self.quota.period() * self.quota.burst(),
                };
                Err(RedisLimitError::RateLimited {
                    retry_after,
                    reset_after: reset(&limiter),
                    remaining: limiter.available(),
                    source: Source::Local,
                })
            }
        }
    }

    /// Decides every `(key, quota, n)` of `limits` together, all or nothing
    /// (`limiter_core::composite::reserve_all` over the keys' local limiters, each at
    /// `share` of its own quota).
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::RateLimited`] with [`Source::Local`] on denial;
    /// its `retry_after` is the refusing key's wait.
    pub(crate) fn reserve_all(
        &self,
        limits: &[(&str, Quota, u32)],
        max_wait: Duration,
    ) -> Result<Vec<Admission>, RedisLimitError> {
        let mut limiters = Vec::with_capacity(limits.len());
        for &(key, quota, _) in limits {
            let quota = scaled(quota, self.share).ok_or(RedisLimitError::UnsupportedQuota {
                period: quota.period(),
            })?;
            limiters.push(self.limiter_with(key, quota));
        }
        let parts: Vec<(&dyn Limit, u32)> = limiters
            .iter()
            .zip(limits)
            .map(|(l, &(_, _, n))| (&**l as &dyn Limit, n))
            .collect();
        let full = |l: &RateLimiter<LocalClock>| {
            let missing = l.quota().burst() - l.available().min(l.quota().burst());
            l.quota().period() * missing
        };
        match limiter_core::composite::reserve_all(&parts, max_wait) {
            Ok(granted) => Ok(limiters
                .iter()
                .map(|l| Admission {
                    remaining: l.available(),
                    reset_after: full(l),
                    wait: granted.wait(),
                    source: Source::Local,
                })
                .collect()),
            Err(refused) => {
                let l = &limiters[refused.index];
                let retry_after = match refused.error {
                    AcquireError::RateLimited { wait } => wait,
                    // The local burst is smaller than the request: one full
                    // refill, as for a single key.
                    _ => l.quota().period() * l.quota().burst(),
                };
                Err(RedisLimitError::RateLimited {
                    retry_after,
                    reset_after: full(l),
                    remaining: l.available(),
                    source: Source::Local,
                })
            }
        }
    }

    /// What a try of one permit on `key` would get, changing nothing.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::RateLimited`] with [`Source::Local`] when no
    /// permit is available.
    pub(crate) fn peek(&self, key: &str) -> Result<Admission, RedisLimitError> {
        let limiter = self.limiter(key);
        let remaining = limiter.available();
        let missing = self.quota.burst() - remaining.min(self.quota.burst());
        let reset_after = self.quota.period() * missing;
        if remaining == 0 {
            // An upper bound: the next permit is at most one period away.
            return Err(RedisLimitError::RateLimited {
                retry_after: self.quota.period(),
                reset_after,
                remaining,
                source: Source::Local,
            });
        }
        Ok(Admission {
            remaining,
            reset_after,
            wait: Duration::ZERO,
            source: Source::Local,
        })
    }

    /// Forgets `key`'s local state.
    pub(crate) fn reset(&self, key: &str) {
        let mut map = self.limiters.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(key);
    }
}

/// `quota` at `share` (in `(0, 1]`): period `t / share` rounded up, burst
/// `max(1, ⌊burst · share⌋)`; `None` if that period no longer fits a quota.
fn scaled(quota: Quota, share: f64) -> Option<Quota> {
    let t = (quota.period_nanos() as f64 / share).ceil();
    let burst = ((f64::from(quota.burst()) * share).floor() as u32).max(1);
    // `t` is finite and ≥ 1 here; a period too long for a Quota is an error.
    Quota::from_nanos(t as u64, burst).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::TimeSource;
    use limiter_core::ManualClock;

    #[test]
    fn one_probe_per_interval() {
        let b = Breaker::new(Duration::from_nanos(100));
        assert!(b.allow(0));
        b.record_failure(10);
        assert!(!b.allow(50));
        assert!(!b.allow(109));
        assert!(b.allow(110)); // the probe
        assert!(!b.allow(111)); // everyone else waits for it
        b.record_success();
        assert!(b.allow(112));
    }

    #[test]
    fn the_local_share_scales_rate_and_burst() {
        let clock = ManualClock::new();
        let local = LocalClock::new(&TimeSource::Client(Arc::new(clock.clone())));
        let quota = Quota::per_second(10).unwrap().with_burst(4).unwrap();
        let f = LocalFallback::new(quota, 0.5, local).unwrap();
        assert_eq!(f.quota.period(), Duration::from_millis(200));
        assert_eq!(f.quota.burst(), 2);
        let admitted = (0..5)
            .filter(|_| f.reserve("k", 1, Duration::ZERO).is_ok())
            .count();
        assert_eq!(admitted, 2);
        assert!(matches!(
            f.reserve("k", 1, Duration::ZERO),
            Err(RedisLimitError::RateLimited {
                remaining: 0,
                source: Source::Local,
                ..
            })
        ));
        assert_eq!(f.peek("other").unwrap().remaining, 2); // per key
        clock.advance(Duration::from_millis(200));
        assert!(f.reserve("k", 1, Duration::ZERO).is_ok());
    }

    #[test]
    fn shares_outside_zero_to_one_are_rejected() {
        let clock = LocalClock::new(&TimeSource::Redis);
        let quota = Quota::per_second(10).unwrap();
        for share in [0.0, -1.0, 1.5, f64::NAN] {
            assert!(LocalFallback::new(quota, share, clock.clone()).is_err());
        }
    }
}
