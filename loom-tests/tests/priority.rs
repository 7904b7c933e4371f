//! Model checks of the priority tiers: classes racing on the one GCRA word
//! never take more than the burst, and the lower class never eats into the
//! headroom it must leave to class 0.
#![cfg(loom)]

use limiter_core::{PriorityLimiter, Quota};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{FixedClock, check};

#[test]
fn the_low_class_never_takes_class_zeros_headroom() {
    // Burst 4, shares [1.0, 0.5]: class 1 may use 2, class 0 all 4.
    check(
        "class 0 x try 3 vs class 1 x try 1, 1, 1",
        &["0:3 1:1", "0:3 1:0", "0:0 1:2"],
        || {
            let quota = Quota::from_nanos(10, 4).unwrap();
            let tiers = Arc::new(
                PriorityLimiter::with_clock(quota, &[1.0, 0.5], FixedClock(1_000)).unwrap(),
            );
            let high = {
                let tiers = tiers.clone();
                thread::spawn(move || {
                    if tiers.try_acquire_n(0, 3).is_ok() {
                        3
                    } else {
                        0
                    }
                })
            };
            let low = {
                let tiers = tiers.clone();
                thread::spawn(move || {
                    (0..3).filter(|_| tiers.try_acquire_n(1, 1).is_ok()).count() as u32
                })
            };
            let (high, low) = (high.join().unwrap(), low.join().unwrap());
            assert!(low <= 2, "class 1 took {low}, more than its share");
            assert!(high + low <= 4, "more than the burst");
            // Whatever happened, class 0 is not locked out of its headroom.
            assert!(high == 3 || tiers.available(0).unwrap() >= 2);
            format!("0:{high} 1:{low}")
        },
    );
}
