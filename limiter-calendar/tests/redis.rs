//! `RedisCalendar` against a real, private `redis-server`: the period's
//! count is shared, survives a new limiter (a restart), resets exactly at
//! the period's end, and its key expires after the period.

use limiter_test_support::redis as support;

use core::time::Duration;

use limiter_calendar::{CalendarQuota, EXPIRY_GRACE, Period, RedisCalendar};
use limiter_core::{AcquireError, ManualClock};
use support::RedisServer;

const NS: u64 = 1_000_000_000;
/// 2024-02-29T23:00:00Z.
const LEAP_DAY_23H: u64 = 1_709_247_600;
/// 2024-03-01T00:00:00Z.
const MARCH_1: u32 = 1_709_251_200;

#[tokio::test]
async fn the_count_is_shared_kept_and_reset_exactly() {
    let server = RedisServer::start();
    let mut conn = server.manager().await;
    let clock = ManualClock::starting_at(LEAP_DAY_23H * NS);
    let quota = CalendarQuota::new(3, Period::Month).unwrap();
    let first = RedisCalendar::with_clock(quota.clone(), clock.clone());
    let grant = first
        .acquire_n(&mut conn, "tenant:7", 2)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(grant.headroom.remaining, 1);
    assert_eq!(grant.reset_at, MARCH_1);

    // Another instance (or the same one after a restart) sees the count.
    let second = RedisCalendar::with_clock(quota, clock.clone());
    assert!(
        second
            .acquire_n(&mut conn, "tenant:7", 1)
            .await
            .unwrap()
            .is_ok()
    );
    assert_eq!(
        second.acquire_n(&mut conn, "tenant:7", 1).await.unwrap(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_secs(3600)
        })
    );
    // A refusal wrote nothing; other keys are independent.
    let key = RedisCalendar::<ManualClock>::count_key("tenant:7", 1_706_745_600);
    let used: i64 = server.cmd(&["GET", &key]).await;
    assert_eq!(used, 3);
    assert!(
        second
            .acquire_n(&mut conn, "tenant:8", 3)
            .await
            .unwrap()
            .is_ok()
    );
    // The key expires an hour after its period (an hour away on the
    // limiter's clock): its time to live was set to two hours.
    let ttl: i64 = server.cmd(&["PTTL", &key]).await;
    assert!(
        ttl > 0 && ttl <= i64::from(2 * EXPIRY_GRACE) * 1_000,
        "{ttl}"
    );

    // March: a new period, a new key.
    clock.set(u64::from(MARCH_1) * NS);
    let grant = first
        .acquire_n(&mut conn, "tenant:7", 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(grant.headroom.remaining, 0);
    assert_eq!(grant.reset_at, 1_711_929_600); // 2024-04-01T00:00:00Z
    assert!(matches!(
        first.acquire_n(&mut conn, "tenant:7", 4).await.unwrap(),
        Err(AcquireError::InsufficientCapacity {
            requested: 4,
            burst: 3
        })
    ));
}
