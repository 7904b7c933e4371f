//! The keyed path: a hot existing key from one thread and from two, and new
//! keys, for `KeyedLimiter` (an `scc::HashIndex` of boxed entries) and for
//! the same protocol (a `GcraCell` per key, decided in place) on a bare
//! `HashIndex` and on a bare `DashMap` side by side. A `ManualClock` keeps
//! the clock read out of the numbers; a huge burst keeps every call admitted
//! (one CAS per call).
//!
//! With two threads, the measured thread hits key 7 while a second thread
//! hits another key *of the same dashmap shard* in a loop: the cells are not
//! shared, so what is measured is the map's own cost under a concurrent
//! reader (dashmap: both take that shard's read lock, an atomic
//! read-modify-write on one shared word; `HashIndex`: no shared write).

// criterion_group! and criterion_main! generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Bencher, Criterion, Throughput, criterion_group, criterion_main};
use dashmap::DashMap;
use limiter_core::{ManualClock, Quota, cell::GcraCell};
use limiter_keyed::KeyedLimiter;
use scc::HashIndex;

const NEW_KEYS: u64 = 10_000;
const KEYS: u64 = 1_000;
const HOT: u64 = 7;

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

/// Times `iters` calls of `hit(HOT)` while another thread calls
/// `hit(other)` until they are done.
fn with_neighbour(b: &mut Bencher<'_>, other: u64, hit: &(impl Fn(u64) + Sync)) {
    b.iter_custom(|iters| {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            // Relaxed: a stop flag; nothing else is published through it.
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    hit(black_box(other));
                }
            });
            let start = Instant::now();
            for _ in 0..iters {
                hit(black_box(HOT));
            }
            let elapsed: Duration = start.elapsed();
            stop.store(true, Ordering::Relaxed);
            elapsed
        })
    });
}

fn hot_key(c: &mut Criterion) {
    let q = quota();
    let limiter = keyed(KEYS as usize);
    for k in 0..KEYS {
        limiter.try_acquire(&k).unwrap();
    }
    let index: HashIndex<u64, Box<GcraCell>> = HashIndex::new();
    for k in 0..KEYS {
        let _ = index.insert_sync(k, Box::new(GcraCell::new()));
    }
    let dash: DashMap<u64, GcraCell> = (0..KEYS).map(|k| (k, GcraCell::new())).collect();
    // Another key in the hot key's dashmap shard.
    let other = (0..KEYS)
        .find(|k| *k != HOT && dash.determine_map(k) == dash.determine_map(&HOT))
        .unwrap();

    let keyed_hit = |k: u64| {
        let _ = limiter.try_acquire(&k);
    };
    let index_hit = |k: u64| {
        let _ = index.peek_with(&k, |_, cell| cell.try_acquire_n(q, 0, 1));
    };
    let dash_hit = |k: u64| {
        let _ = dash.get(&k).map(|cell| cell.try_acquire_n(q, 0, 1));
    };

    let mut g = c.benchmark_group("keyed/hot_key");
    g.bench_function("KeyedLimiter (scc HashIndex)", |b| {
        b.iter(|| keyed_hit(black_box(HOT)))
    });
    g.bench_function("HashIndex + Box<GcraCell>", |b| {
        b.iter(|| index_hit(black_box(HOT)))
    });
    g.bench_function("DashMap + GcraCell", |b| {
        b.iter(|| dash_hit(black_box(HOT)))
    });
    g.finish();

    let mut g = c.benchmark_group("keyed/hot_key_2_threads");
    g.bench_function("KeyedLimiter (scc HashIndex)", |b| {
        with_neighbour(b, other, &keyed_hit)
    });
    g.bench_function("HashIndex + Box<GcraCell>", |b| {
        with_neighbour(b, other, &index_hit)
    });
    g.bench_function("DashMap + GcraCell", |b| {
        with_neighbour(b, other, &dash_hit)
    });
    g.finish();
}

fn new_keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed/new_keys");
    g.throughput(Throughput::Elements(NEW_KEYS));
    let q = quota();

    g.bench_function("KeyedLimiter (scc HashIndex)", |b| {
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
    g.bench_function("HashIndex + Box<GcraCell>", |b| {
        b.iter_batched(
            HashIndex::<u64, Box<GcraCell>>::new,
            |map| {
                for k in 0..NEW_KEYS {
                    let cell = Box::new(GcraCell::new());
                    let _ = cell.try_acquire_n(q, 0, 1);
                    let _ = map.insert_sync(k, cell);
                }
                map
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("DashMap + GcraCell", |b| {
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
