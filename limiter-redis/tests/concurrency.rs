//! N concurrent clients over several connections never admit more than
//! `burst + elapsed / t`, whether every decision goes to Redis, denials are
//! cached, or permits are leased.

use limiter_test_support::redis as support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use limiter_core::Quota;
use limiter_redis::{RedisLimitError, RedisLimiter, RedisLimiterBuilder, Source};
use support::RedisServer;

const CONNECTIONS: usize = 4;
const TASKS_PER_CONNECTION: usize = 2;
const PERIOD: Duration = Duration::from_millis(2);
const BURST: u32 = 10;

/// Admitted permits and Redis calls of one run.
struct Run {
    admitted: u64,
    denied: u64,
    calls: u64,
    elapsed: Duration,
}

async fn run(
    server: &RedisServer,
    prefix: &str,
    mode: fn(RedisLimiterBuilder) -> RedisLimiterBuilder,
) -> Run {
    let quota = Quota::with_period(PERIOD)
        .unwrap()
        .with_burst(BURST)
        .unwrap();
    let mut limiters = Vec::new();
    for _ in 0..CONNECTIONS {
        let builder = RedisLimiter::builder(server.manager().await, quota)
            .key_prefix(prefix)
            .call_timeout(Duration::from_secs(5));
        limiters.push(mode(builder).build().unwrap());
    }
    let admitted = Arc::new(AtomicU64::new(0));
    let denied = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for limiter in &limiters {
        for _ in 0..TASKS_PER_CONNECTION {
            let (limiter, admitted, denied) = (limiter.clone(), admitted.clone(), denied.clone());
            tasks.push(tokio::spawn(async move {
                // Bounded in count and in time.
                for _ in 0..20_000 {
                    if start.elapsed() > Duration::from_millis(300) {
                        break;
                    }
                    let counter = match limiter.try_acquire("shared").await {
                        Ok(a) => {
                            assert!(matches!(a.source, Source::Redis | Source::Lease));
                            &admitted
                        }
                        Err(RedisLimitError::RateLimited { source, .. }) => {
                            assert!(matches!(source, Source::Redis | Source::DenyCache));
                            &denied
                        }
                        Err(e) => panic!("{e}"),
                    };
                    // Relaxed: a count read after every task is joined.
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    Run {
        admitted: admitted.load(Ordering::Relaxed),
        denied: denied.load(Ordering::Relaxed),
        calls: limiters.iter().map(RedisLimiter::redis_calls).sum(),
        elapsed,
    }
}

/// `burst + elapsed / t`, with the elapsed time stretched by 0.05 %: Redis'
/// TIME and the test's Instant are different clocks (NTP may slew one).
fn bound(elapsed: Duration) -> u64 {
    let elapsed = elapsed.as_nanos() * 10_005 / 10_000;
    u64::from(BURST) + (elapsed / PERIOD.as_nanos()) as u64
}

fn check(run: &Run, what: &str) {
    eprintln!(
        "{what}: admitted {} (bound {}), denied {}, {} Redis calls, {:?}",
        run.admitted,
        bound(run.elapsed),
        run.denied,
        run.calls,
        run.elapsed
    );
    assert!(
        run.admitted <= bound(run.elapsed),
        "{what}: admitted {} > bound {} over {:?}",
        run.admitted,
        bound(run.elapsed),
        run.elapsed
    );
    assert!(
        run.admitted >= u64::from(BURST),
        "{what}: admitted only {}",
        run.admitted
    );
    assert!(
        run.denied > 0,
        "{what}: nothing was denied; the test shows nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_clients_never_admit_more_than_the_quota() {
    let server = RedisServer::start();
    let r = run(&server, "plain", |b| b.deny_cache(false)).await;
    check(&r, "plain");
    assert_eq!(r.calls, r.admitted + r.denied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_cached_clients_never_admit_more_and_call_less() {
    let server = RedisServer::start();
    let r = run(&server, "cached", |b| b.deny_cache(true)).await;
    check(&r, "deny cache");
    assert!(r.calls < r.admitted + r.denied, "the cache saved no call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leasing_clients_never_admit_more_and_call_less() {
    let server = RedisServer::start();
    let r = run(&server, "leased", |b| b.lease(5, Duration::from_millis(10))).await;
    check(&r, "lease");
    assert!(r.calls < r.admitted + r.denied, "leases saved no call");
}
