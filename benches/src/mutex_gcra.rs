//! [`MutexGcra`]: the same GCRA arithmetic as `limiter-core`, with `tat`
//! behind a `std::sync::Mutex` instead of in an atomic word: the baseline
//! that shows what the lock-free state buys under contention.
//!
//! The clock is read before the lock is taken (as `limiter-core` reads it
//! before its load), so the critical section is only the decision and the
//! write: the strongest honest version of a locked limiter.

use std::sync::{Mutex, PoisonError};

use limiter_core::{Clock, Quota, clock::MAX_SPAN};

/// A GCRA limiter whose `tat` (ns since the clock's origin) is guarded by a
/// mutex. Same decision as `limiter_core::RateLimiter::try_acquire_n`:
/// `tat' = max(tat, now) + n·t`, admitted iff `tat' ≤ now + t·burst`.
#[derive(Debug)]
pub struct MutexGcra<C: Clock> {
    tat: Mutex<u64>,
    t: u64,
    burst: u32,
    clock: C,
}

impl<C: Clock> MutexGcra<C> {
    /// A full limiter for `quota` reading `clock`.
    pub fn new(quota: Quota, clock: C) -> MutexGcra<C> {
        let t = u64::try_from(quota.period().as_nanos()).unwrap_or(MAX_SPAN);
        MutexGcra {
            tat: Mutex::new(0),
            t,
            burst: quota.burst(),
            clock,
        }
    }

    /// Takes `n` permits if all are available now; returns whether it did.
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> bool {
        let now = self.clock.now();
        if n > self.burst || now > MAX_SPAN {
            return false;
        }
        let cost = u64::from(n) * self.t;
        let burst_span = self.t * u64::from(self.burst);
        // A poisoned lock only means another benchmark thread panicked; the
        // u64 inside is always valid.
        let mut tat = self.tat.lock().unwrap_or_else(PoisonError::into_inner);
        let new_tat = (*tat).max(now) + cost;
        if new_tat > now + burst_span || new_tat > MAX_SPAN {
            return false;
        }
        *tat = new_tat;
        true
    }

    /// Takes one permit if it is available now; returns whether it did.
    #[inline]
    pub fn try_acquire(&self) -> bool {
        self.try_acquire_n(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;
    use limiter_core::{ManualClock, RateLimiter};

    #[test]
    fn admits_exactly_what_limiter_core_admits() {
        let quota = Quota::per_second(100).unwrap().with_burst(5).unwrap();
        let clock = ManualClock::new();
        let ours = RateLimiter::with_clock(quota, clock.clone());
        let locked = MutexGcra::new(quota, clock.clone());
        for step in 0..2_000u64 {
            // An irregular walk, with pauses and some steps back.
            match step % 7 {
                0 => clock.advance(Duration::from_millis(3)),
                3 => clock.set(clock.now().saturating_sub(1_000_000)),
                5 => clock.advance(Duration::from_millis(25)),
                _ => {}
            }
            let n = (step % 3) as u32 + 1;
            assert_eq!(
                ours.try_acquire_n(n).is_ok(),
                locked.try_acquire_n(n),
                "step {step}"
            );
        }
    }
}
