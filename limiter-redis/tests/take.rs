//! The `take*` waits on a real server: each reserves its slot in the script
//! and sleeps the granted wait; a timeout or deadline that the slot misses
//! fails at once and consumes nothing; a dropped wait leaves its slot
//! consumed on Redis. Decisions run on a manual client clock, so waits are
//! exact; the sleeps themselves are real (tokio's paused clock would fire the
//! call timeout while the test waits on the socket), and nothing asserts a
//! duration that was measured.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::{ManualClock, Quota};
use limiter_redis::{RedisLimitError, RedisLimiter, Source};
use support::{RedisServer, denied};
use tokio::time::Instant;

fn quota(period: Duration, burst: u32) -> Quota {
    Quota::with_period(period)
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

/// A limiter on a manual client clock that stands still (keys kept alive by
/// an expiry margin, since Redis' expiry clock runs).
async fn limiter(server: &RedisServer, quota: Quota) -> RedisLimiter {
    RedisLimiter::builder(server.manager().await, quota)
        .client_clock(ManualClock::starting_at(5_000_000_000))
        .expiry_margin(Duration::from_secs(60))
        .build()
        .unwrap()
}

const MS: fn(u64) -> Duration = Duration::from_millis;

#[tokio::test]
async fn take_waits_for_its_slot_and_a_timeout_consumes_nothing() {
    let server = RedisServer::start();
    let limiter = limiter(&server, quota(MS(20), 1)).await;
    let first = limiter.take("k").await.unwrap();
    assert_eq!((first.wait, first.source), (Duration::ZERO, Source::Redis));
    let second = limiter.take("k").await.unwrap();
    assert_eq!(second.wait, MS(20));
    let reset = denied(limiter.peek("k").await).reset_after;
    assert_eq!(reset, MS(40));
    let timed_out = denied(limiter.take_timeout("k", MS(30)).await);
    assert_eq!(timed_out.retry_after, MS(40));
    assert_eq!(denied(limiter.peek("k").await).reset_after, reset);
    let within = limiter.take_timeout("k", MS(45)).await.unwrap();
    assert_eq!(within.wait, MS(40));
    // No limit at all is `take`.
    let unbounded = limiter.take_timeout("k", Duration::MAX).await.unwrap();
    assert_eq!(unbounded.wait, MS(60));
}

#[tokio::test]
async fn take_n_and_take_n_timeout_claim_n_slots_at_once() {
    let server = RedisServer::start();
    let limiter = limiter(&server, quota(MS(20), 2)).await;
    let both = limiter.take_n("k", 2).await.unwrap();
    assert_eq!((both.wait, both.remaining), (Duration::ZERO, 0));
    // Two more permits are 40 ms away: a 30 ms timeout fails at once.
    let refused = denied(limiter.take_n_timeout("k", 2, MS(30)).await);
    assert_eq!(
        (refused.retry_after, refused.source),
        (MS(40), Source::Redis)
    );
    assert_eq!(denied(limiter.peek("k").await).reset_after, MS(40));
    let fits = limiter.take_n_timeout("k", 2, MS(40)).await.unwrap();
    assert_eq!(fits.wait, MS(40));
    assert_eq!(denied(limiter.peek("k").await).reset_after, MS(80));
    let plain = limiter.take_n("k", 1).await.unwrap();
    assert_eq!(plain.wait, MS(60));
    // Over the burst: a typed error at once, without a call.
    let calls = limiter.redis_calls();
    for result in [
        limiter.take_n("k", 3).await,
        limiter.take_n_timeout("k", 3, Duration::MAX).await,
        limiter.take_n_until("k", 3, Instant::now()).await,
    ] {
        assert!(matches!(
            result,
            Err(RedisLimitError::InsufficientCapacity {
                requested: 3,
                burst: 2
            })
        ));
    }
    assert_eq!(limiter.redis_calls(), calls);
    // Zero permits: granted at once, consuming nothing.
    let none = limiter
        .take_n_timeout("k", 0, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(none.wait, Duration::ZERO);
    assert_eq!(denied(limiter.peek("k").await).reset_after, MS(100));
}

#[tokio::test]
async fn take_until_allows_the_time_left_before_its_deadline() {
    let server = RedisServer::start();
    let limiter = limiter(&server, quota(MS(20), 2)).await;
    // A deadline already passed is a zero timeout: permits available now
    // are taken, a later slot is refused.
    let passed = Instant::now();
    let now = limiter.take_until("k", passed).await.unwrap();
    assert_eq!(now.wait, Duration::ZERO);
    let now = limiter.take_n_until("k", 1, passed).await.unwrap();
    assert_eq!((now.wait, now.remaining), (Duration::ZERO, 0));
    let refused = denied(limiter.take_until("k", passed).await);
    assert_eq!(refused.retry_after, MS(20));
    // A deadline short of the slot: refused at once, nothing consumed (the
    // allowance only shrinks as real time passes, so this cannot flake).
    let short = denied(limiter.take_n_until("k", 2, Instant::now() + MS(39)).await);
    assert_eq!(short.retry_after, MS(40));
    assert_eq!(denied(limiter.peek("k").await).reset_after, MS(40));
    // A distant deadline: the slot is granted and slept.
    let far = Instant::now() + Duration::from_secs(600);
    let one = limiter.take_until("k", far).await.unwrap();
    assert_eq!(one.wait, MS(20));
    let two = limiter.take_n_until("k", 2, far).await.unwrap();
    assert_eq!(two.wait, MS(60));
}

#[tokio::test]
async fn a_dropped_take_leaves_its_slot_consumed_on_redis() {
    let server = RedisServer::start();
    let hour = Duration::from_secs(3_600);
    let limiter = limiter(&server, quota(hour, 1)).await;
    limiter.take("k").await.unwrap();
    let key = limiter.redis_key("k");
    let before: String = server.cmd(&["GET", &key]).await;
    // The second take reserves the slot an hour away, then sleeps.
    let waiting = tokio::spawn({
        let limiter = limiter.clone();
        async move { limiter.take("k").await }
    });
    // Bounded: until Redis holds the reservation (the script ran).
    let mut after = before.clone();
    for _ in 0..1_000 {
        after = server.cmd(&["GET", &key]).await;
        if after != before {
            break;
        }
        tokio::time::sleep(MS(10)).await;
    }
    let t_us = hour.as_micros() as u64;
    let tat = |s: &str| s.parse::<u64>().unwrap();
    assert_eq!(
        tat(&after),
        tat(&before) + t_us,
        "the reservation never landed"
    );
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    // Nothing was refunded: the key still holds the dropped slot, and the
    // next request waits behind it.
    let still: String = server.cmd(&["GET", &key]).await;
    assert_eq!(still, after);
    let next = denied(limiter.try_acquire("k").await);
    assert_eq!(next.retry_after, 2 * hour);
    let queued = limiter.reserve_n("k", 1, 3 * hour).await.unwrap();
    assert_eq!(queued.wait, 2 * hour);
}
