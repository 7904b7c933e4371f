//! `PriorityLimiter`: classes sharing one GCRA state, exact under a manual
//! clock.

use std::sync::Arc;
use std::time::Duration;

use limiter_core::{AcquireError, ManualClock, PriorityLimiter, Quota, QuotaError};

const MS: Duration = Duration::from_millis(1);

fn tiers(shares: &[f64]) -> (PriorityLimiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap().with_burst(10).unwrap();
    (
        PriorityLimiter::with_clock(quota, shares, clock.clone()).unwrap(),
        clock,
    )
}

#[test]
fn the_lower_class_leaves_the_headroom_to_class_zero() {
    let (p, _clock) = tiers(&[1.0, 0.5]);
    assert_eq!((p.available(0).unwrap(), p.available(1).unwrap()), (10, 5));
    assert_eq!(p.try_acquire_n(1, 5), Ok(()));
    assert_eq!(
        p.try_acquire_n(1, 1),
        Err(AcquireError::RateLimited { wait: 100 * MS })
    );
    assert_eq!(p.available(0).unwrap(), 5);
    assert_eq!(p.try_acquire_n(0, 5), Ok(()));
    assert_eq!(
        p.try_acquire_n(0, 1),
        Err(AcquireError::RateLimited { wait: 100 * MS })
    );
    assert_eq!(
        p.try_acquire_n(1, 1),
        Err(AcquireError::RateLimited { wait: 600 * MS })
    );
}

#[test]
fn class_zero_is_never_starved_by_lower_classes() {
    let (p, clock) = tiers(&[1.0, 0.7, 0.3]);
    // Classes 1 and 2 hammer the limiter for 10 s of virtual time; class 0
    // asks for 3 permits (its headroom over class 1) every second.
    for _ in 0..100 {
        for _ in 0..5 {
            let _ = p.try_acquire_n(2, 1);
            let _ = p.try_acquire_n(1, 1);
        }
        clock.advance(100 * MS);
        if p.clock().now_ns().is_multiple_of(1_000_000_000) {
            assert_eq!(
                p.try_acquire_n(0, 3),
                Ok(()),
                "class 0 always has its 3 permits of headroom"
            );
        }
    }
}

#[test]
fn only_class_zero_reserves_future_slots() {
    let (p, _clock) = tiers(&[1.0, 0.5]);
    p.try_acquire_n(0, 10).unwrap();
    let r = p.reserve_n(0, 2, Duration::from_secs(1)).unwrap();
    assert_eq!(r.wait(), 200 * MS);
    // Class 1 must wait for its own test: tat = 1.2 s, usable 5 → 0.7 s + 0.1 s.
    assert_eq!(
        p.reserve_n(1, 1, Duration::from_secs(60)).unwrap_err(),
        AcquireError::RateLimited { wait: 800 * MS }
    );
    assert!(p.cancel(r));
}

#[test]
fn per_class_views_are_limiters() {
    let (p, _clock) = tiers(&[1.0, 0.5]);
    let p = Arc::new(p);
    let low = p.class(1).unwrap();
    let high = p.class(0).unwrap();
    assert_eq!(low.try_acquire_n(5), Ok(()));
    assert!(low.try_acquire().is_err());
    assert_eq!(high.try_acquire_n(5), Ok(()));
    assert_eq!(
        p.class(2).unwrap_err(),
        AcquireError::UnknownClass {
            class: 2,
            classes: 2,
            requested: 0
        }
    );
    assert_eq!(
        p.try_acquire_n(7, 1),
        Err(AcquireError::UnknownClass {
            class: 7,
            classes: 2,
            requested: 1
        })
    );
    assert_eq!(
        low.try_acquire_n(6),
        Err(AcquireError::InsufficientCapacity {
            requested: 6,
            burst: 5
        })
    );
}

#[test]
fn shares_are_validated() {
    let clock = ManualClock::new();
    let q = Quota::per_second(10).unwrap().with_burst(10).unwrap();
    let bad = |shares: &[f64]| PriorityLimiter::with_clock(q, shares, clock.clone()).unwrap_err();
    // Decimal shares are exact: 0.7 and 0.3 of 10 are 7 and 3, 0.1 is 1.
    let ok = PriorityLimiter::with_clock(q, &[1.0, 0.7, 0.3, 0.1], clock.clone()).unwrap();
    assert_eq!(
        (0..4).map(|c| ok.available(c).unwrap()).collect::<Vec<_>>(),
        [10, 7, 3, 1]
    );
    for shares in [
        &[][..],
        &[0.9],
        &[1.0, 1.1],
        &[1.0, 0.3, 0.5],
        &[1.0, f64::NAN],
        &[1.0, 0.0],
        &[1.0, 0.05],
    ] {
        assert!(
            matches!(
                bad(shares),
                QuotaError::InvalidParameter { name: "shares", .. }
            ),
            "{shares:?}"
        );
    }
}

#[test]
fn a_quota_change_keeps_each_class_share() {
    let (p, _clock) = tiers(&[1.0, 0.5]);
    p.set_quota(Quota::per_second(10).unwrap().with_burst(4).unwrap())
        .unwrap();
    assert_eq!((p.available(0).unwrap(), p.available(1).unwrap()), (4, 2));
    // A burst of 1 would leave class 1 nothing: refused, nothing changed.
    assert!(matches!(
        p.set_quota(Quota::per_second(10).unwrap()),
        Err(QuotaError::InvalidParameter {
            name: "quota.burst",
            ..
        })
    ));
    assert_eq!(p.quota().burst(), 4);
}

#[test]
fn available_of_an_unknown_class_is_an_error() {
    let (p, _clock) = tiers(&[1.0, 0.5]);
    assert_eq!(
        p.available(2),
        Err(AcquireError::UnknownClass {
            class: 2,
            classes: 2,
            requested: 0
        })
    );
    assert_eq!(p.available(1), Ok(5));
}

/// The permits class 1 may use of an idle limiter with `burst`, and what
/// class 0 then still gets: `(usable, headroom)`.
fn split(share: f64, burst: u32) -> (u32, u32) {
    let quota = Quota::from_nanos(1, burst).unwrap();
    let p = PriorityLimiter::with_clock(quota, &[1.0, share], ManualClock::new()).unwrap();
    let usable = p.available(1).unwrap();
    p.try_acquire_n(1, usable).unwrap();
    assert!(
        p.try_acquire_n(1, 1).is_err(),
        "share {share}, burst {burst}"
    );
    (usable, p.available(0).unwrap())
}

/// 2^-k exactly (`powi` may be inexact, and miri makes it so).
fn two_to_minus(k: u32) -> f64 {
    1.0 / (1u64 << k) as f64
}

#[test]
fn the_headroom_is_exact_and_never_rounds_against_class_zero() {
    const MAX: u32 = u32::MAX;
    // headroom = ceil((1 − share) · burst), usable = burst − headroom.
    for (share, burst, headroom) in [
        // Just below 1.0: class 0 keeps one permit.
        (0.9999999999, 10, 1),
        (1.0 - f64::EPSILON / 2.0, 10, 1),
        (1.0 - f64::EPSILON / 2.0, MAX, 1),
        (1.0 - two_to_minus(40), MAX, 1),
        (0.999999999, 10, 1),
        (0.999999999, 2_000_000_000, 2),
        (0.999999999, MAX, 5),
        // Decimal shares are the decimals they are written as.
        (0.5, 3, 2),
        (0.7, 10, 3),
        (0.3, 10, 7),
        (0.1, 10, 9),
        (0.1000000001, 10, 9),
        // Just above 0: class 1 gets the whole permits its share holds.
        (0.000000001, 1_000_000_000, 999_999_999),
        (0.000000002, MAX, MAX - 8),
        (two_to_minus(30), MAX, MAX - 3),
        (two_to_minus(30), 1 << 31, (1 << 31) - 2),
    ] {
        assert_eq!(
            split(share, burst),
            (burst - headroom, headroom),
            "share {share}, burst {burst}"
        );
    }
    // A share that holds less than a permit of the burst is refused.
    let quota = Quota::per_second(1).unwrap().with_burst(10).unwrap();
    for share in [
        0.0999999999,
        0.000000001,
        two_to_minus(30),
        f64::MIN_POSITIVE,
    ] {
        assert!(
            PriorityLimiter::with_clock(quota, &[1.0, share], ManualClock::new()).is_err(),
            "share {share}"
        );
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

#[test]
fn available_is_exactly_what_a_class_can_take_near_the_span() {
    // t = 100 ns, burst 3, the lower class held to 2: near the end of the
    // limiter's span, each class is told exactly what a try of it takes.
    let quota = Quota::from_nanos(100, 3).unwrap();
    let at = |left: u64| {
        let clock = ManualClock::new();
        let p = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone()).unwrap();
        clock.set(limiter_core::clock::MAX_SPAN - left);
        p
    };
    for left in [50, 150, 250, 1_000] {
        for class in 0..2 {
            let largest_try = (0..=3)
                .rev()
                .find(|&n| at(left).try_acquire_n(class, n).is_ok())
                .expect("0 permits always succeed");
            assert_eq!(
                at(left).available(class),
                Ok(largest_try),
                "class {class}, {left} ns before the end"
            );
        }
    }
    assert_eq!(at(50).available(0), Ok(0));
    assert_eq!(at(250).available(0), Ok(2));
}
