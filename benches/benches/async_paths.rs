//! Criterion benches of the async layer on a free permit (no waiting), on a
//! current-thread runtime: our `take()` and `try_acquire()` on one
//! `AsyncLimiter`, governor's `until_ready()`, leaky-bucket's
//! `acquire_one()`. Every call is admitted; each case checks its count.
//! Run with `cargo bench -p limiter-benches --bench async_paths`.

// criterion_group! and criterion_main! generate undocumented public functions.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use limiter_benches::async_paths as ap;
use limiter_benches::measure::Batch;
use limiter_benches::subjects::{self, Path};

fn checked(batch: Batch, name: &str) -> Duration {
    assert_eq!(
        batch.admitted, batch.calls,
        "{name} admitted the wrong count"
    );
    batch.elapsed
}

fn bench_async_nowait(c: &mut Criterion) {
    let rt = ap::current_thread();
    let ours = ap::ours();
    let governor = ap::governor();
    let leaky = subjects::leaky(Path::Allow);
    let mut g = c.benchmark_group("async_nowait");
    g.bench_function("ours/take", |b| {
        b.iter_custom(|n| checked(ap::ours_take(&rt, &ours, n), "ours/take"))
    });
    g.bench_function("ours/try_acquire", |b| {
        b.iter_custom(|n| checked(ap::ours_try_acquire(&ours, n), "ours/try_acquire"))
    });
    g.bench_function("governor/until_ready", |b| {
        b.iter_custom(|n| checked(ap::governor_until_ready(&rt, &governor, n), "governor"))
    });
    g.bench_function("leaky_bucket/acquire_one", |b| {
        b.iter_custom(|n| checked(ap::leaky_acquire_one(&rt, &leaky, n), "leaky_bucket"))
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_async_nowait
}
criterion_main!(benches);
