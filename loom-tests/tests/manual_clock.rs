//! Model checks of `ManualClock`, whose clones share one `AtomicU64` of
//! nanoseconds: `advance` is a `fetch_update` (no lost update), `set` a
//! store, `sleep_until` a `fetch_max` (never moves time back). All relaxed:
//! the clock publishes nothing but its own value.
#![cfg(loom)]

use core::time::Duration;

use limiter_core::{AcquireError, Clock, ManualClock, RateLimiter, clock::BlockingClock};
use loom::thread;
use loom_tests::{check, quota};

fn on_thread(f: impl FnOnce() + Send + 'static) -> thread::JoinHandle<()> {
    thread::spawn(f)
}

#[test]
fn concurrent_advances_all_count() {
    check("ManualClock: advance vs advance", &["112"], || {
        let clock = ManualClock::starting_at(100);
        let (a, b) = (clock.clone(), clock.clone());
        let ha = on_thread(move || a.advance(Duration::from_nanos(5)));
        let hb = on_thread(move || b.advance(Duration::from_nanos(7)));
        ha.join().unwrap();
        hb.join().unwrap();
        assert_eq!(clock.now(), 112, "an advance was lost");
        clock.now().to_string()
    });
}

#[test]
fn sleep_until_never_moves_time_back() {
    check(
        "ManualClock: advance vs sleep_until",
        &["105", "108"],
        || {
            let clock = ManualClock::starting_at(100);
            let (a, b) = (clock.clone(), clock.clone());
            let ha = on_thread(move || a.advance(Duration::from_nanos(5)));
            let hb = on_thread(move || b.sleep_until(103));
            ha.join().unwrap();
            hb.join().unwrap();
            // advance first: max(105, 103) = 105; sleep first: 103 + 5 = 108.
            let now = clock.now();
            assert!(now == 105 || now == 108, "now = {now}");
            now.to_string()
        },
    );
}

#[test]
fn a_reader_sees_time_move_forward_only() {
    let outcomes = ["0 0", "0 1", "0 2", "1 1", "1 2", "2 2"];
    check(
        "ManualClock: readings are monotone under advances",
        &outcomes,
        || {
            let clock = ManualClock::starting_at(0);
            let writer = clock.clone();
            let reader = clock.clone();
            let hw = on_thread(move || {
                writer.advance(Duration::from_nanos(1));
                writer.advance(Duration::from_nanos(1));
            });
            let hr = thread::spawn(move || (reader.now(), reader.now()));
            hw.join().unwrap();
            let (first, second) = hr.join().unwrap();
            assert!(first <= second && second <= 2, "{first} then {second}");
            assert_eq!(clock.now(), 2);
            format!("{first} {second}")
        },
    );
}

#[test]
fn set_is_seen_whole() {
    check("ManualClock: set vs reader", &["0", "50"], || {
        let clock = ManualClock::starting_at(0);
        let (writer, reader) = (clock.clone(), clock.clone());
        let hw = on_thread(move || writer.set(50));
        let hr = thread::spawn(move || reader.now());
        hw.join().unwrap();
        let seen = hr.join().unwrap();
        assert!(seen == 0 || seen == 50);
        assert_eq!(clock.now(), 50);
        seen.to_string()
    });
}

#[test]
fn a_limiter_on_a_clock_advanced_by_another_thread() {
    let outcomes = [
        "second admitted true, 0 left",
        "second admitted false, 0 left",
        "second admitted false, 1 left",
    ];
    check(
        "ManualClock + RateLimiter: advance vs 2 x try_acquire",
        &outcomes,
        || {
            // t = 10, burst 1: the second permit needs the advance.
            let clock = ManualClock::starting_at(0);
            let limiter =
                loom::sync::Arc::new(RateLimiter::with_clock(quota(10, 1), clock.clone()));
            let hw = on_thread(move || clock.advance(Duration::from_nanos(10)));
            let l = limiter.clone();
            let ha = thread::spawn(move || (l.try_acquire(), l.try_acquire()));
            hw.join().unwrap();
            let (first, second) = ha.join().unwrap();
            assert_eq!(first, Ok(()));
            if let Err(e) = second {
                // Decided at 0 (tat 10) or at 10 (tat 20): one period either way.
                assert_eq!(
                    e,
                    AcquireError::RateLimited {
                        wait: Duration::from_nanos(10)
                    }
                );
            }
            // Over [0, 10] the quota allows burst + 10/t = 2 permits: admitted
            // plus what is still available at 10 never exceeds that.
            let admitted = 1 + u32::from(second.is_ok());
            let left = limiter.available();
            assert!(
                left <= 1 && admitted + left <= 2,
                "admitted {admitted}, {left} left"
            );
            format!("second admitted {}, {left} left", second.is_ok())
        },
    );
}
