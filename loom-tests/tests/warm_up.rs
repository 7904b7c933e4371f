//! Model checks of the warm-up limiter's CAS protocol on its 128-bit word
//! (mutex-backed stand-in under loom): racing reservations get distinct,
//! consecutive slots in CAS order, and a cancel refunds only the last.
#![cfg(loom)]

use core::time::Duration;

use limiter_core::{Quota, WarmUpLimiter};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{FixedClock, check};

/// 2 permits/s, 4 s warm-up, factor 3: from cold the slots are 0 and
/// 1.375 s, then 2.5 s.
fn cold() -> WarmUpLimiter<FixedClock> {
    WarmUpLimiter::with_clock(
        Quota::per_second(2).unwrap(),
        Duration::from_secs(4),
        FixedClock(0),
    )
    .unwrap()
}

#[test]
fn racing_reservations_get_consecutive_slots() {
    check(
        "2 threads x reserve 1",
        &["first thread first", "second thread first"],
        || {
            let limiter = Arc::new(cold());
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let limiter = limiter.clone();
                    thread::spawn(move || limiter.reserve_n(1, Duration::MAX).unwrap().wait())
                })
                .collect();
            let waits: Vec<Duration> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            let mut sorted = waits.clone();
            sorted.sort();
            assert_eq!(sorted, [Duration::ZERO, Duration::from_millis(1_375)]);
            // The next slot follows both: nothing was lost or handed out twice.
            assert_eq!(
                limiter.reserve_n(1, Duration::MAX).unwrap().wait(),
                Duration::from_millis(2_500)
            );
            if waits[0].is_zero() {
                "first thread first".into()
            } else {
                "second thread first".into()
            }
        },
    );
}

#[test]
fn a_cancel_refunds_only_when_nothing_depends_on_it() {
    check(
        "cancel vs reserve",
        &["refunded", "kept: a later slot depends on it"],
        || {
            let limiter = Arc::new(cold());
            let first = limiter.reserve_n(1, Duration::MAX).unwrap();
            let other = limiter.clone();
            let t = thread::spawn(move || other.reserve_n(1, Duration::MAX).unwrap().wait());
            let refunded = limiter.cancel(first);
            let second = t.join().unwrap();
            if refunded {
                // The cancel came first: the other reservation took slot 0.
                assert_eq!(second, Duration::ZERO);
                "refunded".into()
            } else {
                assert_eq!(second, Duration::from_millis(1_375));
                "kept: a later slot depends on it".into()
            }
        },
    );
}
