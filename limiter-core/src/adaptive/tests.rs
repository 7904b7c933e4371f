//! Exact sequences under a [`ManualClock`].

use super::*;
use crate::clock::ManualClock;
use crate::error::{AcquireError, QuotaError};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn percentile(clock: &ManualClock) -> AdaptiveLimiter<PercentileWindow, ManualClock> {
    AdaptiveBuilder::with_clock(PercentileWindow::new(100 * MS, SEC), clock.clone())
        .min_rate(100.0)
        .max_rate(1000.0)
        .build()
        .unwrap()
}

/// One interval of `samples` latencies, then the crossing record at its end.
fn interval_of<P: RateController>(
    a: &AdaptiveLimiter<P, ManualClock>,
    clock: &ManualClock,
    latency: Duration,
) {
    for _ in 0..99 {
        a.record(latency);
    }
    clock.advance(SEC);
    a.record(latency);
}

/// Acquires `n` permits spaced by the current period, from now on, then
/// moves the clock to the end of the interval that started now.
fn use_permits<P: RateController>(
    a: &AdaptiveLimiter<P, ManualClock>,
    clock: &ManualClock,
    n: u32,
) {
    let start = clock.now();
    let period = a.limiter().quota().period();
    for _ in 0..n {
        assert_eq!(a.try_acquire(), Ok(()));
        clock.advance(period);
    }
    clock.set(start);
}

#[test]
fn a_worked_sequence_cuts_twice_then_raises_only_when_used() {
    let clock = ManualClock::new();
    let a = percentile(&clock);
    assert_eq!(a.current_rate(), 1000.0);
    assert_eq!(a.last_decision(), None);

    interval_of(&a, &clock, 150 * MS);
    assert_eq!(a.current_rate(), 800.0);
    interval_of(&a, &clock, 150 * MS);
    assert_eq!(a.current_rate(), 640.0);
    assert_eq!(a.limiter().quota().period_nanos(), 1_562_500);
    let d = a.last_decision().unwrap();
    assert_eq!(
        (d.previous_rate, d.rate, d.at),
        (800.0, 640.0, 2_000_000_000)
    );
    assert!(matches!(d.reason, Reason::LatencyAbove { .. }));

    // The same fast interval twice: with 10 % use it holds, with full use
    // it raises by 10 %.
    use_permits(&a, &clock, 64);
    interval_of(&a, &clock, 40 * MS);
    assert_eq!(a.current_rate(), 640.0);
    let held = a.last_decision().unwrap();
    assert!(held.app_limited);
    assert_eq!((held.admitted, held.allowed), (64, 640));
    assert_eq!(held.proposed_rate, 704.0);
    assert!(matches!(held.reason, Reason::LatencyBelow { .. }));

    use_permits(&a, &clock, 640);
    interval_of(&a, &clock, 40 * MS);
    assert_eq!(a.current_rate(), 704.0);
    let raised = a.last_decision().unwrap();
    assert!(!raised.app_limited);
    assert_eq!((raised.admitted, raised.allowed), (640, 640));
    assert_eq!(a.limiter().quota().period_nanos(), 1_420_455);
    assert_eq!(a.decisions(), 4);
}

#[test]
fn only_the_call_that_crosses_the_end_adjusts() {
    let clock = ManualClock::new();
    let a = percentile(&clock);
    a.record(150 * MS);
    clock.advance(SEC - Duration::from_nanos(1));
    assert_eq!(a.tick(), None);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(a.tick().map(|d| d.rate), Some(800.0));
    assert_eq!(a.tick(), None, "the next interval started at the claim");
    // An empty window holds.
    clock.advance(5 * SEC);
    let d = a.tick().unwrap();
    assert_eq!((d.rate, d.reason), (800.0, Reason::NoSignal));
}

#[test]
fn the_rate_is_clamped_at_both_ends() {
    let clock = ManualClock::new();
    let policy = EwmaAimd::new(100 * MS)
        .alpha(1.0)
        .decrease(0.5)
        .increase(2.0);
    let a = AdaptiveBuilder::with_clock(policy, clock.clone())
        .min_rate(100.0)
        .max_rate(1000.0)
        .build()
        .unwrap();
    for expected in [500.0, 250.0, 125.0, 100.0, 100.0] {
        interval_of(&a, &clock, 200 * MS);
        assert_eq!(a.current_rate(), expected);
    }
    let d = a.last_decision().unwrap();
    assert_eq!((d.proposed_rate, d.rate), (50.0, 100.0));
    // Fully used intervals of low latency double up to the ceiling.
    for expected in [200.0, 400.0, 800.0, 1000.0, 1000.0] {
        let n = a.current_rate() as u32;
        use_permits(&a, &clock, n);
        interval_of(&a, &clock, MS);
        assert_eq!(a.current_rate(), expected);
    }
    assert_eq!(a.last_decision().unwrap().proposed_rate, 2000.0);
}

#[test]
fn load_based_follows_the_signal_within_the_guard() {
    let clock = ManualClock::new();
    let load = AtomicU64::new(0.95f64.to_bits());
    let policy = LoadBased::new(400.0, || f64::from_bits(load.load(Ordering::Relaxed)));
    let a = AdaptiveBuilder::with_clock(policy, clock.clone())
        .min_rate(100.0)
        .max_rate(1000.0)
        .build()
        .unwrap();
    clock.advance(SEC);
    assert_eq!(a.tick().unwrap().rate, 200.0);
    assert_eq!(
        a.last_decision().unwrap().reason,
        Reason::LoadHigh { load: 0.95 }
    );
    load.store(0.1f64.to_bits(), Ordering::Relaxed);
    clock.advance(SEC);
    let idle = a.tick().unwrap();
    assert_eq!((idle.rate, idle.app_limited), (200.0, true));
    use_permits(&a, &clock, 200);
    clock.advance(SEC);
    assert_eq!(a.tick().unwrap().rate, 800.0);
    load.store(0.5f64.to_bits(), Ordering::Relaxed);
    clock.advance(SEC);
    assert_eq!(a.tick().unwrap().rate, 400.0, "a cut is never guarded");
}

#[test]
fn the_limiter_state_survives_an_adjustment() {
    let clock = ManualClock::new();
    let a = percentile(&clock);
    a.record(150 * MS);
    clock.advance(SEC);
    // One permit at the end of the interval leaves 1 ms of debt...
    assert_eq!(a.try_acquire(), Ok(()));
    assert!(a.try_acquire().is_err());
    a.record(150 * MS);
    assert_eq!(a.current_rate(), 800.0);
    // ...which the cut to 800/s rescales to one 1.25 ms period, not drops.
    assert_eq!(
        a.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_nanos(1_250_000)
        })
    );
}

#[test]
fn builder_rejects_what_it_cannot_run() {
    let clock = ManualClock::new();
    let build = |min: f64, max: f64, burst: u32| {
        AdaptiveBuilder::with_clock(PercentileWindow::new(MS, SEC), clock.clone())
            .min_rate(min)
            .max_rate(max)
            .burst(burst)
            .build()
            .map(|_| ())
    };
    assert!(matches!(
        build(500.0, 100.0, 1),
        Err(QuotaError::InvalidParameter {
            name: "min_rate",
            ..
        })
    ));
    assert!(matches!(
        build(f64::NAN, 100.0, 1),
        Err(QuotaError::InvalidParameter { name: "rate", .. })
    ));
    assert_eq!(build(1.0, 10.0, 0), Err(QuotaError::ZeroBurst));
    assert!(matches!(
        AdaptiveBuilder::with_clock(PercentileWindow::new(MS, Duration::ZERO), clock.clone())
            .max_rate(10.0)
            .build(),
        Err(QuotaError::InvalidParameter {
            name: "interval",
            ..
        })
    ));
    assert!(matches!(
        AdaptiveBuilder::with_clock(EwmaAimd::new(MS), clock.clone()).build(),
        Err(QuotaError::InvalidParameter {
            name: "max_rate",
            ..
        })
    ));
    let a = AdaptiveBuilder::with_clock(EwmaAimd::new(MS), clock.clone())
        .max_rate(0.5)
        .burst(3)
        .build()
        .unwrap();
    assert_eq!((a.min_rate(), a.max_rate(), a.interval()), (0.5, 0.5, SEC));
    assert_eq!(a.limiter().quota().burst(), 3);
}

#[cfg(feature = "std")]
#[test]
fn concurrent_recorders_adjust_each_interval_once() {
    use alloc::sync::Arc;
    let clock = ManualClock::new();
    let a = Arc::new(percentile(&clock));
    // Every sample of the first interval is in before its end...
    for _ in 0..100 {
        a.record(150 * MS);
    }
    clock.advance(SEC);
    // ...and four threads race across it.
    let threads: alloc::vec::Vec<_> = (0..4)
        .map(|_| {
            let a = Arc::clone(&a);
            std::thread::spawn(move || {
                for _ in 0..250 {
                    a.record(150 * MS);
                    let _ = a.try_acquire();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(a.decisions(), 1);
    assert_eq!(a.current_rate(), 800.0);
    // The claiming thread's later samples are in the second window.
    clock.advance(SEC);
    a.tick();
    assert_eq!(a.decisions(), 2);
    assert_eq!(a.current_rate(), 640.0);
}
