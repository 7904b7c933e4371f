//! Decisions per second against a local `redis-server` that the bench starts
//! itself (never the system one): plain script calls, deny-cached denials,
//! leased permits, and a naive GET/SET-style token bucket script for
//! comparison. One task, sequential calls: each Redis decision costs one
//! round trip, so this measures latency; throughput grows with concurrency.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_main};
use limiter_core::Quota;
use limiter_redis::{Admission, RedisLimitError, RedisLimiter};
use redis::aio::ConnectionManager;
use support::RedisServer;

/// The usual token bucket on Redis: floats in a hash, refilled on read.
const NAIVE_BUCKET: &str = r"
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local rate, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local tokens, ts = tonumber(b[1]) or cap, tonumber(b[2]) or now
tokens = math.min(cap, tokens + (now - ts) * rate)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('EXPIRE', KEYS[1], math.ceil(cap / rate) + 1)
return allowed
";

/// A decision either way: a grant, or a denial (the deny-cached key is
/// exhausted on purpose). Any other error stops the bench.
fn decided(result: Result<Admission, RedisLimitError>) -> bool {
    match result {
        Ok(_) => true,
        Err(RedisLimitError::RateLimited { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let server = RedisServer::start();
    let conn: ConnectionManager = rt.block_on(server.manager());
    let fast = Quota::with_period(Duration::from_micros(1))
        .unwrap()
        .with_burst(1_000)
        .unwrap();

    let plain = RedisLimiter::builder(conn.clone(), fast)
        .key_prefix("plain")
        .deny_cache(false)
        .build()
        .unwrap();
    let cached = RedisLimiter::builder(conn.clone(), Quota::per_hour(1).unwrap())
        .key_prefix("cached")
        .build()
        .unwrap();
    rt.block_on(cached.try_acquire("k")).unwrap(); // exhaust it: denials from now on
    let leased = RedisLimiter::builder(conn.clone(), fast)
        .key_prefix("leased")
        .lease(100, Duration::from_secs(1))
        .build()
        .unwrap();
    let naive = redis::Script::new(NAIVE_BUCKET);

    let mut group = c.benchmark_group("redis_decisions");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_millis(500));
    let limiters = [
        ("plain", &plain),
        ("deny_cached", &cached),
        ("leased", &leased),
    ];
    for (name, limiter) in limiters {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        std::hint::black_box(decided(limiter.try_acquire("k").await));
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.bench_function("naive_token_bucket", |b| {
        b.iter_custom(|iters| {
            let mut conn = conn.clone();
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let allowed: i64 = naive
                        .key("naive:k")
                        .arg(1_000_000)
                        .arg(1_000)
                        .invoke_async(&mut conn)
                        .await
                        .unwrap();
                    std::hint::black_box(allowed);
                }
                start.elapsed()
            })
        })
    });
    group.finish();
    drop(server);
}

mod harness {
    // criterion's macro generates an undocumented `pub fn`.
    #![allow(missing_docs, unreachable_pub)]
    criterion::criterion_group!(benches, super::bench);
}

criterion_main!(harness::benches);
