//! Model check of `Metered`'s counters: under loom every thread shares
//! the shared stripe, the most contended case, and no count may be lost.
#![cfg(loom)]

use limiter_core::{Metered, Quota, RateLimiter};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{FixedClock, check};

#[test]
fn racing_decisions_are_all_counted() {
    check("2 threads x 2 tries, burst 3", &["counted"], || {
        let limiter = RateLimiter::with_clock(Quota::from_nanos(10, 3).unwrap(), FixedClock(100));
        let metered = Arc::new(Metered::new(limiter));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let metered = metered.clone();
                thread::spawn(move || {
                    for _ in 0..2 {
                        let _ = metered.try_acquire();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let stats = metered.stats();
        assert_eq!((stats.allowed, stats.rejected), (3, 1));
        "counted".into()
    });
}
