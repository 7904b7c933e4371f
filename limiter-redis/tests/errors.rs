//! `RedisLimitError::retry_after()` on a real server: `Some` exactly when
//! waiting helps (a denial from Redis, the deny cache, the local fallback or
//! fail-closed; an open circuit breaker), `None` otherwise; and a `take`
//! under fail-closed is denied at once instead of waiting.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::{ManualClock, Quota};
use limiter_redis::{FailurePolicy, RedisLimitError, RedisLimiter, Source};
use support::{RedisServer, denied};

const RETRY: Duration = Duration::from_secs(60);

fn per_second(burst: u32) -> Quota {
    Quota::per_second(1).unwrap().with_burst(burst).unwrap()
}

#[tokio::test]
async fn retry_after_is_the_exact_wait_of_a_denial() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = RedisLimiter::builder(server.manager().await, per_second(2))
        .client_clock(clock.clone())
        .expiry_margin(Duration::from_secs(60))
        .build()
        .unwrap();
    limiter.try_acquire_n("k", 2).await.unwrap();
    let from_redis = limiter.try_acquire_n("k", 2).await.unwrap_err();
    assert_eq!(from_redis.retry_after(), Some(Duration::from_secs(2)));
    clock.advance(Duration::from_millis(300));
    let cached = limiter.try_acquire_n("k", 2).await.unwrap_err();
    assert!(matches!(
        cached,
        RedisLimitError::RateLimited {
            source: Source::DenyCache,
            ..
        }
    ));
    assert_eq!(cached.retry_after(), Some(Duration::from_millis(1_700)));
    // A smaller request is not covered: Redis answers with its own wait.
    let one = limiter.try_acquire("k").await.unwrap_err();
    assert_eq!(denied(Err::<(), _>(one)).source, Source::Redis);
    // Waiting never cures a request over the burst.
    let never = limiter.try_acquire_n("k", 3).await.unwrap_err();
    assert_eq!(never.retry_after(), None);
    // The wait it names is the one that works.
    clock.advance(Duration::from_millis(1_700));
    limiter.try_acquire_n("k", 2).await.unwrap();
}

#[tokio::test]
async fn retry_after_while_redis_is_down_names_the_next_probe_or_nothing() {
    let mut server = RedisServer::start();
    let build = |conn, policy| {
        RedisLimiter::builder(conn, per_second(4))
            .call_timeout(Duration::from_millis(200))
            .retry_interval(RETRY)
            .failure_policy(policy)
            .build()
            .unwrap()
    };
    let error = build(server.manager().await, FailurePolicy::Error);
    let closed = build(server.manager().await, FailurePolicy::Closed);
    let local = build(server.manager().await, FailurePolicy::Local { share: 0.5 });
    for limiter in [&error, &closed, &local] {
        limiter.try_acquire("k").await.unwrap();
    }
    server.kill();

    // Error: the failure itself (no retry time), then the open breaker's.
    let failure = error.try_acquire("k").await.unwrap_err();
    assert!(failure.is_unavailable(), "{failure}");
    assert_eq!(failure.retry_after(), None, "{failure:?}");
    let open = error.try_acquire("k").await.unwrap_err();
    let RedisLimitError::CircuitOpen { retry_after } = open else {
        panic!("{open:?}");
    };
    assert!(retry_after > Duration::ZERO && retry_after <= RETRY);
    assert_eq!(open.retry_after(), Some(retry_after));

    // Closed: a denial whose retry is the next probe, for a try and a take.
    for result in [closed.try_acquire("k").await, closed.take("k").await] {
        let d = denied(result);
        assert_eq!((d.source, d.remaining), (Source::FailClosed, 0));
        assert!(d.retry_after > Duration::ZERO && d.retry_after <= RETRY);
    }

    // Local: the fallback's own exact wait (burst 2 at 0.5 permits/s).
    local.try_acquire_n("k", 2).await.unwrap();
    let d = denied(local.try_acquire("k").await);
    assert_eq!(d.source, Source::Local);
    assert!(d.retry_after > Duration::ZERO && d.retry_after <= Duration::from_secs(2));
}
