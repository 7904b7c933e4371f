//! A caller's deadline over several calls (`try_acquire_all_until`) and a
//! caller's own command through the limiter's breaker (`call_guarded`):
//! against a blackholed server (accepts, never answers) the answer comes at
//! the deadline, not at the longer call timeout, in virtual time; a
//! deadline already past makes no call and leaves the breaker alone; on a
//! real server a guarded command runs and answers.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::Quota;
use limiter_redis::{FailurePolicy, RedisConnection, RedisLimitError, RedisLimiter, Source};
use support::{RedisServer, blackhole, lazy};
use tokio::time::Instant;

fn limiter(conn: RedisConnection, policy: FailurePolicy) -> RedisLimiter {
    RedisLimiter::builder_with_connection(conn, Quota::per_second(10).unwrap())
        // Far longer than any deadline below: only the deadline can end
        // these calls early.
        .call_timeout(Duration::from_secs(1))
        .failure_policy(policy)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_blackholed_call_ends_at_the_deadline_not_the_call_timeout() {
    let port = blackhole().await;
    let q = Quota::per_second(10).unwrap();
    let open = limiter(lazy(port), FailurePolicy::Open);
    let start = Instant::now();
    let deadline = start + Duration::from_millis(3);
    let granted = open
        .try_acquire_all_until(&[("a", q, 1)], deadline)
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(3));
    assert_eq!(granted[0].source, Source::FailOpen);
    assert_eq!((open.redis_calls(), open.redis_failures()), (1, 1));

    let error = limiter(lazy(port), FailurePolicy::Error);
    let start = Instant::now();
    let e = error
        .call_guarded(Some(start + Duration::from_millis(4)), async {
            std::future::pending::<Result<(), redis::RedisError>>().await
        })
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_millis(4));
    assert!(
        matches!(e, RedisLimitError::Timeout { after } if after == Duration::from_millis(4)),
        "{e:?}"
    );
    assert_eq!(error.redis_failures(), 1);
    // The failure opened the breaker: the next guarded call is not made.
    let e = error
        .call_guarded(None, async { Ok::<_, redis::RedisError>(()) })
        .await
        .unwrap_err();
    assert!(matches!(e, RedisLimitError::CircuitOpen { .. }), "{e:?}");
    assert_eq!(error.redis_calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_already_past_makes_no_call_and_spares_the_breaker() {
    let port = blackhole().await;
    let q = Quota::per_second(10).unwrap();
    let closed = limiter(lazy(port), FailurePolicy::Closed);
    let past = Instant::now();
    tokio::time::advance(Duration::from_millis(1)).await;
    let start = Instant::now();
    let e = closed
        .try_acquire_all_until(&[("a", q, 1)], past)
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert!(
        matches!(
            e,
            RedisLimitError::RateLimited {
                source: Source::FailClosed,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!((closed.redis_calls(), closed.redis_failures()), (0, 0));
    // The breaker is still closed: a guarded call with time left is made.
    let ran = closed
        .call_guarded(None, async { Ok::<_, redis::RedisError>(7) })
        .await
        .unwrap();
    assert_eq!((ran, closed.redis_calls()), (7, 1));
}

#[tokio::test]
async fn a_guarded_command_runs_on_a_real_server() {
    let server = RedisServer::start();
    let manager = server.manager().await;
    let limiter = limiter(manager.clone().into(), FailurePolicy::Error);
    for want in 1..=2_i64 {
        let mut c = manager.clone();
        let got: i64 = limiter
            .call_guarded(Some(Instant::now() + Duration::from_secs(5)), async move {
                redis::cmd("INCR").arg("hits").query_async(&mut c).await
            })
            .await
            .unwrap();
        assert_eq!(got, want);
    }
    // A command error is Redis answering: returned, not a failure.
    let mut c = manager.clone();
    let e = limiter
        .call_guarded(None, async move {
            redis::cmd("INCR")
                .arg("hits")
                .arg("extra")
                .query_async::<i64>(&mut c)
                .await
        })
        .await
        .unwrap_err();
    assert!(!e.is_unavailable(), "{e:?}");
    assert_eq!((limiter.redis_calls(), limiter.redis_failures()), (3, 0));
}

#[tokio::test]
async fn a_call_timeout_no_instant_can_hold_is_none_not_a_panic() {
    let server = RedisServer::start();
    let manager = server.manager().await;
    let q = Quota::per_second(10).unwrap().with_burst(2).unwrap();
    // A margin past the limiter's time range is refused at build (typed).
    let e = RedisLimiter::builder(manager.clone(), q)
        .expiry_margin(Duration::MAX)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            e,
            RedisLimitError::InvalidParameter {
                name: "expiry_margin",
                ..
            }
        ),
        "{e:?}"
    );
    // A lease ttl is kept in the limiter's nanoseconds, saturated.
    let leased = RedisLimiter::builder(manager.clone(), q)
        .lease(1, Duration::MAX)
        .build()
        .unwrap();
    assert_eq!(
        leased.try_acquire("leased").await.unwrap().source,
        Source::Redis
    );
    let limiter = RedisLimiter::builder(manager, q)
        .call_timeout(Duration::MAX)
        .retry_interval(Duration::MAX)
        .build()
        .unwrap();
    limiter.try_acquire_n("k", 2).await.unwrap();
    assert!(
        limiter.try_acquire("k").await.is_err(),
        "the burst is spent"
    );
    // With a caller's deadline as well, the deadline bounds the call.
    let far = Instant::now() + Duration::from_secs(5);
    let granted = limiter
        .try_acquire_all_until(&[("other", q, 1)], far)
        .await
        .unwrap();
    assert_eq!(granted[0].source, Source::Redis);
    assert_eq!((limiter.redis_calls(), limiter.redis_failures()), (3, 0));
}
