//! `TwoTierLimiter` on a real server with two instances sharing one global
//! quota, under a manual client clock: each instance stops at its cap
//! without calling Redis, a global refusal gives the local permit back, and
//! both tiers refill exactly.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::{ManualClock, Quota};
use limiter_redis::{RedisLimitError, RedisLimiter, Source, TwoTierLimiter};
use support::{RedisServer, denied};

fn per_second(burst: u32) -> Quota {
    Quota::per_second(1).unwrap().with_burst(burst).unwrap()
}

async fn instance(server: &RedisServer, clock: &ManualClock) -> TwoTierLimiter {
    let global = RedisLimiter::builder(server.manager().await, per_second(5))
        .client_clock(clock.clone())
        .expiry_margin(Duration::from_secs(3600))
        .build()
        .unwrap();
    TwoTierLimiter::new(global, per_second(3)).unwrap()
}

#[tokio::test]
async fn the_local_cap_spares_redis_and_a_global_refusal_refunds_it() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_700_000_000_000_000_000);
    let (a, b) = (
        instance(&server, &clock).await,
        instance(&server, &clock).await,
    );
    for left in [4, 3, 2] {
        let granted = a.try_acquire("k").await.unwrap();
        assert_eq!(granted.source, Source::Redis);
        // The smaller of the global and the local remaining.
        assert_eq!(granted.remaining, left.min(a.local_available("k")));
    }
    // A's cap is spent: refused locally, exactly 1 s to the next permit.
    let d = denied(a.try_acquire("k").await);
    assert_eq!(
        (d.source, d.retry_after, d.remaining),
        (Source::InstanceCap, Duration::from_secs(1), 0)
    );
    assert_eq!(a.global().redis_calls(), 3);
    // B takes the last two global permits, then Redis refuses B.
    b.try_acquire_n("k", 2).await.unwrap();
    assert_eq!(b.local_available("k"), 1);
    let d = denied(b.try_acquire("k").await);
    assert_eq!(
        (d.source, d.retry_after),
        (Source::Redis, Duration::from_secs(1))
    );
    assert_eq!(b.local_available("k"), 1); // given back
    let d = denied(b.try_acquire("k").await);
    assert_eq!(d.source, Source::DenyCache);
    assert_eq!(b.local_available("k"), 1);
    assert_eq!(b.global().redis_calls(), 2);
    // Larger than the local burst: refused with no call.
    assert!(matches!(
        b.try_acquire_n("k", 4).await,
        Err(RedisLimitError::InsufficientCapacity {
            requested: 4,
            burst: 3
        })
    ));
    // One second: one permit back globally, one back on A.
    clock.advance(Duration::from_secs(1));
    assert_eq!(a.local_available("k"), 1);
    assert_eq!(a.try_acquire("k").await.unwrap().source, Source::Redis);
    assert_eq!(denied(b.try_acquire("k").await).source, Source::Redis);
    // A reservation waits for the longer tier: A's local slot is 1 s away.
    let r = a.reserve_n("k", 1, Duration::from_secs(2)).await.unwrap();
    assert_eq!(r.wait, Duration::from_secs(1));
    assert_eq!(a.local_quota(), per_second(3));
}
