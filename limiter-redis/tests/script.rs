//! What the script writes and when: integer `tat`s, nothing on denial, TTLs
//! that end when the key equals a fresh one, `NOSCRIPT` recovery, reservations
//! served in order across clients, and `reset`.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::{ManualClock, Quota};
use limiter_redis::{RedisLimiter, Source};
use support::{RedisServer, denied};

fn quota(period: Duration, burst: u32) -> Quota {
    Quota::with_period(period)
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

#[tokio::test]
async fn writes_integer_microseconds_with_the_ttl_rounded_up() {
    let server = RedisServer::start();
    // Near today's epoch, where tostring() would print 1.7e+15.
    let clock = ManualClock::starting_at(1_700_000_000_123_456_000);
    let limiter = RedisLimiter::builder(
        server.manager().await,
        quota(Duration::from_micros(10_000_500), 3),
    )
    .client_clock(clock.clone())
    .build()
    .unwrap();
    let a = limiter.try_acquire("k").await.unwrap();
    assert_eq!(a.reset_after, Duration::from_micros(10_000_500));
    let key = limiter.redis_key("k");
    assert_eq!(key, "{limiter:k}");
    let tat: String = server.cmd(&["GET", &key]).await;
    assert_eq!(tat, "1700000010123956");
    // tat − now = 10,000,500 µs → 10,001 ms (rounded up, never down).
    let pttl: i64 = server.cmd(&["PTTL", &key]).await;
    assert!(pttl <= 10_001 && pttl > 9_001, "PTTL {pttl}");

    // Two more fill the burst; a denial then writes nothing.
    limiter.try_acquire_n("k", 2).await.unwrap();
    let before: String = server.cmd(&["GET", &key]).await;
    let refused = denied(limiter.reserve_n("k", 1, Duration::from_secs(1)).await);
    assert_eq!(refused.source, Source::Redis);
    assert_eq!(refused.retry_after, Duration::from_micros(10_000_500));
    let after: String = server.cmd(&["GET", &key]).await;
    assert_eq!(before, after);
    let pttl: i64 = server.cmd(&["PTTL", &key]).await;
    assert!(pttl <= 30_002 && pttl > 29_002, "PTTL {pttl}");
}

#[tokio::test]
async fn an_expired_key_is_a_fresh_one() {
    let server = RedisServer::start();
    let limiter =
        RedisLimiter::builder(server.manager().await, quota(Duration::from_millis(30), 2))
            .deny_cache(false)
            .build()
            .unwrap();
    limiter.try_acquire_n("k", 2).await.unwrap();
    assert_eq!(denied(limiter.try_acquire("k").await).source, Source::Redis);
    let key = limiter.redis_key("k");
    let pttl: i64 = server.cmd(&["PTTL", &key]).await;
    assert!((1..=60).contains(&pttl), "PTTL {pttl}");
    // Wait (bounded) until Redis expires the key...
    let mut gone = false;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let exists: i64 = server.cmd(&["EXISTS", &key]).await;
        if exists == 0 {
            gone = true;
            break;
        }
    }
    assert!(gone, "the key never expired");
    // ...and it then admits the full burst again.
    let a = limiter.try_acquire("k").await.unwrap();
    assert_eq!(a.remaining, 1);
}

#[tokio::test]
async fn script_flush_is_survived_by_reloading() {
    let server = RedisServer::start();
    let limiter =
        RedisLimiter::builder(server.manager().await, quota(Duration::from_secs(3600), 3))
            .deny_cache(false)
            .build()
            .unwrap();
    limiter.try_acquire("k").await.unwrap();
    let _: () = server.cmd(&["SCRIPT", "FLUSH"]).await;
    limiter.try_acquire("k").await.unwrap();
    let _: () = server.cmd(&["SCRIPT", "FLUSH"]).await;
    let a = limiter.try_acquire("k").await.unwrap();
    assert_eq!((a.remaining, a.source), (0, Source::Redis));
    assert_eq!(denied(limiter.try_acquire("k").await).source, Source::Redis);
    assert_eq!(limiter.redis_calls(), 4);
    assert_eq!(limiter.redis_failures(), 0);
}

#[tokio::test]
async fn reservations_from_two_clients_are_served_in_order() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(5_000_000_000);
    let q = quota(Duration::from_millis(100), 1);
    let build = |conn| {
        RedisLimiter::builder(conn, q)
            .client_clock(clock.clone())
            .expiry_margin(Duration::from_secs(60))
            .build()
            .unwrap()
    };
    let a = build(server.manager().await);
    let b = build(server.manager().await);
    let wait = |ms| Duration::from_millis(ms);
    assert_eq!(
        a.reserve_n("k", 1, wait(1_000)).await.unwrap().wait,
        wait(0)
    );
    assert_eq!(
        b.reserve_n("k", 1, wait(1_000)).await.unwrap().wait,
        wait(100)
    );
    assert_eq!(
        a.reserve_n("k", 1, wait(1_000)).await.unwrap().wait,
        wait(200)
    );
    // B's next slot would be 300 ms away: refused at once, nothing consumed.
    let refused = denied(b.reserve_n("k", 1, wait(250)).await);
    assert_eq!(refused.retry_after, wait(300));
    assert_eq!(
        a.reserve_n("k", 1, wait(1_000)).await.unwrap().wait,
        wait(300)
    );
    assert_eq!(denied(b.peek("k").await).reset_after, wait(400));
}

#[tokio::test]
async fn reset_makes_a_key_full_again() {
    let server = RedisServer::start();
    let limiter =
        RedisLimiter::builder(server.manager().await, quota(Duration::from_secs(3600), 2))
            .key_prefix("reset")
            .build()
            .unwrap();
    limiter.try_acquire_n("k", 2).await.unwrap();
    assert_eq!(denied(limiter.try_acquire("k").await).source, Source::Redis);
    assert_eq!(
        denied(limiter.try_acquire("k").await).source,
        Source::DenyCache
    );
    limiter.reset("k").await.unwrap();
    let exists: i64 = server.cmd(&["EXISTS", "{reset:k}"]).await;
    assert_eq!(exists, 0);
    let a = limiter.try_acquire("k").await.unwrap();
    assert_eq!((a.remaining, a.source), (1, Source::Redis));
}
