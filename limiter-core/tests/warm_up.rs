//! `WarmUpLimiter`: Guava's SmoothWarmingUp, exact under a manual clock.

use std::time::Duration;

use limiter_core::{AcquireError, ManualClock, Quota, QuotaError, WarmUpLimiter};

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

fn waits(l: &WarmUpLimiter<ManualClock>, count: usize) -> Vec<Duration> {
    (0..count).map(|_| l.take()).collect()
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
    let (l, _clock) = guava();
    let l = l.with_cold_factor(1.0).unwrap();
    // No slope: every permit costs the stable interval.
    assert_eq!(waits(&l, 4), [0, 500, 500, 500].map(|m| m * MS));
    let clock = ManualClock::new();
    let l = WarmUpLimiter::with_clock(Quota::per_second(2).unwrap(), Duration::from_secs(4), clock)
        .unwrap();
    assert!(matches!(
        l.with_cold_factor(0.5),
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

trait NowNs {
    fn now_ns(&self) -> u64;
}

impl NowNs for ManualClock {
    fn now_ns(&self) -> u64 {
        limiter_core::Clock::now(self)
    }
}
