//! Three faults found by a stress run, each pinned by a test that fails on
//! the old code: a `SCRIPT FLUSH` storm never reaches a caller (the old path
//! let about 70 % of calls return `NOSCRIPT`); a fail-closed `retry_after` is
//! measured from the failure, not from before the failed call (which
//! overstated it by the call's duration); and an expiry margin the script
//! cannot hold is refused at `build()` (it used to build, then fail every
//! admitting call).

use limiter_test_support::redis as support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use limiter_core::{MAX_SPAN, ManualClock, Quota};
use limiter_redis::{FailurePolicy, RedisLimitError, RedisLimiter, Source};
use support::{RedisServer, denied};

fn hourly(burst: u32) -> Quota {
    Quota::with_period(Duration::from_secs(3600))
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

#[tokio::test]
async fn a_script_flush_storm_never_reaches_a_caller() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::builder(server.manager().await, hourly(100_000))
        .deny_cache(false)
        .build()
        .unwrap();
    let multi = RedisLimiter::new(server.manager().await, hourly(100_000)).unwrap();
    // A thread flushing the script cache as fast as one connection can.
    let stop = Arc::new(AtomicBool::new(false));
    let flushes = Arc::new(AtomicU64::new(0));
    let storm = {
        let (stop, flushes, url) = (stop.clone(), flushes.clone(), server.url());
        std::thread::spawn(move || {
            let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
                flushes.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    const CALLS: u32 = 1_000;
    for i in 0..CALLS {
        let a = limiter.try_acquire("k").await.unwrap();
        assert_eq!((a.source, a.remaining), (Source::Redis, 100_000 - 1 - i));
        let all = multi
            .try_acquire_all(&[("m", hourly(100_000), 1)])
            .await
            .unwrap();
        assert_eq!(all[0].remaining, 100_000 - 1 - i);
    }
    stop.store(true, Ordering::Relaxed);
    storm.join().unwrap();
    // The storm ran throughout: hundreds of flushes at least.
    let flushed = flushes.load(Ordering::Relaxed);
    assert!(flushed > u64::from(CALLS) / 10, "only {flushed} flushes");
    assert_eq!(limiter.redis_failures() + multi.redis_failures(), 0);
}

#[tokio::test]
async fn fail_closed_retry_after_counts_from_the_failure() {
    const RETRY: Duration = Duration::from_secs(10);
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_700_000_000_000_000_000);
    let limiter = RedisLimiter::builder(server.manager().await, hourly(4))
        .client_clock(clock.clone())
        .expiry_margin(Duration::from_secs(3600))
        .call_timeout(Duration::from_millis(500))
        .retry_interval(RETRY)
        .failure_policy(FailurePolicy::Closed)
        .build()
        .unwrap();
    limiter.try_acquire("k").await.unwrap();
    let _: () = server.cmd(&["CLIENT", "PAUSE", "5000", "WRITE"]).await;
    // 3 s of the limiter's clock pass while the call hangs to its timeout.
    let advance = {
        let clock = clock.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            clock.advance(Duration::from_secs(3));
        })
    };
    let d = denied(limiter.try_acquire("k").await);
    advance.await.unwrap();
    assert_eq!(d.source, Source::FailClosed);
    // From the failure: one whole interval (the old answer was 13 s).
    assert_eq!(d.retry_after, RETRY);
    let _: () = server.cmd(&["CLIENT", "UNPAUSE"]).await;
    // And the breaker really opens for that long from the failure.
    let calls = limiter.redis_calls();
    clock.advance(RETRY - Duration::from_micros(1));
    let d = denied(limiter.try_acquire("k").await);
    assert_eq!(
        (d.source, d.retry_after),
        (Source::FailClosed, Duration::from_micros(1))
    );
    assert_eq!(limiter.redis_calls(), calls);
    clock.advance(Duration::from_micros(1));
    assert_eq!(
        limiter.try_acquire("k").await.unwrap().source,
        Source::Redis
    );
    assert_eq!(limiter.redis_calls(), calls + 1);
}

#[tokio::test]
async fn an_expiry_margin_the_script_cannot_hold_is_refused_at_build() {
    let server = RedisServer::start();
    for margin in [Duration::MAX, Duration::from_nanos(MAX_SPAN + 1)] {
        let built = RedisLimiter::builder(server.manager().await, hourly(2))
            .expiry_margin(margin)
            .build();
        assert!(
            matches!(
                built,
                Err(RedisLimitError::InvalidParameter {
                    name: "expiry_margin",
                    ..
                })
            ),
            "{margin:?}: {built:?}"
        );
    }
    // The largest margin accepted works on a real server, TTL and all.
    let limiter = RedisLimiter::builder(server.manager().await, hourly(2))
        .expiry_margin(Duration::from_nanos(MAX_SPAN))
        .build()
        .unwrap();
    assert_eq!(limiter.try_acquire("k").await.unwrap().remaining, 1);
    let all = limiter
        .try_acquire_all(&[("k", hourly(2), 1)])
        .await
        .unwrap();
    assert_eq!(all[0].remaining, 0);
    let pttl: i64 = server.cmd(&["PTTL", &limiter.redis_key("k")]).await;
    assert!(pttl > (MAX_SPAN / 1_000_000) as i64, "PTTL {pttl}");
}
