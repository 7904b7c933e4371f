//! Unit tests of the cell: decisions, cancellation, retirement.

use std::boxed::Box;
use std::cell::RefCell;

use super::*;
use core::time::Duration;

use crate::{AcquireError, Headroom, ManualClock, Quota};

fn quota() -> Quota {
    Quota::per_second(10).unwrap().with_burst(3).unwrap()
}

#[test]
fn a_cell_decides_like_the_limiter() {
    let cell = GcraCell::new();
    for _ in 0..3 {
        assert_eq!(cell.try_acquire_n(quota(), 0, 1), Some(Ok(())));
    }
    assert_eq!(
        cell.try_acquire_n(quota(), 0, 1),
        Some(Err(AcquireError::RateLimited {
            wait: Duration::from_millis(100)
        }))
    );
    assert_eq!(cell.tat(), Some(300_000_000));
    assert_eq!(cell.available(quota(), 150_000_000), 1);
    assert_eq!(
        cell.try_acquire_n(quota(), 0, 4),
        Some(Err(AcquireError::InsufficientCapacity {
            requested: 4,
            burst: 3
        }))
    );
}

#[test]
fn reservations_cancel_only_when_last() {
    let cell = GcraCell::new();
    let a = cell
        .reserve_n(quota(), 0, 3, Duration::ZERO)
        .unwrap()
        .unwrap();
    let b = cell
        .reserve_n(quota(), 0, 1, Duration::from_secs(1))
        .unwrap()
        .unwrap();
    assert_eq!(b.wait(), Duration::from_millis(100));
    assert!(!cell.cancel(a));
    assert!(cell.cancel(b));
    assert_eq!(cell.tat(), Some(300_000_000));
}

#[test]
fn only_an_idle_cell_retires_quietly() {
    let cell = GcraCell::new();
    assert_eq!(cell.try_acquire_n(quota(), 0, 1), Some(Ok(())));
    assert!(!cell.is_idle(99_999_999));
    assert!(!cell.retire_if_idle(99_999_999));
    assert!(cell.retire_if_idle(100_000_000));
    assert!(!cell.retire_if_idle(100_000_000));
    assert_eq!(cell.try_acquire_n(quota(), 0, 1), None);
    assert_eq!(cell.available(quota(), 0), 0);
    assert!(!cell.is_idle(u64::MAX));
    assert!(!cell.retire());

    let busy = GcraCell::new();
    assert_eq!(busy.try_acquire_n(quota(), 0, 3), Some(Ok(())));
    assert!(busy.retire());
    assert_eq!(busy.tat(), None);
}
#[test]
fn a_reservation_refunds_only_the_cell_that_issued_it() {
    // Two cells in the same state: a reservation made on one must not
    // turn back the other, although its words match.
    let issuer = GcraCell::new();
    let other = GcraCell::new();
    let r = issuer
        .reserve_n(quota(), 0, 1, Duration::ZERO)
        .unwrap()
        .unwrap();
    assert_eq!(other.try_acquire_n(quota(), 0, 1), Some(Ok(())));
    assert_eq!(issuer.tat(), other.tat());
    assert!(!other.cancel(r), "a foreign reservation refunded a cell");
    assert_eq!(other.available(quota(), 0), 2);
    let r = issuer
        .reserve_n(quota(), 0, 1, Duration::ZERO)
        .unwrap()
        .unwrap();
    assert!(issuer.cancel(r));
    assert_eq!(issuer.available(quota(), 0), 2);
}

#[test]
fn available_is_exactly_what_a_try_takes_near_the_span_limit() {
    let q = Quota::from_nanos(100, 3).unwrap();
    let now = MAX_SPAN - 50;
    let cell = GcraCell::new();
    assert_eq!(cell.available(q, now), 0);
    assert_eq!(
        cell.try_acquire_n(q, now, 1),
        Some(Err(AcquireError::TimeOutOfRange { now }))
    );
    // Everywhere: available() is taken by a try, one more is refused.
    for now in [
        0,
        150,
        MAX_SPAN - 1_000,
        MAX_SPAN - 250,
        MAX_SPAN - 100,
        MAX_SPAN,
    ] {
        for tat in [
            0,
            now.saturating_sub(120),
            now,
            now + 30,
            (now + 150).min(MAX_SPAN),
        ] {
            let a = GcraCell {
                word: AtomicU64::new(tat),
                owner: Owner::new(),
            };
            let n = a.available(q, now);
            assert!(n <= 3);
            let b = GcraCell {
                word: AtomicU64::new(tat),
                owner: Owner::new(),
            };
            assert!(
                matches!(b.try_acquire_n(q, now, n + 1), Some(Err(_))),
                "tat {tat}, now {now}: {} permits were available",
                n + 1
            );
            assert_eq!(
                a.try_acquire_n(q, now, n),
                Some(Ok(())),
                "tat {tat}, now {now}"
            );
        }
    }
}

#[test]
fn a_reservation_since_an_origin_is_ready_at_a_clock_reading() {
    let origin = 1_800_000_000_000_000_000;
    let clock = ManualClock::starting_at(origin + 5);
    let on = CellClock {
        clock: &clock,
        origin,
    };
    let cell = GcraCell::new();
    let first = cell
        .reserve_n_on(on, quota(), 3, Duration::ZERO)
        .unwrap()
        .unwrap();
    assert_eq!(first.ready_at(), origin + 5);
    let second = cell
        .reserve_n_on(on, quota(), 1, Duration::from_secs(1))
        .unwrap()
        .unwrap();
    assert_eq!(second.ready_at(), origin + 5 + 100_000_000);
    // A slot whose clock reading would pass u64::MAX is out of range.
    let late = GcraCell::new();
    let clock = ManualClock::starting_at(u64::MAX - 5);
    let on = CellClock {
        clock: &clock,
        origin: u64::MAX - 10,
    };
    assert!(matches!(
        late.reserve_n_on(on, quota(), 3, Duration::ZERO),
        Some(Ok(_))
    ));
    assert_eq!(
        late.reserve_n_on(on, quota(), 1, Duration::from_secs(1)),
        Some(Err(AcquireError::TimeOutOfRange { now: u64::MAX - 5 }))
    );
}

std::thread_local! {
    /// Run once by the next decision of this thread, between its
    /// decision and its CAS: a deterministic stall.
    static STALL: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
}

pub(super) fn stall_before_cas() {
    if let Some(stall) = STALL.with(|s| s.borrow_mut().take()) {
        stall();
    }
}

#[test]
fn a_decision_after_a_lost_cas_reads_the_clock_again() {
    // t = 100 ms, burst 2, a full cell. A decision reads the clock at 0;
    // before its CAS the clock reaches 1 s and another decision takes
    // one permit (tat 1.1 s). On the stale reading the retry would
    // refuse (it needs tat ≤ 0.1 s); at 1 s one permit is free, and
    // none is left after it.
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap().with_burst(2).unwrap();
    let cell = std::sync::Arc::new(GcraCell::new());
    let (other, winner_clock) = (std::sync::Arc::clone(&cell), clock.clone());
    STALL.with(|s| {
        *s.borrow_mut() = Some(Box::new(move || {
            winner_clock.set(1_000_000_000);
            let on = CellClock {
                clock: &winner_clock,
                origin: 0,
            };
            let _kept = other
                .reserve_n_on(on, quota, 1, Duration::ZERO)
                .unwrap()
                .unwrap();
        }))
    });
    let on = CellClock {
        clock: &clock,
        origin: 0,
    };
    let r = cell
        .reserve_n_on(on, quota, 1, Duration::ZERO)
        .unwrap()
        .expect("decided on a reading taken before the winner's");
    assert_eq!(r.ready_at(), 1_000_000_000);
    // The headroom is that of the fresh reading: 0 left, the next in 100 ms.
    assert_eq!(
        cell.headroom_of(&r, quota, 0),
        Some(Headroom {
            remaining: 0,
            refill_in: Duration::from_millis(100)
        })
    );
}

#[test]
fn a_grant_after_a_lost_cas_reports_the_headroom_of_the_fresh_reading() {
    // t = 100 ms, burst 4. A decision reads 0; meanwhile the clock
    // reaches 150 ms and a winner takes one permit at 150 ms (tat 250
    // ms). The loser's grant leaves tat 350 ms: at 150 ms, 2 permits
    // (and 100 ms to the next); on the stale reading it would say 0.
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap().with_burst(4).unwrap();
    let cell = std::sync::Arc::new(GcraCell::new());
    let (other, winner_clock) = (std::sync::Arc::clone(&cell), clock.clone());
    STALL.with(|s| {
        *s.borrow_mut() = Some(Box::new(move || {
            winner_clock.set(150_000_000);
            let on = CellClock {
                clock: &winner_clock,
                origin: 0,
            };
            let _kept = other
                .reserve_n_on(on, quota, 1, Duration::ZERO)
                .unwrap()
                .unwrap();
        }))
    });
    let on = CellClock {
        clock: &clock,
        origin: 0,
    };
    let r = cell
        .reserve_n_on(on, quota, 1, Duration::ZERO)
        .unwrap()
        .unwrap();
    assert_eq!(
        cell.headroom_of(&r, quota, 0),
        Some(Headroom {
            remaining: 2,
            refill_in: Duration::from_millis(100)
        })
    );
}
