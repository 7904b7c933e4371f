//! Each failure policy when the server is killed mid-run and when it is
//! paused: no panic, one failed call per breaker interval, the right
//! `Source` (fail-closed and local denials as `RateLimited` errors), the
//! errors' `retry_after`, and decisions from Redis again once it is back.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::Quota;
use limiter_redis::{FailurePolicy, RedisLimitError, RedisLimiter, Source};
use support::{RedisServer, denied};

/// The breaker interval and call timeout of these tests' limiters.
const RETRY: Duration = Duration::from_secs(60);
const CALL_TIMEOUT: Duration = Duration::from_millis(200);

fn hourly(burst: u32) -> Quota {
    Quota::per_hour(1).unwrap().with_burst(burst).unwrap()
}

async fn limiter(server: &RedisServer, policy: FailurePolicy, retry: Duration) -> RedisLimiter {
    RedisLimiter::builder(server.manager().await, hourly(4))
        .call_timeout(CALL_TIMEOUT)
        .retry_interval(retry)
        .failure_policy(policy)
        .build()
        .unwrap()
}

/// Runs 20 tries on a dead (or paused) server and checks the policy's
/// answers, with a breaker interval of [`RETRY`].
async fn assert_policy_answers(limiter: &RedisLimiter, policy: FailurePolicy) {
    let mut allowed = 0;
    for _ in 0..20 {
        match (policy, limiter.try_acquire("k").await) {
            (FailurePolicy::Open, Ok(a)) => {
                assert_eq!(a.source, Source::FailOpen);
                allowed += 1;
            }
            (FailurePolicy::Closed, result) => {
                let d = denied(result);
                assert_eq!(d.source, Source::FailClosed);
                // The time to the next probe, as of the answer: at most one
                // breaker interval.
                assert!(
                    d.retry_after > Duration::ZERO && d.retry_after <= RETRY,
                    "{d:?}"
                );
            }
            (FailurePolicy::Local { .. }, Ok(a)) => {
                assert_eq!(a.source, Source::Local);
                allowed += 1;
            }
            (FailurePolicy::Local { .. }, result) => {
                let d = denied(result);
                assert_eq!((d.source, d.remaining), (Source::Local, 0));
                // Period 1 h / 0.5: the next local permit is up to 2 h away.
                assert!(d.retry_after > Duration::ZERO, "{d:?}");
                assert!(d.retry_after <= Duration::from_secs(7_200), "{d:?}");
            }
            (FailurePolicy::Error, Err(e)) => {
                assert!(e.is_unavailable(), "{e}");
                match e {
                    // Waiting for the probe is the only retry that can help.
                    RedisLimitError::CircuitOpen { retry_after } => {
                        assert!(retry_after > Duration::ZERO && retry_after <= RETRY);
                        assert_eq!(e.retry_after(), Some(retry_after));
                    }
                    RedisLimitError::Timeout { .. } | RedisLimitError::Redis(_) => {
                        assert_eq!(e.retry_after(), None, "{e}");
                    }
                    other => panic!("{other:?}"),
                }
            }
            (policy, other) => panic!("{policy:?} answered {other:?}"),
        }
    }
    let expected = match policy {
        FailurePolicy::Open => 20,
        // share 0.5 of a burst of 4: the local limiter admits 2.
        FailurePolicy::Local { .. } => 2,
        _ => 0,
    };
    assert_eq!(allowed, expected, "{policy:?}");
    // The breaker: one failed call, then answers without calling Redis.
    assert_eq!(limiter.redis_failures(), 1, "{policy:?}");
}

const POLICIES: [FailurePolicy; 4] = [
    FailurePolicy::Open,
    FailurePolicy::Closed,
    FailurePolicy::Local { share: 0.5 },
    FailurePolicy::Error,
];

#[tokio::test]
async fn every_policy_answers_when_the_server_is_killed() {
    for policy in POLICIES {
        let mut server = RedisServer::start();
        let limiter = limiter(&server, policy, RETRY).await;
        let a = limiter.try_acquire("k").await.unwrap();
        assert_eq!(a.source, Source::Redis);
        server.kill();
        assert_policy_answers(&limiter, policy).await;
        assert_eq!(limiter.redis_calls(), 2, "{policy:?}");
        // reset and peek go through the same breaker.
        match limiter.reset("k").await {
            Err(e @ RedisLimitError::CircuitOpen { .. }) => {
                let retry = e.retry_after().unwrap();
                assert!(retry > Duration::ZERO && retry <= RETRY, "{retry:?}");
            }
            other => panic!("{policy:?}: reset answered {other:?}"),
        }
        // peek answers by the policy: an admission, the policy's denial, or
        // the failure itself.
        let peeked = limiter.peek("k").await;
        match policy {
            FailurePolicy::Open => assert_eq!(peeked.unwrap().source, Source::FailOpen),
            FailurePolicy::Closed => assert_eq!(denied(peeked).source, Source::FailClosed),
            FailurePolicy::Local { .. } => {
                // Both local permits were spent above, but `reset` forgot
                // the local state even though its DEL failed.
                let a = peeked.unwrap();
                assert_eq!((a.source, a.remaining), (Source::Local, 2));
            }
            _ => assert!(peeked.unwrap_err().is_unavailable()),
        }
    }
}

#[tokio::test]
async fn every_policy_answers_when_the_server_is_paused() {
    for policy in POLICIES {
        let server = RedisServer::start();
        let limiter = limiter(&server, policy, RETRY).await;
        assert_eq!(
            limiter.try_acquire("k").await.unwrap().source,
            Source::Redis
        );
        // Scripts may write, so CLIENT PAUSE WRITE holds them.
        let _: () = server.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]).await;
        assert_policy_answers(&limiter, policy).await;
        let _: () = server.cmd(&["CLIENT", "UNPAUSE"]).await;
        // The timed-out call was not retried, but Redis ran it once unpaused:
        // a fresh limiter sees 2 of the 4 permits used.
        // Polled (bounded, generously: a loaded machine may be slow to run
        // the held call) until it shows.
        let fresh = RedisLimiter::new(server.manager().await, hourly(4)).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut remaining = fresh.peek("k").await.unwrap().remaining;
        while remaining != 2 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            remaining = fresh.peek("k").await.unwrap().remaining;
        }
        assert_eq!(remaining, 2, "{policy:?}");
    }
}

#[tokio::test]
async fn decisions_come_from_redis_again_after_a_restart() {
    let mut server = RedisServer::start();
    let limiter = limiter(
        &server,
        FailurePolicy::Local { share: 1.0 },
        Duration::from_millis(50),
    )
    .await;
    assert_eq!(
        limiter.try_acquire("k").await.unwrap().source,
        Source::Redis
    );
    server.kill();
    assert_eq!(
        limiter.try_acquire("k").await.unwrap().source,
        Source::Local
    );
    server.restart();
    // Polled (bounded, generously) until the breaker's probe reconnects;
    // meanwhile the local limiter answers, and refuses once its share is
    // spent.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut source = Source::Local;
    while source != Source::Redis && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        source = match limiter.try_acquire("k").await {
            Ok(a) => a.source,
            refused => denied(refused).source,
        };
        assert!(
            matches!(source, Source::Local | Source::Redis),
            "{source:?}"
        );
    }
    assert_eq!(source, Source::Redis);
    // The restarted server lost its data (no persistence) and its script
    // cache: the key is fresh, the script was reloaded.
    let d = limiter.peek("k").await.unwrap();
    assert_eq!((d.source, d.remaining), (Source::Redis, 3));
}
