//! `RedisLimiter` through the async decision seam, on a real server and a
//! manual client clock: the headroom of a grant is what an in-memory
//! `RateLimiter` on the same quota and clock reports for the same history,
//! denials keep their exact wait, and a grant cannot be given back.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_async::AsyncDecide;
use limiter_core::{Decide, Decider, ManualClock, Quota, RateLimiter};
use limiter_redis::RedisLimiter;
use support::RedisServer;

#[tokio::test]
async fn headroom_and_denials_match_the_core() {
    let server = RedisServer::start();
    let quota = Quota::with_period(Duration::from_millis(20))
        .unwrap()
        .with_burst(3)
        .unwrap();
    let clock = ManualClock::starting_at(5_000_000_000);
    let redis = RedisLimiter::builder(server.manager().await, quota)
        .client_clock(clock.clone())
        .expiry_margin(Duration::from_secs(60))
        .build()
        .unwrap();
    let core = RateLimiter::with_clock(quota, clock.clone());
    assert!(
        redis.decide_ready("k", 1, Duration::ZERO).is_none(),
        "a network decision"
    );
    for (advance, cost, max_wait) in [(0, 1, 0), (0, 1, 0), (5, 1, 0), (0, 1, 100), (50, 2, 0)] {
        clock.advance(Duration::from_millis(advance));
        let max_wait = Duration::from_millis(max_wait);
        let ours = redis.decide_async("k", cost, max_wait).await;
        let theirs = core.decide(&(), cost, max_wait);
        match (ours, theirs) {
            (Ok(a), Ok(b)) => {
                assert_eq!((a.wait, a.headroom), (b.wait, b.headroom));
                let () = a.ticket;
                assert!(!Decider::cancel(&redis, "k", ()));
            }
            (Err(a), Err(b)) => assert_eq!(a.retry_after(), b.retry_after()),
            (a, b) => panic!("redis {a:?}, core {b:?}"),
        }
    }
    assert_eq!(redis.policy("k"), core.policy(&()));
}
