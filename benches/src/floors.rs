//! The physical floor: what any limiter on a given clock must at least pay.
//!
//! * a clock read alone;
//! * an uncontended load + compare-and-swap of one `AtomicU64` on its own
//!   cache line (what one admission writes);
//! * that clock's read + load + CAS, the least an admission can cost.
//!
//! Each floor returns `true` so it runs through the same timing loop as the
//! limiters.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use limiter_core::Clock;

/// One clock read; `true` unless the clock reads `u64::MAX`.
pub fn clock_read<C: Clock + 'static>(clock: C) -> Arc<impl Fn() -> bool + Send + Sync> {
    Arc::new(move || black_box(clock.now()) != u64::MAX)
}

/// `std::time::Instant::now()` alone.
pub fn std_instant() -> Arc<impl Fn() -> bool + Send + Sync> {
    Arc::new(|| {
        black_box(std::time::Instant::now());
        true
    })
}

/// governor's default clock read (`QuantaClock::now`).
pub fn governor_clock_read() -> Arc<impl Fn() -> bool + Send + Sync> {
    let clock = governor::clock::QuantaClock::default();
    Arc::new(move || {
        black_box(governor::clock::Clock::now(&clock));
        true
    })
}

/// A load and CAS of one padded word, retried from the value a failed CAS
/// returns (as limiter-core's loop does); uncontended it is one of each.
pub fn load_cas() -> Arc<impl Fn() -> bool + Send + Sync> {
    let word = CachePadded::new(AtomicU64::new(0));
    Arc::new(move || cas_loop(&word, |current| current + 1))
}

/// Load, then CAS `next(current)` until it succeeds; always `true`.
#[inline]
fn cas_loop(word: &AtomicU64, next: impl Fn(u64) -> u64) -> bool {
    // Orderings as in limiter-core's CAS loop: acquire load, AcqRel CAS.
    let mut current = word.load(Ordering::Acquire);
    loop {
        match word.compare_exchange_weak(
            current,
            next(current),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return true,
            Err(actual) => current = actual,
        }
    }
}

/// A read of `clock`, then the load and CAS of [`load_cas`]; the clock
/// reading is written into the word so it cannot be skipped.
pub fn clock_load_cas<C: Clock + 'static>(clock: C) -> Arc<impl Fn() -> bool + Send + Sync> {
    let word = CachePadded::new(AtomicU64::new(0));
    Arc::new(move || {
        let now = clock.now();
        cas_loop(&word, |current| current.max(now) + 1)
    })
}
