//! `WarmUpLimiter`: Guava's SmoothWarmingUp, exact under a manual clock.

use std::time::Duration;

use std::sync::mpsc;

use limiter_core::{AcquireError, ManualClock, Quota, QuotaError, WarmUpLimiter, clock::MAX_SPAN};

const MS: Duration = Duration::from_millis(1);

/// 2 permits per second, a 4 s warm-up, cold factor 3: threshold 4 stored
/// permits, maximum 8, cold interval 1.5 s, cool-down 0.5 s per permit.
fn guava() -> (WarmUpLimiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let l = WarmUpLimiter::with_clock(
        Quota::per_second(2).unwrap(),
        Duration::from_secs(4),
        clock.clone(),
    )
    .unwrap();
    (l, clock)
}

/// The time each of `count` blocking takes spent waiting on the clock.
fn waits(l: &WarmUpLimiter<ManualClock>, count: usize) -> Vec<Duration> {
    (0..count)
        .map(|_| {
            let before = l.clock().now_ns();
            l.take().unwrap();
            Duration::from_nanos(l.clock().now_ns() - before)
        })
        .collect()
}

#[test]
fn from_cold_the_waits_follow_guavas_sequence() {
    let (l, clock) = guava();
    assert_eq!(l.max_permits(), 8.0);
    assert_eq!(
        waits(&l, 7),
        [0, 1_375, 1_125, 875, 625, 500, 500].map(|m| m * MS)
    );
    assert_eq!(clock.now_ns(), 5_000_000_000);
}

#[test]
fn a_long_idle_returns_to_cold() {
    let (l, clock) = guava();
    waits(&l, 10);
    // 8 permits at 0.5 s cool-down each refill completely in 4 s; more idle
    // does not store more.
    clock.advance(Duration::from_secs(60));
    assert_eq!(l.stored_permits(), 8.0);
    assert_eq!(
        waits(&l, 6),
        [0, 1_375, 1_125, 875, 625, 500].map(|m| m * MS)
    );
}

#[test]
fn a_short_idle_refills_partly() {
    let (l, clock) = guava();
    waits(&l, 10); // warm: nothing stored, next free 0.5 s after the last take
    clock.advance(Duration::from_millis(1_500)); // 1 s past next free: 2 permits
    assert_eq!(l.stored_permits(), 2.0);
    // Two stored permits below the threshold cost the stable 0.5 s each,
    // like fresh ones.
    assert_eq!(waits(&l, 3), [0, 500, 500].map(|m| m * MS));
    clock.advance(Duration::from_millis(3_500)); // 3 s idle past next free → 6 stored
    assert_eq!(l.stored_permits(), 6.0);
    // The top two (levels 6 and 5) cost 0.875 and 0.625 s.
    assert_eq!(waits(&l, 4), [0, 875, 625, 500].map(|m| m * MS));
}

#[test]
fn try_acquire_is_immediate_or_reports_the_wait() {
    let (l, clock) = guava();
    assert_eq!(l.try_acquire(), Ok(()));
    assert_eq!(
        l.try_acquire(),
        Err(AcquireError::RateLimited { wait: 1_375 * MS })
    );
    clock.advance(1_375 * MS);
    assert_eq!(
        l.try_acquire_n(3),
        Ok(()),
        "a request may take many permits; the next one pays"
    );
    // Levels 7, 6, 5 cost 1.125 + 0.875 + 0.625 s.
    assert_eq!(
        l.try_acquire(),
        Err(AcquireError::RateLimited { wait: 2_625 * MS })
    );
}

#[test]
fn reservations_are_fifo_and_cancel_restores_the_state() {
    let (l, _clock) = guava();
    let a = l.reserve_n(1, Duration::MAX).unwrap();
    let b = l.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!((a.wait(), b.wait()), (Duration::ZERO, 1_375 * MS));
    assert_eq!(
        l.reserve_n(1, 2_000 * MS).unwrap_err(),
        AcquireError::RateLimited { wait: 2_500 * MS }
    );
    assert!(l.cancel(b));
    assert_eq!(l.stored_permits(), 7.0);
    let again = l.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!(again.wait(), 1_375 * MS);
    assert!(!l.cancel(a), "a later reservation depends on it");
}

#[test]
fn the_cold_factor_shapes_the_curve() {
    let quota = Quota::per_second(2).unwrap();
    let l = WarmUpLimiter::builder(quota, Duration::from_secs(4))
        .cold_factor(1.0)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    // No slope: every permit costs the stable interval.
    assert_eq!(waits(&l, 4), [0, 500, 500, 500].map(|m| m * MS));
    // The default factor is 3, the curve of Guava's example.
    let l = WarmUpLimiter::builder(quota, Duration::from_secs(4))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    assert_eq!(waits(&l, 3), [0, 1_375, 1_125].map(|m| m * MS));
    assert!(matches!(
        WarmUpLimiter::builder(quota, Duration::from_secs(4))
            .cold_factor(0.5)
            .build(),
        Err(QuotaError::InvalidParameter {
            name: "cold_factor",
            ..
        })
    ));
    assert!(matches!(
        WarmUpLimiter::builder(quota, Duration::from_secs(4))
            .cold_factor(f64::INFINITY)
            .build(),
        Err(QuotaError::InvalidParameter {
            name: "cold_factor",
            ..
        })
    ));
}

#[test]
fn bad_parameters_are_errors() {
    let clock = ManualClock::new();
    let q = Quota::per_second(2).unwrap();
    assert!(WarmUpLimiter::with_clock(q, Duration::ZERO, clock.clone()).is_err());
    assert!(
        WarmUpLimiter::with_clock(
            q.with_burst(2).unwrap(),
            Duration::from_secs(1),
            clock.clone()
        )
        .is_err()
    );
    assert!(WarmUpLimiter::with_clock(q, Duration::MAX, clock.clone()).is_err());
    let fast = Quota::with_period(Duration::from_nanos(1)).unwrap();
    assert!(matches!(
        WarmUpLimiter::with_clock(fast, Duration::from_secs(10), clock),
        Err(QuotaError::InvalidParameter {
            name: "warm_up",
            ..
        })
    ));
}

#[test]
fn take_past_the_span_returns_at_once() {
    let (l, clock) = guava();
    clock.set(MAX_SPAN + 1);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(l.take());
    });
    let taken = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("take() returned");
    assert_eq!(
        taken,
        Err(AcquireError::TimeOutOfRange { now: MAX_SPAN + 1 })
    );
}

#[test]
fn a_reservation_from_another_limiter_is_refused() {
    let (a, _) = guava();
    let (b, _) = guava();
    let from_a = a.reserve_n(1, Duration::MAX).unwrap();
    let on_b = b.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!(
        (from_a.permits(), from_a.ready_at()),
        (on_b.permits(), on_b.ready_at())
    );
    assert!(!b.cancel(from_a));
    // B still owes the first permit's cost: its next request waits 1.375 s.
    assert_eq!(
        b.try_acquire(),
        Err(AcquireError::RateLimited { wait: 1_375 * MS })
    );
    assert_eq!(b.stored_permits(), 7.0);
    assert!(b.cancel(on_b));
}

/// A script of decisions at clock readings `origin + offset`, its outcomes
/// with every instant given relative to `origin`.
fn warm_up_script(origin: u64) -> Vec<String> {
    let clock = ManualClock::starting_at(origin);
    let l = WarmUpLimiter::with_clock(
        Quota::per_second(2).unwrap(),
        Duration::from_secs(4),
        clock.clone(),
    )
    .unwrap();
    let mut out = Vec::new();
    for _ in 0..6 {
        let before = clock.now_ns();
        out.push(format!(
            "take {:?}",
            l.take().map(|()| clock.now_ns() - before)
        ));
    }
    out.push(format!("try {:?}", l.try_acquire()));
    clock.advance(3_000 * MS);
    // (Not `available` here: with the range it depends on the origin.)
    out.push(format!("stored {}", l.stored_permits()));
    let r = l.reserve_n(3, Duration::ZERO).unwrap();
    out.push(format!(
        "ready {} wait {:?}",
        r.ready_at() - origin,
        r.wait()
    ));
    let next = l.reserve_n(1, Duration::from_secs(10)).unwrap();
    out.push(format!(
        "ready {} wait {:?}",
        next.ready_at() - origin,
        next.wait()
    ));
    out.push(format!("refused {:?}", l.reserve_n(1, 100 * MS)));
    out.push(format!("cancel {}", l.cancel(next)));
    out.push(format!("available {}", l.available()));
    out.push(format!("now {}", clock.now_ns() - origin));
    out
}

#[test]
fn any_clock_origin_decides_as_origin_zero() {
    let at_zero = warm_up_script(0);
    for origin in [1_800_000_000_000_000_000, u64::MAX - 3_600_000_000_000] {
        assert_eq!(warm_up_script(origin), at_zero, "origin {origin}");
    }
}

#[test]
fn the_span_is_counted_from_construction() {
    // A clock an hour from its end: the limiter has one hour of range.
    let origin = u64::MAX - 3_600_000_000_000;
    let clock = ManualClock::starting_at(origin);
    let l = WarmUpLimiter::with_clock(
        Quota::per_second(2).unwrap(),
        Duration::from_secs(4),
        clock.clone(),
    )
    .unwrap();
    clock.set(u64::MAX - 2_000_000_000);
    // Two seconds left: a request proceeds now, but a cost past the end is
    // out of range; cold, the first two permits cost 1.375 + 1.125 s, so
    // exactly the first one fits.
    assert_eq!(l.available(), 1);
    assert_eq!(
        l.try_acquire_n(2),
        Err(AcquireError::TimeOutOfRange {
            now: u64::MAX - 2_000_000_000
        })
    );
    assert_eq!(l.try_acquire_n(1), Ok(()));
    assert_eq!(l.available(), 0);
}

#[test]
fn available_is_the_largest_n_a_try_takes() {
    // Near the span limit, where the cost of n decides, and far from it.
    for (origin, at) in [
        (0, MAX_SPAN - 7_777_000_000),
        (0, MAX_SPAN - 1),
        (0, MAX_SPAN),
        (0, 123_456_789),
        (u64::MAX - 3_600_000_000_000, u64::MAX - 10_000_000_000),
    ] {
        for warm in [0, 3, 9] {
            let try_with = |n: u32| {
                let clock = ManualClock::starting_at(origin);
                let l = WarmUpLimiter::with_clock(
                    Quota::per_second(2).unwrap(),
                    Duration::from_secs(4),
                    clock.clone(),
                )
                .unwrap();
                for _ in 0..warm {
                    l.take().unwrap();
                }
                clock.set(clock.now_ns().max(at));
                (l.available(), l.try_acquire_n(n))
            };
            let (available, _) = try_with(0);
            if available > 0 {
                assert_eq!(try_with(available).1, Ok(()), "{origin} {at} {warm}");
            }
            if available < u32::MAX {
                assert!(
                    try_with(available + 1).1.is_err(),
                    "{origin} {at} {warm}: {available} + 1 taken"
                );
            }
        }
    }
}

trait NowNs {
    fn now_ns(&self) -> u64;
}

impl NowNs for ManualClock {
    fn now_ns(&self) -> u64 {
        limiter_core::Clock::now(self)
    }
}
