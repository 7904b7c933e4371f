//! `Metered`: counts under threads, exact.

use std::time::Duration;

use limiter_core::{ManualClock, Metered, Quota, RateLimiter, SlidingWindow, Stats};

#[test]
fn counts_every_decision_under_threads() {
    let limiter = RateLimiter::with_clock(
        Quota::per_second(1).unwrap().with_burst(1_000).unwrap(),
        ManualClock::new(),
    );
    let metered = Metered::new(limiter);
    let threads = if cfg!(miri) { 2 } else { 4 };
    let tries: u64 = if cfg!(miri) { 50 } else { 2_000 };
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..tries {
                    let _ = metered.try_acquire();
                }
            });
        }
    });
    let stats = metered.stats();
    let total = threads * tries;
    assert_eq!(stats.allowed, total.min(1_000));
    assert_eq!(stats.allowed + stats.rejected, total);
    assert_eq!(metered.inner().available() as u64, 1_000 - stats.allowed);
}

#[test]
fn delays_and_cancels_are_counted() {
    let metered = Metered::new(RateLimiter::with_clock(
        Quota::per_second(10).unwrap(),
        ManualClock::new(),
    ));
    let now = metered.reserve_n(1, Duration::ZERO).unwrap();
    let later = metered.reserve_n(1, Duration::from_secs(1)).unwrap();
    let latest = metered.reserve_n(1, Duration::from_secs(1)).unwrap();
    assert!(metered.reserve_n(1, Duration::from_millis(250)).is_err());
    assert!(metered.cancel(latest));
    // Not the last reservation: its slot becomes a refund.
    assert!(metered.cancel(now));
    drop(later);
    assert_eq!(
        metered.stats(),
        Stats {
            allowed: 3,
            rejected: 1,
            delayed: 2,
            wait_total: Duration::from_millis(300),
            cancelled: 2,
        }
    );
}

#[test]
fn any_limiter_can_be_metered() {
    let window = SlidingWindow::with_clock(2, Duration::from_secs(1), ManualClock::new()).unwrap();
    let metered = Metered::new(window);
    assert!(metered.try_acquire_n(2).is_ok());
    assert!(metered.try_acquire().is_err());
    assert_eq!((metered.stats().allowed, metered.stats().rejected), (1, 1));
}

#[test]
fn threads_that_come_and_go_are_all_counted() {
    // Waves of more threads than stripes, each wave joined before the next:
    // stripes pass from exited threads to new ones and no count is lost.
    let limiter = RateLimiter::with_clock(
        Quota::per_second(1).unwrap().with_burst(1_000_000).unwrap(),
        ManualClock::new(),
    );
    let metered = Metered::new(limiter);
    let (waves, threads, tries) = if cfg!(miri) { (2, 3, 5) } else { (6, 24, 200) };
    for _ in 0..waves {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        for _ in 0..tries {
                            metered.try_acquire().unwrap();
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        });
    }
    assert_eq!(metered.stats().allowed, waves * threads * tries);
}
