//! What recording an observation costs an `AdaptiveLimiter`: inside an
//! interval (the policy's `observe` plus one clock read and one load of the
//! window word), and the adjustment made by the call that ends an interval
//! (propose, clamp, guard, `set_quota`, decision log).

// criterion_group! and criterion_main! generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use limiter_core::{
    AdaptiveLimiter, ManualClock, adaptive::AdaptiveBuilder, adaptive::EwmaAimd,
    adaptive::PercentileWindow, adaptive::RateController,
};

fn adaptive<P: RateController>(policy: P, clock: &ManualClock) -> AdaptiveLimiter<P, ManualClock> {
    AdaptiveBuilder::with_clock(policy, clock.clone())
        .min_rate(100.0)
        .max_rate(1_000_000.0)
        .build()
        .unwrap()
}

fn record(c: &mut Criterion) {
    let mut g = c.benchmark_group("adaptive/record");
    let clock = ManualClock::new();
    let window = adaptive(
        PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(5)),
        &clock,
    );
    g.bench_function("PercentileWindow", |b| {
        b.iter(|| window.record(black_box(Duration::from_micros(1_234))))
    });
    let ewma = adaptive(EwmaAimd::new(Duration::from_millis(100)), &clock);
    g.bench_function("EwmaAimd", |b| {
        b.iter(|| ewma.record(black_box(Duration::from_micros(1_234))))
    });
    let monotonic =
        AdaptiveLimiter::builder(PercentileWindow::with_threshold(Duration::from_millis(100)))
            .max_rate(1_000_000.0)
            .build()
            .unwrap();
    g.bench_function("PercentileWindow, MonotonicClock", |b| {
        b.iter(|| monotonic.record(black_box(Duration::from_micros(1_234))))
    });
    g.finish();

    let mut g = c.benchmark_group("adaptive/adjust");
    let clock = ManualClock::new();
    let window = adaptive(
        PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1)),
        &clock,
    );
    g.bench_function("PercentileWindow (drain 592 buckets)", |b| {
        b.iter(|| {
            window.record(Duration::from_millis(150));
            clock.advance(Duration::from_secs(1));
            window.tick()
        })
    });
    g.finish();
}

criterion_group!(benches, record);
criterion_main!(benches);
