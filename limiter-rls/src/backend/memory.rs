//! The in-memory backends: per-pod limits, or one replica.
//!
//! [`MemoryGcra`] keeps one `limiter_keyed::KeyedLimiter` per distinct
//! limit (`requests_per_unit`, `unit`), keyed by the counter key, so a
//! reload that keeps a limit keeps every key's state, and a changed limit
//! starts fresh. Quota: `requests_per_unit` per unit with a burst of
//! `requests_per_unit` (emission interval `t = unit / requests_per_unit`,
//! rounded up). All or nothing is `limiter_core::composite::try_acquire_all` over the
//! keys' [`KeyLimit`](limiter_keyed::KeyLimit)s: the one composite
//! mechanism of the workspace (exact when single-threaded, stricter never
//! looser under a race; see its docs). A key's reset time is the time
//! until its bucket is full again, `tat − now`, exact to the nanosecond.
//!
//! [`MemoryFixed`] keeps one counter per key (the window it counts and its
//! count) under one mutex: checking every part and then incrementing them
//! happens under the lock, so all or nothing is exact.
//!
//! Charges past the limit ([`CounterStore::charge_over`]) go through
//! limiter-keyed's [`ChargeKeyAfter`] (the workspace's one debt mechanism,
//! capped at one unit past the limit: [`debt_cap`]) for GCRA, and count past the limit in the fixed
//! window.
//!
//! Both hold at most `max_keys` keys per limit; a new key beyond that is
//! refused (forgetting a limited key would let a flood of new keys reset
//! someone else's limit). Fixed-window keys whose window is over are
//! dropped first.

use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use limiter_core::{Clock, Quota, composite::Limit, composite::try_acquire_all};
use limiter_keyed::{ChargeKeyAfter, KeyedError, KeyedLimiter};
use tokio::time::Instant;

use super::{BackendError, Charge, CounterStore, Part, PartState};
use crate::config::LimitSpec;
use crate::window;

/// GCRA in memory; see the module docs.
#[derive(Debug)]
pub struct MemoryGcra<C: Clock + Clone = window::UnixClock> {
    limiters: RwLock<HashMap<LimitSpec, Arc<KeyedLimiter<String, C>>>>,
    clock: C,
    max_keys: usize,
}

impl<C: Clock + Clone + 'static> MemoryGcra<C> {
    /// An empty backend reading `clock`, with at most `max_keys` keys per
    /// limit.
    pub fn new(clock: C, max_keys: usize) -> MemoryGcra<C> {
        MemoryGcra {
            limiters: RwLock::new(HashMap::new()),
            clock,
            max_keys,
        }
    }

    /// The GCRA quota of a limit: `n` per unit, burst `n`.
    pub fn quota(limit: LimitSpec) -> Result<Quota, BackendError> {
        let secs = limit
            .unit
            .seconds()
            .ok_or_else(|| BackendError("a limit without a unit".into()))?;
        Quota::per_interval(limit.requests_per_unit, Duration::from_secs(secs))
            .and_then(|q| q.with_burst(limit.requests_per_unit))
            .map_err(|e| BackendError(format!("limit {limit:?}: {e}")))
    }

    /// The state of a limit of 0: nothing is ever admitted; the reset is
    /// the unit (a check a unit later finds the same).
    pub fn never(limit: LimitSpec) -> PartState {
        PartState {
            remaining: 0,
            reset: Duration::from_secs(limit.unit.seconds().unwrap_or(1)),
            degraded: false,
            exceeded: true,
        }
    }

    /// Whether a key `reset` away from full under `quota` is past its limit:
    /// `tat − now > t · burst` (in debt beyond the burst).
    pub fn exceeded(reset: Duration, quota: Quota) -> bool {
        reset.as_nanos() > u128::from(quota.period_nanos()) * u128::from(quota.burst())
    }

    fn limiter(&self, limit: LimitSpec) -> Result<Arc<KeyedLimiter<String, C>>, BackendError> {
        if let Some(l) = self
            .limiters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&limit)
        {
            return Ok(Arc::clone(l));
        }
        let mut map = self.limiters.write().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = map.get(&limit) {
            return Ok(Arc::clone(l));
        }
        let built = KeyedLimiter::builder(Self::quota(limit)?)
            .clock(self.clock.clone())
            .max_keys(self.max_keys)
            .build()
            .map_err(|e| BackendError(e.to_string()))?;
        let l = Arc::new(built);
        map.insert(limit, Arc::clone(&l));
        Ok(l)
    }

    /// What is left of `key` and the exact time until it is full again
    /// (`tat − now`, in the core's nanoseconds; zero when full).
    ///
    /// The core reports the state as a [`Headroom`](limiter_core::Headroom):
    /// `remaining` whole permits and `refill_in`, the time until one more.
    /// One more comes at `tat − (burst − remaining − 1)·t`, so the time
    /// until full is `refill_in + (burst − remaining − 1)·t`, exact to the
    /// nanosecond. A reservation of 0 permits reads that state and writes
    /// nothing; it is asked only of a key that is not full, which holds
    /// state already, so a check never takes a new key's place.
    fn state(limiter: &KeyedLimiter<String, C>, key: &String) -> PartState {
        let q = limiter.quota_of(key);
        let full = PartState {
            remaining: q.burst(),
            reset: Duration::ZERO,
            degraded: false,
            exceeded: false,
        };
        if limiter.available(key) >= q.burst() {
            return full;
        }
        // Refused only for a new key when the map is full: the key was
        // forgotten in between, so it is full again.
        let Ok((_, left)) = limiter.reserve_n_with_headroom(key, 0, Duration::ZERO) else {
            return full;
        };
        let missing_after_next =
            u64::from(q.burst().saturating_sub(left.remaining.saturating_add(1)));
        let rest = Duration::from_nanos(q.period_nanos().saturating_mul(missing_after_next));
        let reset = if left.remaining >= q.burst() {
            Duration::ZERO
        } else {
            left.refill_in.saturating_add(rest)
        };
        PartState {
            remaining: left.remaining,
            reset,
            degraded: false,
            exceeded: Self::exceeded(reset, q),
        }
    }
}

impl<C: Clock + Clone + 'static> CounterStore for MemoryGcra<C> {
    fn store(&self) -> &'static str {
        "memory"
    }

    async fn try_all(&self, parts: &[Part], _deadline: Instant) -> Result<Charge, BackendError> {
        let limiters = parts
            .iter()
            .map(|p| self.limiter(p.limit))
            .collect::<Result<Vec<_>, _>>()?;
        let limits: Vec<_> = parts
            .iter()
            .zip(&limiters)
            .map(|(p, l)| l.limit(p.key.clone()))
            .collect();
        let list: Vec<(&dyn Limit<KeyedError>, u32)> = limits
            .iter()
            .zip(parts)
            .map(|(l, p)| (l as &dyn Limit<KeyedError>, p.hits))
            .collect();
        match try_acquire_all(&list) {
            Ok(()) => Ok(Charge::Granted(
                parts
                    .iter()
                    .zip(&limiters)
                    .map(|(p, l)| Self::state(l, &p.key))
                    .collect(),
            )),
            Err(_) => Ok(Charge::Refused),
        }
    }

    async fn peek(
        &self,
        parts: &[Part],
        _deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        parts
            .iter()
            .map(|p| {
                if p.limit.requests_per_unit == 0 {
                    return Ok(Self::never(p.limit));
                }
                Ok(Self::state(&*self.limiter(p.limit)?, &p.key))
            })
            .collect()
    }

    async fn charge_over(
        &self,
        parts: &[Part],
        _deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        parts
            .iter()
            .map(|p| {
                if p.limit.requests_per_unit == 0 {
                    return Ok(Self::never(p.limit));
                }
                let l = self.limiter(p.limit)?;
                // Past the cap (one unit of debt past the limit) the rest is
                // dropped: checks are refused for that long already.
                l.charge_key_after(&p.key, u64::from(p.hits), debt_cap(p.limit, l.quota()));
                Ok(Self::state(&l, &p.key))
            })
            .collect()
    }
}

/// The cap of a charge past the limit, as limiter-core's `ChargeAfter`
/// takes it (the next permit at most `cap` away): `unit + t`, so that `tat`
/// reaches at most `now + t · burst + unit`, one unit past the limit, and a
/// check is refused for at most one unit after it (a fixed window forgets
/// its excess at its end, at most a unit away).
pub fn debt_cap(limit: LimitSpec, quota: Quota) -> Duration {
    Duration::from_secs(limit.unit.seconds().unwrap_or(1)).saturating_add(quota.period())
}

/// One fixed-window counter: the window it counts (Unix seconds) and its
/// count.
#[derive(Debug, Clone, Copy)]
struct Counter {
    window: u64,
    count: u64,
}

/// Fixed windows in memory; see the module docs.
#[derive(Debug)]
pub struct MemoryFixed<C: Clock = window::UnixClock> {
    counters: Mutex<HashMap<(String, LimitSpec), Counter>>,
    clock: C,
    max_keys: usize,
}

impl<C: Clock + 'static> MemoryFixed<C> {
    /// An empty backend reading `clock` (Unix nanoseconds), with at most
    /// `max_keys` counters.
    pub fn new(clock: C, max_keys: usize) -> MemoryFixed<C> {
        MemoryFixed {
            counters: Mutex::new(HashMap::new()),
            clock,
            max_keys,
        }
    }

    fn unit(p: &Part) -> Result<u64, BackendError> {
        p.limit
            .unit
            .seconds()
            .ok_or_else(|| BackendError("a limit without a unit".into()))
    }

    /// Each part's count in its current window (0 for a new key or a new
    /// window), and whether the key is known or there is room for it.
    fn counts(
        map: &HashMap<(String, LimitSpec), Counter>,
        parts: &[Part],
        now: u64,
    ) -> Result<Vec<u64>, BackendError> {
        parts
            .iter()
            .map(|p| {
                let w = window::window_start(now, Self::unit(p)?);
                Ok(map
                    .get(&(p.key.clone(), p.limit))
                    .filter(|c| c.window == w)
                    .map_or(0, |c| c.count))
            })
            .collect()
    }

    fn state(p: &Part, count: u64, now: u64) -> Result<PartState, BackendError> {
        let remaining = u64::from(p.limit.requests_per_unit).saturating_sub(count);
        Ok(PartState {
            remaining: u32::try_from(remaining).unwrap_or(u32::MAX),
            reset: window::until_window_end(now, Self::unit(p)?),
            degraded: false,
            exceeded: count > u64::from(p.limit.requests_per_unit),
        })
    }
}

impl<C: Clock + 'static> CounterStore for MemoryFixed<C> {
    fn store(&self) -> &'static str {
        "memory"
    }

    async fn try_all(&self, parts: &[Part], _deadline: Instant) -> Result<Charge, BackendError> {
        let now = self.clock.now();
        let mut map = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let counts = Self::counts(&map, parts, now)?;
        if parts
            .iter()
            .zip(&counts)
            .any(|(p, &c)| !window::fits(c, u64::from(p.hits), p.limit.requests_per_unit))
        {
            return Ok(Charge::Refused);
        }
        let new_keys = parts
            .iter()
            .filter(|p| !map.contains_key(&(p.key.clone(), p.limit)))
            .count();
        if map.len() + new_keys > self.max_keys {
            // Drop the counters whose window is over (they are 0 now).
            map.retain(|(_, l), c| {
                l.unit
                    .seconds()
                    .is_some_and(|d| window::window_start(now, d) == c.window)
            });
            if map.len() + new_keys > self.max_keys {
                return Ok(Charge::Refused);
            }
        }
        let mut states = Vec::with_capacity(parts.len());
        for (p, &count) in parts.iter().zip(&counts) {
            let w = window::window_start(now, Self::unit(p)?);
            let after = count + u64::from(p.hits);
            map.insert(
                (p.key.clone(), p.limit),
                Counter {
                    window: w,
                    count: after,
                },
            );
            states.push(Self::state(p, after, now)?);
        }
        Ok(Charge::Granted(states))
    }

    async fn peek(
        &self,
        parts: &[Part],
        _deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        let now = self.clock.now();
        let map = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let counts = Self::counts(&map, parts, now)?;
        parts
            .iter()
            .zip(counts)
            .map(|(p, c)| Self::state(p, c, now))
            .collect()
    }

    async fn charge_over(
        &self,
        parts: &[Part],
        _deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        let now = self.clock.now();
        let mut map = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let mut states = Vec::with_capacity(parts.len());
        for p in parts {
            let w = window::window_start(now, Self::unit(p)?);
            let id = (p.key.clone(), p.limit);
            if !map.contains_key(&id) && map.len() >= self.max_keys {
                map.retain(|(_, l), c| {
                    l.unit
                        .seconds()
                        .is_some_and(|d| window::window_start(now, d) == c.window)
                });
            }
            let full = map.len() >= self.max_keys;
            let count = match map.get_mut(&id) {
                Some(c) => {
                    if c.window != w {
                        *c = Counter {
                            window: w,
                            count: 0,
                        };
                    }
                    c.count = c.count.saturating_add(u64::from(p.hits));
                    c.count
                }
                // No room for a new key: nothing recorded (as `try_all`
                // refuses it).
                None if full => 0,
                None => {
                    let count = u64::from(p.hits);
                    map.insert(id, Counter { window: w, count });
                    count
                }
            };
            states.push(Self::state(p, count, now)?);
        }
        Ok(states)
    }
}
