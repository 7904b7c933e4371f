//! `duration_until_reset` on the Redis GCRA backend, against a real
//! `redis-server` under a manual clock (passed to the script as `now`):
//! the time until the bucket is full, `tat − now`, exact to the
//! microsecond the key's state is kept in, for grants, checks and refusals.

use limiter_test_support::redis as redis_support;

use std::time::Duration;

use limiter_core::ManualClock;
use limiter_redis::WhenDown;
use limiter_rls::backend::AnyStore;
use limiter_rls::backend::redis::RedisGcra;
use limiter_rls::proto::{
    Code, DescriptorStatus, Entry, RateLimitDescriptor, RateLimitRequest, RateLimitResponse,
    UInt64Value,
};
use limiter_rls::stats::Recorder;
use limiter_rls::{Options, RateLimitService, RuleSet};
use redis_support::RedisServer;

/// 2026-01-01T00:00:00Z in nanoseconds.
const EPOCH: u64 = 1_767_225_600 * 1_000_000_000;

const CONFIG: &str = "domain: d
descriptors:
  - key: m
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: a
    rate_limit: {unit: second, requests_per_unit: 2}
";

fn d(key: &str, hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: key.into(),
            value: "u".into(),
        }],
        limit: None,
        hits_addend: hits.map(|value| UInt64Value { value }),
        ..Default::default()
    }
}

async fn ask(s: &RateLimitService<AnyStore>, descriptor: RateLimitDescriptor) -> RateLimitResponse {
    s.should_rate_limit(&RateLimitRequest {
        domain: "d".into(),
        descriptors: vec![descriptor],
        hits_addend: 0,
    })
    .await
    .unwrap()
}

fn reset(s: &DescriptorStatus) -> Duration {
    let d = s.duration_until_reset.as_ref().unwrap();
    Duration::new(
        u64::try_from(d.seconds).unwrap(),
        u32::try_from(d.nanos).unwrap(),
    )
}

#[tokio::test]
async fn the_reset_is_the_exact_time_until_the_bucket_is_full() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(EPOCH);
    let backend = RedisGcra::with_clock(
        server.manager().await.into(),
        "reset",
        Duration::from_secs(2),
        WhenDown::Error,
        clock.clone(),
    )
    .unwrap();
    let rules = RuleSet::from_files(vec![("a.yaml".into(), CONFIG.into())]).unwrap();
    let s = RateLimitService::new(
        rules,
        AnyStore::RedisGcra(backend),
        Options::default(),
        Recorder::default(),
    );

    // 60 a minute (t = 1 s): one hit, full again in 1 s.
    let r = ask(&s, d("m", None)).await;
    assert_eq!(r.statuses[0].limit_remaining, 59);
    assert_eq!(reset(&r.statuses[0]), Duration::from_secs(1));
    // A quarter interval later a check (a set 0) charges nothing: 750 ms
    // left, not a whole interval.
    clock.advance(Duration::from_millis(250));
    let r = ask(&s, d("m", Some(0))).await;
    assert_eq!(r.statuses[0].limit_remaining, 59);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(750));
    // Three more: 3.75 s; to the microsecond, 1 µs later 1 µs less.
    let r = ask(&s, d("m", Some(3))).await;
    assert_eq!(r.statuses[0].limit_remaining, 56);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(3_750));
    clock.advance(Duration::from_micros(1));
    let r = ask(&s, d("m", Some(0))).await;
    assert_eq!(reset(&r.statuses[0]), Duration::from_micros(3_749_999));

    // Refused: 2 a second (t = 500 ms), both spent 100 ms apart (full at
    // 1 s from the first), refused 50 ms later: 850 ms away.
    let r = ask(&s, d("a", None)).await;
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(500));
    clock.advance(Duration::from_millis(100));
    let r = ask(&s, d("a", None)).await;
    assert_eq!(r.statuses[0].limit_remaining, 0);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(900));
    clock.advance(Duration::from_millis(50));
    let r = ask(&s, d("a", None)).await;
    assert_eq!(Code::try_from(r.overall_code).unwrap(), Code::OverLimit);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(850));
}
