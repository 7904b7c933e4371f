//! Debt after admission on Redis (`RedisLimiter::charge_after`, the debt
//! script): exact waits in the same GCRA units as the decisions, the cap
//! as limiter-core's, and the same answers as `RateLimiter::charge_after`
//! for the same operations on a shared `ManualClock`.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::{ChargeAfter, Debt, ManualClock, Quota, RateLimiter};
use limiter_redis::{RedisLimitError, RedisLimiter};
use support::{RedisServer, denied};

fn quota(per_second: u32, burst: u32) -> Quota {
    Quota::per_second(per_second)
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

async fn limiter(server: &RedisServer, quota: Quota, clock: &ManualClock) -> RedisLimiter {
    RedisLimiter::builder(server.manager().await, quota)
        .client_clock(clock.clone())
        .deny_cache(false)
        // The manual clock stands still while real time runs on Redis.
        .expiry_margin(Duration::from_secs(60))
        .build()
        .unwrap()
}

#[tokio::test]
async fn debt_makes_the_next_request_wait_exactly_its_cost() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    // 10 per second, burst 5: t = 100 ms.
    let redis = limiter(&server, quota(10, 5), &clock).await;
    redis.try_acquire("k").await.unwrap();
    // 8 more: 4 from the burst, 4 of debt; the next permit 500 ms away.
    let debt = redis
        .charge_after("k", 8, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        debt,
        Debt {
            charged: 8,
            dropped: 0
        }
    );
    let refused = denied(redis.try_acquire("k").await);
    assert_eq!(refused.retry_after, Duration::from_millis(500));
    // tat in integer µs: 100 ms spent + 800 ms charged.
    let tat: String = server.cmd(&["GET", &redis.redis_key("k")]).await;
    assert_eq!(tat, "900000");
    // A huge charge is held at the cap: the next permit is 1 s away.
    let debt = redis
        .charge_after("k", 1_000_000, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        debt,
        Debt {
            charged: 5,
            dropped: 999_995
        }
    );
    assert_eq!(
        denied(redis.try_acquire("k").await).retry_after,
        Duration::from_secs(1)
    );
    // At the cap: nothing more is charged, and nothing is written.
    let debt = redis
        .charge_after("k", 3, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        debt,
        Debt {
            charged: 0,
            dropped: 3
        }
    );
    let same: String = server.cmd(&["GET", &redis.redis_key("k")]).await;
    assert_eq!(same, "1400000");
    // The debt is paid at the rule's rate.
    clock.advance(Duration::from_secs(1));
    redis.try_acquire("k").await.unwrap();
    // Other keys are untouched; a zero charge is no call at all.
    redis.try_acquire("other").await.unwrap();
    let calls = redis.redis_calls();
    assert_eq!(
        redis
            .charge_after("k", 0, Duration::from_secs(1))
            .await
            .unwrap(),
        Debt {
            charged: 0,
            dropped: 0
        }
    );
    assert_eq!(redis.redis_calls(), calls);
}

#[tokio::test]
async fn a_fresh_key_owes_only_beyond_its_burst_and_expires_when_paid() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let redis = RedisLimiter::builder(server.manager().await, quota(1_000, 100))
        .client_clock(clock.clone())
        .build()
        .unwrap();
    // 250 on a fresh key: 100 from the burst, 150 of debt (t = 1 ms).
    let debt = redis
        .charge_after("t7", 250, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        debt,
        Debt {
            charged: 250,
            dropped: 0
        }
    );
    assert_eq!(
        denied(redis.try_acquire("t7").await).retry_after,
        Duration::from_millis(151)
    );
    // The key lives exactly as long as it differs from a fresh one.
    let pttl: i64 = server.cmd(&["PTTL", &redis.redis_key("t7")]).await;
    assert!(pttl <= 250 && pttl > 200, "PTTL {pttl}");
}

#[tokio::test]
async fn charges_as_the_core_does() {
    let server = RedisServer::start();
    for (seed, q) in [
        (1u64, quota(10, 1)),
        (2, quota(100, 7)),
        (3, quota(1_000, 50)),
    ] {
        let clock = ManualClock::new();
        let core = RateLimiter::with_clock(q, clock.clone());
        let redis = limiter(&server, q, &clock).await;
        let key = format!("cmp{seed}");
        let mut x = seed;
        for step in 0..60 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let r = x >> 33;
            match r % 4 {
                0 => {
                    let a = core.try_acquire().is_ok();
                    let b = redis.try_acquire(&key).await.is_ok();
                    assert_eq!(a, b, "seed {seed} step {step}: acquire");
                }
                1 | 2 => {
                    let permits = (r >> 3) % 300;
                    let cap = Duration::from_millis((r >> 12) % 2_000);
                    let a = core.charge_after(permits, cap);
                    let b = redis.charge_after(&key, permits, cap).await.unwrap();
                    assert_eq!(
                        a, b,
                        "seed {seed} step {step}: charge {permits} cap {cap:?}"
                    );
                }
                _ => clock.advance(Duration::from_millis((r >> 3) % 500)),
            }
            let a = core.try_acquire().map_err(|e| e.retry_after());
            let b = redis.peek(&key).await;
            match (a, b) {
                (Ok(()), Ok(_)) => {
                    // Keep both in the same state: the core took one.
                    redis.try_acquire(&key).await.unwrap();
                }
                (Err(wait), Err(RedisLimitError::RateLimited { retry_after, .. })) => {
                    assert_eq!(wait, Some(retry_after), "seed {seed} step {step}");
                }
                (a, b) => panic!("seed {seed} step {step}: core {a:?}, redis {b:?}"),
            }
        }
    }
}

#[tokio::test]
async fn a_charge_that_cannot_reach_redis_is_an_error() {
    let mut server = RedisServer::start();
    let clock = ManualClock::new();
    let redis = RedisLimiter::builder(server.manager().await, quota(10, 5))
        .client_clock(clock.clone())
        .call_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    server.kill();
    let err = redis
        .charge_after("k", 3, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
}
