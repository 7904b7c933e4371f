//! The deny cache and leases, exactly, under a manual client clock: which
//! requests they answer, for how long, and that neither ever grants a permit
//! Redis did not.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::{ManualClock, Quota};
use limiter_redis::{RedisLimiter, Source};
use support::{RedisServer, denied};

/// The manual clock stands still while Redis' expiry clock runs: keep keys.
const MARGIN: Duration = Duration::from_secs(60);

fn per_second(burst: u32) -> Quota {
    Quota::per_second(1).unwrap().with_burst(burst).unwrap()
}

#[tokio::test]
async fn the_deny_cache_answers_until_retry_after_and_no_longer() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = RedisLimiter::builder(server.manager().await, per_second(2))
        .client_clock(clock.clone())
        .expiry_margin(MARGIN)
        .build()
        .unwrap();
    limiter.try_acquire_n("k", 2).await.unwrap();
    let first = denied(limiter.try_acquire("k").await);
    assert_eq!(first.source, Source::Redis);
    assert_eq!(first.retry_after, Duration::from_secs(1));
    assert_eq!(first.reset_after, Duration::from_secs(2));
    let cached = denied(limiter.try_acquire("k").await);
    assert_eq!(cached.source, Source::DenyCache);
    assert_eq!(cached.retry_after, Duration::from_secs(1));
    assert_eq!(cached.reset_after, Duration::from_secs(2));
    assert_eq!(cached.remaining, 0);
    // Larger requests are covered too; a reservation that may wait is not.
    assert_eq!(
        denied(limiter.try_acquire_n("k", 2).await).source,
        Source::DenyCache
    );
    assert_eq!(limiter.redis_calls(), 2);
    clock.advance(Duration::from_micros(999_999));
    let last = denied(limiter.try_acquire("k").await);
    assert_eq!(last.source, Source::DenyCache);
    assert_eq!(last.retry_after, Duration::from_micros(1));
    clock.advance(Duration::from_micros(1));
    let granted = limiter.try_acquire("k").await.unwrap();
    assert_eq!(granted.source, Source::Redis);
    assert_eq!(limiter.redis_calls(), 3);
}

#[tokio::test]
async fn a_cached_denial_does_not_cover_smaller_requests() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = RedisLimiter::builder(server.manager().await, per_second(2))
        .client_clock(clock.clone())
        .expiry_margin(MARGIN)
        .build()
        .unwrap();
    limiter.try_acquire("k").await.unwrap();
    let two = denied(limiter.try_acquire_n("k", 2).await);
    assert_eq!((two.source, two.remaining), (Source::Redis, 1));
    let one = limiter.try_acquire("k").await.unwrap();
    assert_eq!(one.source, Source::Redis);
    // And a reservation allowed to wait goes to Redis and gets its slot.
    let later = limiter
        .reserve_n("k", 1, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(
        (later.source, later.wait),
        (Source::Redis, Duration::from_secs(1))
    );
}

#[tokio::test]
async fn leases_spend_only_what_redis_granted() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let build = |conn, lease: bool| {
        let b = RedisLimiter::builder(conn, per_second(10))
            .client_clock(clock.clone())
            .expiry_margin(MARGIN);
        let b = if lease {
            b.lease(4, Duration::from_secs(5))
        } else {
            b
        };
        b.build().unwrap()
    };
    let leasing = build(server.manager().await, true);
    let observer = build(server.manager().await, false);

    let first = leasing.try_acquire("k").await.unwrap();
    assert_eq!(first.source, Source::Redis);
    assert_eq!(first.remaining, 6 + 3); // 6 left in Redis, 3 held here
    assert_eq!(observer.peek("k").await.unwrap().remaining, 6);
    for left in (0..3).rev() {
        let a = leasing.try_acquire("k").await.unwrap();
        assert_eq!((a.source, a.remaining), (Source::Lease, left));
    }
    // At one instant, leasing and plain clients together get exactly the burst.
    let mut admitted = 4;
    for i in 0..20 {
        let limiter = if i % 2 == 0 { &leasing } else { &observer };
        match limiter.try_acquire("k").await {
            Ok(_) => admitted += 1,
            result => {
                let d = denied(result);
                assert!(
                    matches!(d.source, Source::Redis | Source::DenyCache),
                    "{d:?}"
                );
            }
        }
    }
    assert_eq!(admitted, 10);
    // Leasing: the first lease, a second one, its first denial. Observer: the
    // peek, two grants, its first denial. Every later denial was cached.
    assert_eq!(leasing.redis_calls(), 3);
    assert_eq!(observer.redis_calls(), 4);
}

#[tokio::test]
async fn expired_or_short_leases_are_stranded_never_overspent() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = RedisLimiter::builder(server.manager().await, per_second(10))
        .client_clock(clock.clone())
        .expiry_margin(MARGIN)
        .lease(5, Duration::from_millis(500))
        .build()
        .unwrap();
    limiter.try_acquire("k").await.unwrap(); // leases 5, holds 4
    clock.advance(Duration::from_millis(500)); // the lease expires unspent
    let d = limiter.try_acquire("k").await.unwrap();
    assert_eq!(d.source, Source::Redis);
    // 5 taken, then 0.5 s earned nothing whole, then 5 more: the burst is spent.
    assert_eq!(d.remaining, 4); // held
    assert_eq!(denied(limiter.peek("k").await).remaining, 0);
    // A request larger than the lease drops it and asks Redis, which denies;
    // the 4 held permits are stranded, so one permit is now denied too.
    let big = denied(limiter.try_acquire_n("k", 5).await);
    assert_eq!((big.source, big.remaining), (Source::Redis, 0));
    let after = denied(limiter.try_acquire("k").await);
    assert_eq!(after.source, Source::Redis);
}
