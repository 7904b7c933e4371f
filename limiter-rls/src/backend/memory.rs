//! The in-memory backends: per-pod limits, or one replica.
//!
//! [`MemoryGcra`] keeps one `limiter_keyed::KeyedLimiter` per distinct
//! limit (`requests_per_unit`, `unit`), keyed by the counter key, so a
//! reload that keeps a limit keeps every key's state, and a changed limit
//! starts fresh. Quota: `requests_per_unit` per unit with a burst of
//! `requests_per_unit` (emission interval `t = unit / requests_per_unit`,
//! rounded up). All or nothing is `limiter_core::try_acquire_all` over the
//! keys' [`KeyLimit`](limiter_keyed::KeyLimit)s: the one composite
//! mechanism of the workspace (exact when single-threaded, stricter never
//! looser under a race; see its docs). A key's reset time is the time
//! until its bucket is full again, `tat − now`, exact to the nanosecond.
//!
//! [`MemoryFixed`] keeps one counter per key (the window it counts and its
//! count) under one mutex: checking every part and then incrementing them
//! happens under the lock, so all or nothing is exact.
//!
//! Both hold at most `max_keys` keys per limit; a new key beyond that is
//! refused (forgetting a limited key would let a flood of new keys reset
//! someone else's limit). Fixed-window keys whose window is over are
//! dropped first.

use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use limiter_core::{Clock, Limit, Quota, try_acquire_all};
use limiter_keyed::{KeyedError, KeyedLimiter};
use tokio::time::Instant;

use super::{Backend, BackendError, Charge, Part, PartState};
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
        PartState {
            remaining: left.remaining,
            reset: if left.remaining >= q.burst() {
                Duration::ZERO
            } else {
                left.refill_in.saturating_add(rest)
            },
            degraded: false,
        }
    }
}

impl<C: Clock + Clone + 'static> Backend for MemoryGcra<C> {
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
            .map(|p| Ok(Self::state(&*self.limiter(p.limit)?, &p.key)))
            .collect()
    }
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
        })
    }
}

impl<C: Clock + 'static> Backend for MemoryFixed<C> {
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
}
