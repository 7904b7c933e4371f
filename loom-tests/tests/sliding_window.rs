//! Model checks of the sliding window's CAS protocol (`AtomicState::update`
//! on a 128-bit word; under loom the word is a mutex-backed stand-in whose
//! operations are atomic, so the model explores every interleaving of the
//! loads and CASes the algorithm makes).
#![cfg(loom)]

use core::time::Duration;

use limiter_core::SlidingWindow;
use loom::sync::Arc;
use loom::thread;
use loom_tests::{FixedClock, check};

const W: Duration = Duration::from_nanos(1_000);

/// Two threads each try 2 then 1 permits against a limit of 3 at one
/// instant: every interleaving admits exactly 3, each request all or nothing.
#[test]
fn racing_tries_admit_exactly_the_limit() {
    check(
        "2 threads x try 2, try 1, limit 3",
        &["2+1", "1+2", "3+0", "0+3"],
        || {
            let window = Arc::new(SlidingWindow::with_clock(3, W, FixedClock(500)).unwrap());
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let window = window.clone();
                    thread::spawn(move || {
                        let mut got = 0;
                        for n in [2, 1] {
                            if window.try_acquire_n(n).is_ok() {
                                got += n;
                            }
                        }
                        got
                    })
                })
                .collect();
            let got: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            assert_eq!(got.iter().sum::<u32>(), 3, "exactly the limit");
            assert_eq!(window.available(), 0);
            format!("{}+{}", got[0], got[1])
        },
    );
}

/// A cancel racing an acquisition never lets the window admit more than its
/// limit: the refund only ever removes permits that were counted.
#[test]
fn a_cancel_racing_an_acquisition_never_over_admits() {
    check(
        "cancel vs try, limit 2",
        &["refunded, then granted", "refunded, denied first"],
        || {
            let window = Arc::new(SlidingWindow::with_clock(2, W, FixedClock(500)).unwrap());
            let r = window.reserve_n(2, Duration::ZERO).unwrap();
            let other = window.clone();
            let t = thread::spawn(move || other.try_acquire_n(1).is_ok());
            let refunded = window.cancel(r);
            let granted = t.join().unwrap();
            assert!(refunded);
            let left = window.available();
            assert_eq!(left + u32::from(granted), 2, "in use + free = limit");
            if granted {
                "refunded, then granted".into()
            } else {
                "refunded, denied first".into()
            }
        },
    );
}
