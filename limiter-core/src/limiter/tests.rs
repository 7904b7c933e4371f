//! Tests that stall a decision between its load and its CAS (a lost CAS,
//! quota changes that bring the word back) and the change table's size.

use std::boxed::Box;
use std::cell::RefCell;

use core::time::Duration;

use super::*;
use crate::ManualClock;

std::thread_local! {
    /// Run once by the next decision of this thread, between its load
    /// of the word and its CAS: a deterministic stall.
    static STALL: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
}

pub(super) fn stall_before_cas() {
    if let Some(stall) = STALL.with(|s| s.borrow_mut().take()) {
        stall();
    }
}

#[test]
#[cfg(target_pointer_width = "64")]
fn the_change_table_is_432_bytes_and_made_on_first_use() {
    // The size the README states for the block a change allocates.
    assert_eq!(core::mem::size_of::<Changes>(), 432);
    let limiter = RateLimiter::with_clock(Quota::per_second(10).unwrap(), ManualClock::new());
    limiter.try_acquire().unwrap();
    let _ = limiter.reserve_n(1, Duration::MAX).unwrap();
    assert!(
        limiter.changes.get().is_none(),
        "decisions allocate nothing"
    );
    limiter.set_quota(Quota::per_second(20).unwrap());
    assert!(limiter.changes.get().is_some());
}

#[test]
fn a_refusal_after_a_lost_cas_reads_the_clock_again() {
    // t = 100 ms, burst 2, idle at 0. A decision reads the clock at 0;
    // before its CAS the clock reaches 1 s and another caller takes one
    // permit (tat 1.1 s). On the stale reading the retry would refuse
    // (it needs tat ≤ 0.1 s); at 1 s one permit is free.
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap().with_burst(2).unwrap();
    let limiter = std::sync::Arc::new(RateLimiter::with_clock(quota, clock.clone()));
    let other = std::sync::Arc::clone(&limiter);
    STALL.with(|s| {
        *s.borrow_mut() = Some(Box::new(move || {
            clock.set(1_000_000_000);
            other.try_acquire().unwrap();
        }))
    });
    assert_eq!(limiter.try_acquire(), Ok(()));
    // Both permits of the burst are now taken at 1 s.
    assert!(limiter.try_acquire().is_err());
}

#[test]
fn fifteen_quota_changes_during_a_decision_cannot_admit_under_the_old_quota() {
    // A frozen clock and an idle limiter: every change leaves tat = now,
    // so after 15 changes (through generations 2 to 15 and back to 1) the
    // word is bit-identical to the one the stalled decision loaded, but
    // its generation's slot now holds a burst of 1.
    let big = Quota::per_second(1_000).unwrap().with_burst(100).unwrap();
    let small = Quota::per_second(1_000).unwrap();
    let limiter = std::sync::Arc::new(RateLimiter::with_clock(small, ManualClock::new()));
    limiter.set_quota(big); // generation 1
    let word = limiter.state.load();
    let setter = std::sync::Arc::clone(&limiter);
    STALL.with(|s| {
        *s.borrow_mut() = Some(Box::new(move || {
            for _ in 0..15 {
                setter.set_quota(small);
            }
            assert_eq!(setter.state.load(), word, "the ABA precondition");
        }))
    });
    assert_eq!(
        limiter.try_acquire_n(100),
        Err(AcquireError::InsufficientCapacity {
            requested: 100,
            burst: 1
        }),
        "decided under the quota the word names now"
    );
    assert_eq!(limiter.quota(), small);
}

#[test]
fn a_speed_up_and_slow_down_during_a_decision_cannot_admit_under_the_old_quota() {
    // An owed tat returns to the same value when the rate is doubled and
    // halved again; fifteen such changes bring the word back.
    let clock = ManualClock::new();
    let slow = Quota::per_second(10).unwrap().with_burst(4).unwrap();
    let fast = Quota::per_second(20).unwrap().with_burst(4).unwrap();
    let tiny = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let limiter = std::sync::Arc::new(RateLimiter::with_clock(slow, clock));
    limiter.set_quota(slow); // generation 1
    limiter.try_acquire_n(2).unwrap(); // owes 200 ms
    let word = limiter.state.load();
    let setter = std::sync::Arc::clone(&limiter);
    STALL.with(|s| {
        *s.borrow_mut() = Some(Box::new(move || {
            for i in 0..14 {
                setter.set_quota(if i % 2 == 0 { fast } else { slow });
            }
            setter.set_quota(tiny); // same t as slow: the debt is kept
            assert_eq!(setter.state.load(), word, "the ABA precondition");
        }))
    });
    // Under `slow` 2 more permits fit; under `tiny` (burst 1) none.
    assert_eq!(
        limiter.try_acquire_n(2),
        Err(AcquireError::InsufficientCapacity {
            requested: 2,
            burst: 1
        })
    );
    // The void CAS's 2 permits stay counted (200 ms more debt): stricter,
    // never looser. A weak CAS failing spuriously (miri, LL/SC) decides
    // again with nothing void; the loom model pins both outcomes.
    let debt = limiter.try_acquire().unwrap_err().retry_after();
    let void = Some(Duration::from_millis(400));
    let retried = Some(Duration::from_millis(200));
    assert!(debt == void || debt == retried, "{debt:?}");
}
