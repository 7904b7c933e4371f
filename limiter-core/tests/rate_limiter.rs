//! The public contract of `RateLimiter`, pinned with a manual clock and exact
//! expectations.

use std::time::Duration;

use limiter_core::{AcquireError, ManualClock, Quota, RateLimiter};

const MS: Duration = Duration::from_millis(1);

fn limiter(per_second: u32, burst: u32) -> (RateLimiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::per_second(per_second)
        .unwrap()
        .with_burst(burst)
        .unwrap();
    (RateLimiter::with_clock(quota, clock.clone()), clock)
}

fn rate_limited(wait: Duration) -> Result<(), AcquireError> {
    Err(AcquireError::RateLimited { wait })
}

#[test]
fn burst_at_one_instant_then_one_per_period() {
    let (l, clock) = limiter(10, 3);
    for _ in 0..3 {
        assert_eq!(l.try_acquire(), Ok(()));
    }
    assert_eq!(l.try_acquire(), rate_limited(100 * MS));
    clock.advance(99 * MS);
    assert_eq!(l.try_acquire(), rate_limited(MS));
    clock.advance(MS);
    assert_eq!(l.try_acquire(), Ok(()));
    assert_eq!(l.try_acquire(), rate_limited(100 * MS));
    // A long idle refills exactly the burst, no more.
    clock.advance(Duration::from_secs(3600));
    assert_eq!((0..10).filter(|_| l.try_acquire().is_ok()).count(), 3);
}

#[test]
fn try_acquire_n_is_all_or_nothing() {
    let (l, clock) = limiter(10, 5);
    assert_eq!(l.try_acquire_n(3), Ok(()));
    assert_eq!(l.available(), 2);
    assert_eq!(l.try_acquire_n(3), rate_limited(100 * MS));
    assert_eq!(l.available(), 2, "a refused request takes nothing");
    assert_eq!(l.try_acquire_n(2), Ok(()));
    clock.advance(300 * MS);
    assert_eq!(l.try_acquire_n(3), Ok(()));
}

#[test]
fn more_than_the_burst_is_insufficient_capacity_and_zero_is_free() {
    let (l, _clock) = limiter(10, 5);
    assert_eq!(
        l.try_acquire_n(6),
        Err(AcquireError::InsufficientCapacity {
            requested: 6,
            burst: 5
        })
    );
    assert_eq!(
        l.reserve_n(6, Duration::MAX).unwrap_err(),
        AcquireError::InsufficientCapacity {
            requested: 6,
            burst: 5
        }
    );
    assert_eq!(l.try_acquire_n(0), Ok(()));
    assert_eq!(l.available(), 5);
    l.try_acquire_n(5).unwrap();
    assert_eq!(
        l.try_acquire_n(0),
        Ok(()),
        "zero permits conform even when empty"
    );
}

#[test]
fn a_denial_changes_nothing() {
    let (l, clock) = limiter(10, 2);
    l.try_acquire_n(2).unwrap();
    for _ in 0..100 {
        assert!(l.try_acquire().is_err());
        assert!(l.reserve_n(1, 50 * MS).is_err());
    }
    clock.advance(100 * MS);
    assert_eq!(
        l.try_acquire(),
        Ok(()),
        "the denials pushed nothing into the future"
    );
}

#[test]
fn reservations_claim_consecutive_slots() {
    let (l, clock) = limiter(10, 2);
    let waits: Vec<_> = (0..5)
        .map(|_| l.reserve_n(1, Duration::from_secs(1)).unwrap())
        .collect();
    let expect: [u32; 5] = [0, 0, 100, 200, 300];
    for (r, ms) in waits.iter().zip(expect) {
        assert_eq!(r.wait(), ms * MS);
        assert_eq!(r.ready_at(), u64::from(ms) * 1_000_000);
        assert_eq!(r.permits(), 1);
    }
    // A reservation that would need more than max_wait fails at once and
    // consumes nothing.
    assert_eq!(
        l.reserve_n(2, 399 * MS).unwrap_err(),
        AcquireError::RateLimited { wait: 500 * MS }
    );
    let r = l.reserve_n(2, 500 * MS).unwrap();
    assert_eq!(r.wait(), 500 * MS);
    // The pair occupies the slots of 600 ms and 700 ms (ready at 500 ms with
    // the burst of 2); at 600 ms one more permit fits, then none.
    clock.advance(600 * MS);
    assert_eq!(l.try_acquire(), Ok(()));
    assert_eq!(l.try_acquire(), rate_limited(100 * MS));
}

#[test]
fn cancel_of_the_last_reservation_restores_the_state() {
    let (l, _clock) = limiter(10, 1);
    let _first = l.reserve_n(1, Duration::MAX).unwrap();
    let second = l.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!(second.wait(), 100 * MS);
    assert!(l.cancel(second));
    let again = l.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!(again.wait(), 100 * MS, "the slot is handed out again");
    assert!(l.cancel(again));
    assert_eq!(l.try_acquire(), rate_limited(100 * MS));
}

#[test]
fn cancel_of_an_earlier_reservation_refunds_its_slot_to_the_next_waiter() {
    let (l, clock) = limiter(10, 1);
    l.try_acquire().unwrap();
    let first = l.reserve_n(1, Duration::MAX).unwrap(); // 100 ms
    let second = l.reserve_n(1, Duration::MAX).unwrap(); // 200 ms
    assert!(
        l.cancel(first),
        "its permits go back, though not to the state"
    );
    // The state still owes 300 ms: a try cannot have the refund...
    assert_eq!(l.try_acquire(), rate_limited(300 * MS));
    // ...a waiter gets the refunded slot instead of 300 ms,
    clock.advance(10 * MS);
    let next = l.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!(next.wait(), 90 * MS);
    // and the one after it the fresh slot.
    assert_eq!(l.reserve_n(1, Duration::MAX).unwrap().wait(), 290 * MS);
    // A waiter whose deadline the refund fits, but not the fresh slot.
    let (l, _clock) = limiter(10, 1);
    l.try_acquire().unwrap();
    let first = l.reserve_n(1, Duration::MAX).unwrap();
    let _second = l.reserve_n(1, Duration::MAX).unwrap();
    assert!(l.cancel(first));
    assert_eq!(l.reserve_n(1, 150 * MS).unwrap().wait(), 100 * MS);
    assert_eq!(
        l.reserve_n(1, 150 * MS).unwrap_err(),
        AcquireError::RateLimited { wait: 300 * MS }
    );
    let _ = second;
}

#[test]
fn cancels_in_any_order_unwind_the_whole_queue() {
    // Ten waiters queue behind a drained burst; they give up in the order
    // they queued (as equal timeouts expire). Only the last cancel can move
    // the state, and it then unwinds every refund below it.
    let (l, clock) = limiter(10, 10);
    l.try_acquire_n(10).unwrap();
    let queue: Vec<_> = (0..10)
        .map(|_| l.reserve_n(1, Duration::MAX).unwrap())
        .collect();
    assert_eq!(queue[9].wait(), 1_000 * MS);
    clock.advance(MS);
    for r in queue {
        assert!(l.cancel(r));
    }
    assert_eq!(l.reserve_n(1, Duration::MAX).unwrap().wait(), 99 * MS);
    assert_eq!(l.available(), 0);
}

#[test]
fn a_refund_whose_slot_has_passed_is_not_given() {
    let (l, clock) = limiter(10, 1);
    l.try_acquire().unwrap();
    let first = l.reserve_n(1, Duration::MAX).unwrap(); // 100 ms
    let _second = l.reserve_n(1, Duration::MAX).unwrap(); // 200 ms
    clock.advance(150 * MS);
    assert!(!l.cancel(first), "100 ms has passed: nothing to give back");
    assert_eq!(l.reserve_n(1, Duration::MAX).unwrap().wait(), 150 * MS);
}

#[test]
fn a_reservation_of_another_limiter_is_refused() {
    let (a, _) = limiter(10, 1);
    let (b, _) = limiter(10, 1);
    let from_a = a.reserve_n(1, Duration::MAX).unwrap();
    b.try_acquire().unwrap();
    let _from_b = b.reserve_n(1, Duration::MAX).unwrap();
    // Both states now look alike, but a's reservation is not b's to refund.
    assert!(!b.cancel(from_a));
    assert_eq!(b.try_acquire(), rate_limited(200 * MS));
    assert_eq!(b.available(), 0);
}

#[test]
fn cancel_of_nothing_or_after_a_quota_change_refunds_nothing() {
    let (l, _clock) = limiter(10, 1);
    let empty = l.reserve_n(0, Duration::ZERO).unwrap();
    assert!(!l.cancel(empty));
    let r = l.reserve_n(1, Duration::MAX).unwrap();
    l.set_quota(Quota::per_second(10).unwrap());
    assert!(!l.cancel(r));
    assert_eq!(l.try_acquire(), rate_limited(100 * MS));
}

#[test]
fn take_moves_a_manual_clock_to_the_slot() {
    let (l, clock) = limiter(10, 2);
    assert_eq!(l.take(), Ok(()));
    assert_eq!(l.take(), Ok(()));
    assert_eq!(clock.now_for_test(), 0, "the burst needs no wait");
    assert_eq!(l.take(), Ok(()));
    assert_eq!(clock.now_for_test(), 100_000_000);
    assert_eq!(l.take_n(2), Ok(()));
    assert_eq!(clock.now_for_test(), 300_000_000);
    assert_eq!(
        l.take_n(3),
        Err(AcquireError::InsufficientCapacity {
            requested: 3,
            burst: 2
        })
    );
}

#[test]
fn take_timeout_fails_at_once_consuming_nothing() {
    let (l, clock) = limiter(10, 1);
    l.take().unwrap();
    assert_eq!(
        l.take_timeout(99 * MS),
        Err(AcquireError::RateLimited { wait: 100 * MS })
    );
    assert_eq!(clock.now_for_test(), 0, "no sleeping on a timeout");
    assert_eq!(l.take_timeout(100 * MS), Ok(()));
    assert_eq!(clock.now_for_test(), 100_000_000);
    assert_eq!(l.take_timeout(Duration::MAX), Ok(()));
    assert_eq!(clock.now_for_test(), 200_000_000);
}

#[test]
fn set_quota_faster_keeps_the_fill_level_in_permits() {
    let (l, clock) = limiter(10, 4);
    l.try_acquire_n(4).unwrap(); // empty: owes 400 ms at 10/s
    l.set_quota(Quota::per_second(100).unwrap().with_burst(4).unwrap());
    assert_eq!(l.quota().period(), 10 * MS);
    assert_eq!(
        l.try_acquire(),
        rate_limited(10 * MS),
        "still empty, now in 10 ms steps"
    );
    clock.advance(20 * MS);
    assert_eq!(l.available(), 2);
}

#[test]
fn set_quota_slower_and_smaller_burst() {
    let (l, clock) = limiter(10, 4);
    l.try_acquire_n(2).unwrap(); // half full: owes 200 ms at 10/s
    l.set_quota(Quota::per_second(1).unwrap().with_burst(4).unwrap());
    assert_eq!(l.available(), 2, "half full stays half full");
    l.set_quota(Quota::per_second(1).unwrap().with_burst(1).unwrap());
    // Owes 2 s at 1/s with a burst of 1: the next permit conforms after 2 s.
    assert_eq!(l.try_acquire(), rate_limited(Duration::from_secs(2)));
    clock.advance(Duration::from_secs(2));
    assert_eq!(l.try_acquire(), Ok(()));
    assert_eq!(l.quota().burst(), 1);
}

#[test]
fn an_idle_limiter_stays_full_at_the_new_burst() {
    let (l, _clock) = limiter(10, 2);
    l.set_quota(Quota::per_second(10).unwrap().with_burst(7).unwrap());
    assert_eq!(l.available(), 7);
    assert_eq!(l.try_acquire_n(7), Ok(()));
}

#[test]
fn reservations_keep_their_times_across_a_quota_change() {
    let (l, _clock) = limiter(10, 1);
    l.try_acquire().unwrap();
    let r = l.reserve_n(1, Duration::MAX).unwrap();
    l.set_quota(Quota::per_second(1).unwrap());
    assert_eq!(r.ready_at(), 100_000_000);
    // The 200 ms debt (2 permits at 10/s) is now 2 s (2 permits at 1/s): with
    // a burst of 1 the next permit conforms when that debt is paid.
    assert_eq!(l.try_acquire(), rate_limited(Duration::from_secs(2)));
}

#[test]
fn one_nanosecond_periods_are_exact() {
    let clock = ManualClock::new();
    let q = Quota::with_period(Duration::from_nanos(1))
        .unwrap()
        .with_burst(u32::MAX)
        .unwrap();
    let l = RateLimiter::with_clock(q, clock.clone());
    assert_eq!(l.try_acquire_n(u32::MAX), Ok(()));
    assert_eq!(l.try_acquire(), rate_limited(Duration::from_nanos(1)));
    clock.advance(Duration::from_nanos(5));
    assert_eq!(l.available(), 5);
}

#[test]
fn one_per_hour_with_a_huge_burst() {
    let clock = ManualClock::new();
    let q = Quota::per_hour(1).unwrap().with_burst(100_000).unwrap();
    let l = RateLimiter::with_clock(q, clock.clone());
    assert_eq!(l.available(), 100_000);
    l.try_acquire_n(100_000).unwrap();
    assert_eq!(l.try_acquire(), rate_limited(Duration::from_secs(3600)));
    let r = l.reserve_n(100_000, Duration::MAX).unwrap();
    assert_eq!(r.wait(), Duration::from_secs(3600 * 100_000));
    assert_eq!(
        l.reserve_n(1, Duration::MAX).unwrap().wait(),
        Duration::from_secs(3600 * 100_001)
    );
}

#[test]
fn duration_max_waits_do_not_overflow() {
    let (l, _clock) = limiter(1, 1);
    for i in 0..1_000u64 {
        assert_eq!(
            l.reserve_n(1, Duration::MAX).unwrap().wait(),
            Duration::from_secs(i)
        );
    }
}

#[test]
fn slots_past_the_representable_range_are_refused() {
    let clock = ManualClock::new();
    let q = Quota::per_hour(1).unwrap().with_burst(300_000).unwrap();
    let l = RateLimiter::with_clock(q, clock.clone());
    let _first = l.reserve_n(300_000, Duration::MAX).unwrap();
    // The next 300,000 hours would end past 2^60 ns.
    assert!(matches!(
        l.reserve_n(300_000, Duration::MAX),
        Err(AcquireError::TimeOutOfRange { .. })
    ));
    clock.set(u64::MAX);
    assert_eq!(
        l.try_acquire(),
        Err(AcquireError::TimeOutOfRange { now: u64::MAX })
    );
    assert_eq!(l.available(), 0);
}

#[test]
fn a_clock_that_steps_back_admits_nothing_extra() {
    let (l, clock) = limiter(10, 2);
    clock.set(1_000_000_000);
    l.try_acquire_n(2).unwrap();
    clock.set(500_000_000);
    assert_eq!(l.try_acquire(), rate_limited(600 * MS));
    assert_eq!(l.available(), 0);
    clock.set(1_000_000_000);
    assert_eq!(l.try_acquire(), rate_limited(100 * MS));
    clock.set(1_100_000_000);
    assert_eq!(l.try_acquire(), Ok(()));
}

#[test]
fn threads_at_a_frozen_time_admit_exactly_the_burst() {
    let (l, _clock) = limiter(1, 1_000);
    let admitted = std::sync::atomic::AtomicU32::new(0);
    let threads = if cfg!(miri) { 2 } else { 4 };
    let tries = if cfg!(miri) { 20 } else { 5_000 };
    std::thread::scope(|s| {
        for i in 0..threads {
            let (l, admitted) = (&l, &admitted);
            s.spawn(move || {
                for _ in 0..tries {
                    let n = 1 + (i % 3) as u32;
                    if l.try_acquire_n(n).is_ok() {
                        admitted.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let admitted = admitted.into_inner();
    if cfg!(miri) {
        assert!(admitted <= 1_000);
    } else {
        // Requests of 1 never fail while room remains, so the burst is used up.
        assert_eq!(admitted, 1_000);
    }
    assert_eq!(l.available(), 1_000 - admitted);
}

trait NowForTest {
    fn now_for_test(&self) -> u64;
}

impl NowForTest for ManualClock {
    fn now_for_test(&self) -> u64 {
        limiter_core::Clock::now(self)
    }
}

#[test]
fn any_clock_origin_works() {
    // A clock counting from the Unix epoch, and one an hour before u64::MAX.
    for origin in [1_800_000_000_000_000_000, u64::MAX - 3_600_000_000_000] {
        let clock = ManualClock::starting_at(origin);
        let q = Quota::per_second(10).unwrap().with_burst(2).unwrap();
        let l = RateLimiter::with_clock(q, clock.clone());
        assert_eq!(l.available(), 2);
        assert_eq!(l.try_acquire_n(2), Ok(()));
        assert_eq!(l.try_acquire(), rate_limited(100 * MS));
        let r = l.reserve_n(1, Duration::MAX).unwrap();
        assert_eq!(r.ready_at(), origin + 100_000_000, "slots in clock time");
        clock.advance(100 * MS);
        assert_eq!(l.try_acquire(), rate_limited(100 * MS));
        assert_eq!(l.take(), Ok(()));
        assert_eq!(clock.now_for_test(), origin + 200_000_000);
    }
    // An hour before u64::MAX, the limiter's time ends with the clock's.
    let origin = u64::MAX - 3_600_000_000_000;
    let clock = ManualClock::starting_at(origin);
    let l = RateLimiter::with_clock(Quota::per_minute(1).unwrap(), clock.clone());
    // The 60th permit of the hour ends the limiter's time exactly.
    let slots: Vec<_> = (0..60)
        .map(|_| l.reserve_n(1, Duration::MAX).map(|r| r.wait()))
        .collect();
    assert_eq!(slots[59], Ok(Duration::from_secs(3_540)));
    assert!(matches!(
        l.reserve_n(1, Duration::MAX),
        Err(AcquireError::TimeOutOfRange { .. })
    ));
}

#[test]
fn blocking_takes_past_the_span_fail_instead_of_waiting_for_ever() {
    // On a thread, bounded: a take that spun or slept for good would hang.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let clock = ManualClock::new();
        let l = RateLimiter::with_clock(Quota::per_second(10).unwrap(), clock.clone());
        clock.set(limiter_core::clock::MAX_SPAN + 1);
        let outcomes = [
            l.take(),
            l.take_n(1),
            l.take_timeout(Duration::MAX),
            l.take_n_timeout(1, Duration::from_secs(1)),
        ];
        tx.send(outcomes).unwrap();
    });
    let outcomes = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("blocking takes past the span returned");
    for outcome in outcomes {
        assert_eq!(
            outcome,
            Err(AcquireError::TimeOutOfRange {
                now: limiter_core::clock::MAX_SPAN + 1
            })
        );
    }
}

#[test]
fn available_is_exactly_what_a_try_can_take_near_the_span() {
    let q = Quota::from_nanos(100, 3).unwrap();
    let at = |left: u64| {
        let clock = ManualClock::new();
        let l = RateLimiter::with_clock(q, clock.clone());
        clock.set(limiter_core::clock::MAX_SPAN - left);
        l
    };
    for left in [50, 99, 100, 150, 250, 299, 300, 1_000] {
        let largest_try = (0..=3)
            .rev()
            .find(|&n| at(left).try_acquire_n(n).is_ok())
            .expect("0 permits always succeed");
        assert_eq!(
            at(left).available(),
            largest_try,
            "{left} ns before the end"
        );
    }
    assert_eq!(at(50).available(), 0);
    assert_eq!(at(250).available(), 2);
}
