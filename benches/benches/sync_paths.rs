//! Criterion benches of the synchronous paths: the floors, one thread on the
//! allow and deny paths for every implementation and clock, and 1, 2 and 4
//! persistent threads on one limiter.
//!
//! Every case counts admissions and asserts, outside the timed part, that
//! the implementation admitted exactly what the quota dictates (all calls on
//! the allow path, none on the deny path). Run with
//! `cargo bench -p limiter-benches --bench sync_paths`.

// criterion_group! and criterion_main! generate undocumented public functions.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use limiter_benches::floors;
use limiter_benches::measure::{Crew, run};
use limiter_benches::subjects::{self, Elapsed, Path};
use limiter_core::{MonotonicClock, clock::TscClock};

/// One thread, `iters` calls, admissions checked after the clock stops.
fn single<F>(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, expect_all: bool, op: Arc<F>)
where
    F: Fn() -> bool + ?Sized,
{
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let batch = run(iters, &*op);
            let expected = if expect_all { iters } else { 0 };
            assert_eq!(batch.admitted, expected, "{name} admitted the wrong count");
            batch.elapsed
        })
    });
}

fn bench_floors(c: &mut Criterion) {
    let mut g = c.benchmark_group("floor");
    single(
        &mut g,
        "clock_read/std_instant",
        true,
        floors::std_instant(),
    );
    single(
        &mut g,
        "clock_read/monotonic",
        true,
        floors::clock_read(MonotonicClock::new()),
    );
    single(
        &mut g,
        "clock_read/tsc",
        true,
        floors::clock_read(TscClock::new()),
    );
    single(
        &mut g,
        "clock_read/coarse",
        true,
        floors::clock_read(subjects::coarse_clock()),
    );
    single(
        &mut g,
        "clock_read/governor_quanta",
        true,
        floors::governor_clock_read(),
    );
    single(&mut g, "load_cas", true, floors::load_cas());
    single(
        &mut g,
        "clock_load_cas/monotonic",
        true,
        floors::clock_load_cas(MonotonicClock::new()),
    );
    single(
        &mut g,
        "clock_load_cas/tsc",
        true,
        floors::clock_load_cas(TscClock::new()),
    );
    single(
        &mut g,
        "clock_load_cas/coarse",
        true,
        floors::clock_load_cas(subjects::coarse_clock()),
    );
    g.finish();
}

fn bench_single_thread(c: &mut Criterion) {
    for path in Path::BOTH {
        let all = path == Path::Allow;
        let mut g = c.benchmark_group(format!("single/{}", path.name()));
        single(
            &mut g,
            "ours/monotonic",
            all,
            subjects::ours(path, MonotonicClock::new()),
        );
        single(
            &mut g,
            "ours/tsc",
            all,
            subjects::ours(path, TscClock::new()),
        );
        single(
            &mut g,
            "ours/coarse",
            all,
            subjects::ours(path, subjects::coarse_clock()),
        );
        single(
            &mut g,
            "governor/monotonic",
            all,
            subjects::governor_monotonic(path),
        );
        single(&mut g, "governor/tsc", all, subjects::governor_tsc(path));
        single(
            &mut g,
            "governor/coarse",
            all,
            subjects::governor_coarse(path),
        );
        single(
            &mut g,
            "ratelimit/monotonic",
            all,
            subjects::ratelimit_std(path),
        );
        single(
            &mut g,
            "ratelimit/tsc",
            all,
            subjects::ratelimit_on(path, Elapsed(TscClock::new())),
        );
        single(
            &mut g,
            "ratelimit/coarse",
            all,
            subjects::ratelimit_on(path, Elapsed(subjects::coarse_clock())),
        );
        single(
            &mut g,
            "leaky_bucket/own",
            all,
            subjects::leaky_bucket(path),
        );
        single(
            &mut g,
            "mutex_gcra/tsc",
            all,
            subjects::mutex(path, TscClock::new()),
        );
        g.finish();
    }
}

/// `threads` persistent threads released together per batch; criterion's
/// "iteration" is one call on every thread, timed by the slowest thread.
fn crew<F>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    path: Path,
    op: Arc<F>,
) where
    F: Fn() -> bool + Send + Sync + 'static + ?Sized,
{
    let crew = Crew::new(threads, op);
    group.bench_function(BenchmarkId::new(name, threads), |b| {
        b.iter_custom(|iters| {
            let batch = crew.round(iters);
            let expected = path.expected(iters) * threads as u64;
            assert_eq!(
                batch.admitted, expected,
                "{name} x{threads} admitted the wrong count"
            );
            batch.elapsed
        })
    });
}

fn bench_contention(c: &mut Criterion) {
    for path in Path::BOTH {
        let mut g = c.benchmark_group(format!("contended/{}", path.name()));
        for threads in [1, 2, 4] {
            crew(
                &mut g,
                "ours_tsc",
                threads,
                path,
                subjects::ours(path, TscClock::new()),
            );
            crew(
                &mut g,
                "governor_tsc",
                threads,
                path,
                subjects::governor_tsc(path),
            );
            crew(
                &mut g,
                "mutex_gcra_tsc",
                threads,
                path,
                subjects::mutex(path, TscClock::new()),
            );
        }
        g.finish();
    }
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
    targets = bench_floors, bench_single_thread, bench_contention
}
criterion_main!(benches);
