//! The keyed path: a hot existing key, and new keys, for `KeyedLimiter`
//! (dashmap) and for the same protocol (a `GcraCell` per key, decided in
//! place) on papaya and on dashmap side by side. A `ManualClock` keeps the
//! clock read out of the numbers; a huge burst keeps every call admitted (one
//! CAS per call).

// criterion_group! and criterion_main! generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use dashmap::DashMap;
use limiter_core::{GcraCell, ManualClock, Quota};
use limiter_keyed::KeyedLimiter;

const NEW_KEYS: u64 = 10_000;

fn quota() -> Quota {
    Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(u32::MAX)
        .unwrap()
}

fn keyed(max_keys: usize) -> KeyedLimiter<u64, ManualClock> {
    KeyedLimiter::builder(quota())
        .max_keys(max_keys)
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

fn hot_key(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed/hot_key");
    let q = quota();

    let limiter = keyed(1_000);
    for k in 0..1_000 {
        limiter.try_acquire(&k).unwrap();
    }
    g.bench_function("KeyedLimiter (dashmap)", |b| {
        b.iter(|| limiter.try_acquire(black_box(&7)))
    });

    let papaya: papaya::HashMap<u64, GcraCell> = (0..1_000).map(|k| (k, GcraCell::new())).collect();
    g.bench_function("papaya + GcraCell", |b| {
        b.iter(|| {
            let map = papaya.pin();
            map.get(black_box(&7))
                .map(|cell| cell.try_acquire_n(q, 0, 1))
        })
    });

    let dash: DashMap<u64, GcraCell> = (0..1_000).map(|k| (k, GcraCell::new())).collect();
    g.bench_function("dashmap + GcraCell", |b| {
        b.iter(|| {
            dash.get(black_box(&7))
                .map(|cell| cell.try_acquire_n(q, 0, 1))
        })
    });
    g.finish();
}

fn new_keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed/new_keys");
    g.throughput(Throughput::Elements(NEW_KEYS));
    let q = quota();

    g.bench_function("KeyedLimiter (dashmap)", |b| {
        b.iter_batched(
            || keyed(1 << 20),
            |limiter| {
                for k in 0..NEW_KEYS {
                    let _ = limiter.try_acquire(&k);
                }
                limiter
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("papaya + GcraCell", |b| {
        b.iter_batched(
            papaya::HashMap::<u64, GcraCell>::new,
            |map| {
                {
                    let pinned = map.pin();
                    for k in 0..NEW_KEYS {
                        let cell = pinned.get_or_insert_with(k, GcraCell::new);
                        let _ = cell.try_acquire_n(q, 0, 1);
                    }
                }
                map
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("dashmap + GcraCell", |b| {
        b.iter_batched(
            DashMap::<u64, GcraCell>::new,
            |map| {
                for k in 0..NEW_KEYS {
                    let cell = map.entry(k).or_default();
                    let _ = cell.try_acquire_n(q, 0, 1);
                }
                map
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, hot_key, new_keys);
criterion_main!(benches);
