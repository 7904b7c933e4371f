//! Envoy's quota mode on all four backends (GCRA and fixed windows, in
//! memory and on a real `redis-server`), as envoyproxy/ratelimit answers
//! it: a check (a descriptor's own `hits_addend` of 0, the request path)
//! charges nothing and is refused only once the limit is past, so it passes
//! exactly at the limit; a cost (a descriptor's own `hits_addend` of 1, the
//! response path) is counted even past the limit, as debt for GCRA. The
//! sequences are those of their `token-quota.sh` and
//! `multiservice-tokenquota.sh`, decided here without Envoy (the Envoy
//! tests run them through a real Envoy). Also: a limit of 0 never answers
//! a reset of zero (`/json` writes the same duration: json.rs's tests).
//!
//! Time is virtual (a manual clock) everywhere but Redis' fixed windows,
//! which read the real clock: there the unit is a second, the requests
//! start clear of a window's end, and "a unit later" is a real second.

use crate::support;

use limiter_test_support::redis as redis_support;

use std::time::Duration;

use limiter_core::ManualClock;
use limiter_redis::WhenDown;
use limiter_rls::backend::memory::{MemoryFixed, MemoryGcra};
use limiter_rls::backend::redis::{RedisFixed, RedisGcra};
use limiter_rls::backend::{AnyStore, CounterStore};
use limiter_rls::proto::Kind;
use limiter_rls::proto::{
    Code, DescriptorStatus, Entry, RateLimitDescriptor, RateLimitRequest, RateLimitResponse,
    UInt64Value,
};
use limiter_rls::stats::Recorder;
use limiter_rls::{Options, RateLimitService, RuleSet};
use redis_support::RedisServer;

/// 2026-01-01T00:00:30Z: half a minute into a window.
const EPOCH: u64 = 1_767_225_630 * 1_000_000_000;

/// Their example config's quota services and banned limit, with `unit`.
fn rules(unit: &str) -> RuleSet {
    let config = format!(
        "domain: rl
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {{unit: {unit}, requests_per_unit: 1}}
    metadata: {{service_with_quota: {{name: service_1}}}}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: {{unit: {unit}, requests_per_unit: 2}}
    metadata: {{service_with_quota: {{name: service_2}}}}
  - key: banned
    rate_limit: {{unit: {unit}, requests_per_unit: 0}}
"
    );
    RuleSet::from_files(vec![("rl.yaml".into(), config)]).unwrap()
}

/// How a test moves time on: a manual clock, or (Redis' fixed windows)
/// the real one.
enum Time {
    Manual(ManualClock),
    Real,
}

impl Time {
    async fn pass(&self, d: Duration) {
        match self {
            Time::Manual(c) => c.advance(d),
            Time::Real => tokio::time::sleep(d).await,
        }
    }
}

fn limiter<B: CounterStore>(unit: &str, backend: B) -> RateLimitService<B> {
    let options = Options {
        dynamic_metadata: true,
        // Redis' first calls (connecting, loading scripts) on a loaded
        // machine: generous, these tests are not about the budget.
        store_budget: Duration::from_secs(5),
        ..Options::default()
    };
    RateLimitService::new(rules(unit), backend, options, Recorder::default())
}

fn service(name: &str, hits: u64) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: "service".into(),
            value: name.into(),
        }],
        limit: None,
        hits_addend: Some(UInt64Value { value: hits }),
        ..Default::default()
    }
}

async fn ask<B: CounterStore>(
    s: &RateLimitService<B>,
    ds: Vec<RateLimitDescriptor>,
) -> RateLimitResponse {
    s.should_rate_limit(&RateLimitRequest {
        domain: "rl".into(),
        descriptors: ds,
        hits_addend: 0,
    })
    .await
    .unwrap()
}

fn code(c: i32) -> Code {
    Code::try_from(c).unwrap()
}

fn reset(s: &DescriptorStatus) -> Duration {
    let d = s.duration_until_reset.as_ref().unwrap();
    Duration::new(
        u64::try_from(d.seconds).unwrap(),
        u32::try_from(d.nanos).unwrap(),
    )
}

/// `metadata.service_with_quota.name` of the answer's dynamic metadata:
/// what Envoy's header mutation reads to pick the upstream.
fn picked(r: &RateLimitResponse) -> Option<String> {
    let mut v = r.dynamic_metadata.as_ref()?.fields.get("metadata")?;
    for field in ["service_with_quota", "name"] {
        let Some(Kind::StructValue(s)) = &v.kind else {
            return None;
        };
        v = s.fields.get(field)?;
    }
    match &v.kind {
        Some(Kind::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// `token-quota.sh`: a check of `service_2` (2 a unit) on the request
/// path, a cost of 1 on the response path; three requests pass (the third
/// exactly at the limit), the third's cost goes past it, the fourth is
/// refused, and a unit later the quota is back.
async fn token_quota<B: CounterStore>(
    s: &RateLimitService<B>,
    time: &Time,
    unit: Duration,
    what: &str,
) {
    for n in 1..=3 {
        let r = ask(s, vec![service("service_2", 0)]).await;
        assert_eq!(code(r.overall_code), Code::Ok, "{what}: request {n}");
        let charged = ask(s, vec![service("service_2", 1)]).await;
        // The third cost does not fit: it says so, and is counted anyway.
        let past = if n == 3 { Code::OverLimit } else { Code::Ok };
        assert_eq!(code(charged.statuses[0].code), past, "{what}: cost {n}");
    }
    let r = ask(s, vec![service("service_2", 0)]).await;
    assert_eq!(code(r.overall_code), Code::OverLimit, "{what}: request 4");
    assert_eq!(r.statuses[0].limit_remaining, 0, "{what}");
    assert!(reset(&r.statuses[0]) > Duration::ZERO, "{what}");
    time.pass(unit).await;
    let r = ask(s, vec![service("service_2", 0)]).await;
    assert_eq!(code(r.overall_code), Code::Ok, "{what}: request 5");
}

/// `multiservice-tokenquota.sh`: checks of both services on the request
/// path; the answer's metadata names the first that passed (the upstream
/// Envoy picks), which is charged 1 on the response path. `service_1` (1 a
/// unit) serves two, then `service_2` (2 a unit) three, then both are past
/// their limits and the request is refused; a unit later `service_1`
/// serves again.
async fn multiservice<B: CounterStore>(
    s: &RateLimitService<B>,
    time: &Time,
    unit: Duration,
    what: &str,
) {
    let both = || vec![service("service_1", 0), service("service_2", 0)];
    for (n, want) in [1, 1, 2, 2, 2].into_iter().enumerate() {
        let r = ask(s, both()).await;
        assert_eq!(code(r.overall_code), Code::Ok, "{what}: request {}", n + 1);
        let name = format!("service_{want}");
        assert_eq!(picked(&r), Some(name.clone()), "{what}: request {}", n + 1);
        ask(s, vec![service(&name, 1)]).await;
    }
    let r = ask(s, both()).await;
    assert_eq!(code(r.overall_code), Code::OverLimit, "{what}: request 6");
    assert_eq!(picked(&r), None, "{what}: no service passed");
    time.pass(unit).await;
    let r = ask(s, both()).await;
    assert_eq!(code(r.overall_code), Code::Ok, "{what}: request 7");
    assert_eq!(
        picked(&r).as_deref(),
        Some("service_1"),
        "{what}: request 7"
    );
}

const MINUTE: Duration = Duration::from_secs(60);

/// Both scripts' sequences on `limiter` (made afresh for each, reading
/// `clock`).
async fn both_scripts<B: CounterStore>(
    limiter: impl Fn(&ManualClock) -> RateLimitService<B>,
    what: &str,
) {
    let clock = ManualClock::starting_at(EPOCH);
    token_quota(&limiter(&clock), &Time::Manual(clock.clone()), MINUTE, what).await;
    let clock = ManualClock::starting_at(EPOCH);
    multiservice(&limiter(&clock), &Time::Manual(clock.clone()), MINUTE, what).await;
}

#[tokio::test]
async fn quota_mode_in_memory() {
    both_scripts(
        |c| limiter("minute", MemoryGcra::new(c.clone(), 1_000)),
        "gcra",
    )
    .await;
    both_scripts(
        |c| limiter("minute", MemoryFixed::new(c.clone(), 1_000)),
        "fixed",
    )
    .await;
}

#[tokio::test]
async fn quota_mode_on_redis_gcra() {
    let server = RedisServer::start();
    for (run, prefix) in ["token", "multi"].into_iter().enumerate() {
        let clock = ManualClock::starting_at(EPOCH);
        let backend = RedisGcra::with_clock(
            server.manager().await.into(),
            prefix,
            Duration::from_secs(2),
            WhenDown::Error,
            clock.clone(),
        )
        .unwrap();
        let s = limiter("minute", AnyStore::RedisGcra(backend));
        let time = Time::Manual(clock);
        if run == 0 {
            token_quota(&s, &time, MINUTE, "redis gcra").await;
        } else {
            multiservice(&s, &time, MINUTE, "redis gcra").await;
        }
    }
}

#[tokio::test]
async fn quota_mode_on_redis_fixed_windows() {
    let server = RedisServer::start();
    let second = Duration::from_secs(1);
    for (run, prefix) in ["token_", "multi_"].into_iter().enumerate() {
        let backend = RedisFixed::new(
            server.manager().await.into(),
            prefix,
            Duration::from_secs(2),
            WhenDown::Error,
            1_000,
        )
        .unwrap();
        let s = limiter("second", AnyStore::RedisFixed(backend));
        // Every request before the pass in one window (a loaded machine
        // takes well under 600 ms for them), the pass into the next.
        support::clear_of_a_window_end(second, Duration::from_millis(600));
        if run == 0 {
            token_quota(&s, &Time::Real, second, "redis fixed").await;
        } else {
            multiservice(&s, &Time::Real, second, "redis fixed").await;
        }
    }
}

/// A zero limit's `durationUntilReset`: GCRA never admits on it, so its
/// unit; a fixed window, the time to the window's end (theirs). Never 0,
/// for a request, a check and a cost.
async fn zero_limit<B: CounterStore>(s: &RateLimitService<B>, what: &str) {
    let banned = |hits: Option<u64>| RateLimitDescriptor {
        entries: vec![Entry {
            key: "banned".into(),
            value: "x".into(),
        }],
        limit: None,
        hits_addend: hits.map(|value| UInt64Value { value }),
        ..Default::default()
    };
    // A request, a check, a cost, a check.
    for (i, hits) in [None, Some(0), Some(1), Some(0)].into_iter().enumerate() {
        let r = ask(s, vec![banned(hits)]).await;
        let left = reset(&r.statuses[0]);
        if what.ends_with("gcra") {
            assert_eq!(left, MINUTE, "{what} {hits:?}");
        } else {
            // The real clock's window (Redis) or the manual one's (EPOCH is
            // 30 s into its minute).
            assert!(left > Duration::ZERO && left <= MINUTE, "{what} {hits:?}");
            if what == "fixed" {
                assert_eq!(left, Duration::from_secs(30), "{what} {hits:?}");
            }
        }
        // Only a fixed window's first check passes (nothing counted past 0
        // yet, theirs); after the cost it is past the limit.
        let passes = i == 1 && !what.ends_with("gcra");
        let want = if passes { Code::Ok } else { Code::OverLimit };
        assert_eq!(code(r.overall_code), want, "{what} {hits:?}");
    }
}

#[tokio::test]
async fn a_zero_limit_never_resets_in_zero() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(EPOCH);
    zero_limit(
        &limiter("minute", MemoryGcra::new(clock.clone(), 10)),
        "gcra",
    )
    .await;
    zero_limit(
        &limiter("minute", MemoryFixed::new(clock.clone(), 10)),
        "fixed",
    )
    .await;
    let redis_gcra = RedisGcra::with_clock(
        server.manager().await.into(),
        "zero",
        Duration::from_secs(2),
        WhenDown::Error,
        clock.clone(),
    )
    .unwrap();
    zero_limit(&limiter("minute", redis_gcra), "redis gcra").await;
    let redis_fixed = RedisFixed::new(
        server.manager().await.into(),
        "zero_",
        Duration::from_secs(2),
        WhenDown::Error,
        1_000,
    )
    .unwrap();
    zero_limit(&limiter("minute", redis_fixed), "redis fixed").await;
}
