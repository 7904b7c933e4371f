//! Model checks of concurrent `reserve_n`: the slots handed out are
//! distinct, contiguous (each starts where the previous one ended) and in
//! CAS order (the last slot handed out is the one the state word holds, so
//! only it can be cancelled, then the one before it, and so on).
#![cfg(loom)]

use limiter_core::{RateLimiter, Reservation};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{FixedClock, History, assert_linearizable, check, model_quota, quota};

const T: u64 = 10;
const NOW: u64 = 1_000;
const LABELS: [&str; 3] = ["a", "b", "c"];

/// One thread per entry of `sizes` reserves that many permits with no limit
/// on the wait; then checks linearizability, contiguity and CAS order.
fn reserve_concurrently(burst: u32, sizes: &'static [u32]) -> String {
    let q = quota(T, burst);
    let limiter = Arc::new(RateLimiter::with_clock(q, FixedClock(NOW)));
    let handles: Vec<_> = sizes
        .iter()
        .zip(LABELS)
        .map(|(&n, label)| {
            let limiter = limiter.clone();
            thread::spawn(move || {
                let mut h = History::new();
                let r = h.reserve_n(&limiter, label, n, u64::MAX);
                (h, r.expect("no limit on the wait"))
            })
        })
        .collect();
    let (threads, mut reservations): (Vec<History>, Vec<Reservation>) =
        handles.into_iter().map(|h| h.join().unwrap()).unzip();
    // Coverage label: each thread's slot, in thread order.
    let label = format!(
        "{:?}",
        reservations
            .iter()
            .map(|r| r.ready_at() - NOW)
            .collect::<Vec<_>>()
    );
    // A probe for the whole burst reads the final tat: its wait is exactly
    // tat − now, so the slots must add up to the permits reserved.
    let mut after = History::new();
    let probe = after
        .reserve_n(&limiter, "probe", burst, u64::MAX)
        .expect("no limit on the wait");
    assert_linearizable(model_quota(q), NOW, &History::new(), &threads, &after);
    let total: u32 = sizes.iter().sum();
    assert_eq!(probe.wait().as_nanos(), u128::from(u64::from(total) * T));

    // Distinct and contiguous: at a frozen time with burst 1, the slot of n
    // permits starts at ready_at and the next one starts n·t later.
    // (With a larger burst several slots share ready_at = now.)
    reservations.sort_by_key(|r| r.ready_at());
    if burst == 1 {
        let mut next = NOW;
        for r in &reservations {
            assert_eq!(r.ready_at(), next, "a gap or an overlap: {reservations:?}");
            next += u64::from(r.permits()) * T;
        }
        assert_eq!(probe.ready_at(), next);
    }
    // CAS order: the state word holds the slot handed out last, so undoing
    // from the probe back through the slots in reverse order refunds each in
    // turn and restores the full limiter.
    assert!(limiter.cancel(probe), "the probe came last");
    if burst == 1 {
        while let Some(r) = reservations.pop() {
            assert!(limiter.cancel(r), "each earlier slot in turn");
        }
        assert_eq!(limiter.available(), burst, "every slot was given back");
    }
    label
}

#[test]
fn two_reservations_get_consecutive_slots() {
    check(
        "reserve_n: 2 threads x 1 permit, burst 1",
        &["[0, 10]", "[10, 0]"],
        || reserve_concurrently(1, &[1, 1]),
    );
}

#[test]
fn three_reservations_get_consecutive_slots() {
    let outcomes = [
        "[0, 10, 20]",
        "[0, 20, 10]",
        "[10, 0, 20]",
        "[10, 20, 0]",
        "[20, 0, 10]",
        "[20, 10, 0]",
    ];
    check(
        "reserve_n: 3 threads x 1 permit, burst 1",
        &outcomes,
        || reserve_concurrently(1, &[1, 1, 1]),
    );
}

#[test]
fn reservations_of_different_sizes_tile_the_timeline() {
    // Burst 2: slots of 2, 1 and 1 permits; ready_at = max(tat − 2t, now).
    let outcomes = [
        "[0, 10, 20]",
        "[0, 20, 10]",
        "[10, 0, 20]",
        "[10, 20, 0]",
        "[20, 0, 0]",
    ];
    check("reserve_n: 2 + 1 + 1 permits, burst 2", &outcomes, || {
        reserve_concurrently(2, &[2, 1, 1])
    });
}

#[test]
fn cancelling_the_earliest_slot_first_refunds_it_and_the_latest_unwinds_both() {
    check(
        "reserve_n: 2 slots cancelled earliest first",
        &["[0, 10]", "[10, 0]"],
        || {
            let limiter = Arc::new(RateLimiter::with_clock(quota(T, 1), FixedClock(NOW)));
            let spawn = |l: Arc<RateLimiter<FixedClock>>| {
                thread::spawn(move || l.reserve_n(1, core::time::Duration::MAX).unwrap())
            };
            let (a, b) = (spawn(limiter.clone()), spawn(limiter.clone()));
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            let label = format!("[{}, {}]", a.ready_at() - NOW, b.ready_at() - NOW);
            let (earliest, latest) = if a.ready_at() < b.ready_at() {
                (a, b)
            } else {
                (b, a)
            };
            assert_eq!(latest.ready_at(), earliest.ready_at() + T);
            // A later slot depends on the earliest: it becomes a refund...
            assert!(limiter.cancel(earliest));
            // ...which the cancel of the latest unwinds with it.
            assert!(limiter.cancel(latest));
            assert_eq!(limiter.available(), 1, "both slots back: full again");
            label
        },
    );
}
