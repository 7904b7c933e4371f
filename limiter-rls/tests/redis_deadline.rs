//! One deadline per request on Redis: with Redis dead (nothing listens)
//! or blackholed (a listener that accepts and never answers), every
//! request, including those whose decision takes several calls (a refusal
//! read back, a check-only descriptor), is answered within the budget
//! (`REDIS_TIMEOUT`, 10 ms here, half of Envoy's 20 ms) by the failure
//! policy, for both algorithms and all four policies. Time is virtual
//! (`start_paused`): the blackhole never answers, so only the deadline can
//! end a call.

use limiter_test_support::redis as redis_support;

use std::time::Duration;

use limiter_redis::WhenDown;
use limiter_rls::backend::AnyStore;
use limiter_rls::backend::redis::{RedisFixed, RedisGcra};
use limiter_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest, UInt64Value};
use limiter_rls::stats::Recorder;
use limiter_rls::{Options, RateLimitService, RequestError, RuleSet};
use redis_support::{blackhole, free_port as dead, lazy};
use tokio::time::Instant;

const BUDGET: Duration = Duration::from_millis(10);

const CONFIG: &str = "domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
";

fn service(
    port: u16,
    fixed: bool,
    policy: WhenDown,
    call_timeout: Duration,
) -> RateLimitService<AnyStore> {
    let conn = lazy(port);
    let backend = if fixed {
        AnyStore::RedisFixed(RedisFixed::new(conn, "", call_timeout, policy, 1_000).unwrap())
    } else {
        AnyStore::RedisGcra(RedisGcra::new(conn, "rls", call_timeout, policy).unwrap())
    };
    let rules = RuleSet::from_files(vec![("a.yaml".into(), CONFIG.into())]).unwrap();
    let options = Options {
        store_budget: BUDGET,
        ..Options::default()
    };
    RateLimitService::new(rules, backend, options, Recorder::default())
}

fn user(v: &str, hits_addend: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: "user".into(),
            value: v.into(),
        }],
        limit: None,
        hits_addend: hits_addend.map(|value| UInt64Value { value }),
        ..Default::default()
    }
}

/// The overall code (or `None` for a service error), and the time taken.
async fn ask(
    s: &RateLimitService<AnyStore>,
    descriptors: Vec<RateLimitDescriptor>,
) -> (Option<Code>, Duration) {
    let start = Instant::now();
    let r = s
        .should_rate_limit(&RateLimitRequest {
            domain: "d".into(),
            descriptors,
            hits_addend: 0,
        })
        .await;
    let took = start.elapsed();
    match r {
        Ok(r) => (Some(Code::try_from(r.overall_code).unwrap()), took),
        Err(RequestError::Store(_)) => (None, took),
        Err(e) => panic!("{e}"),
    }
}

async fn each_policy_within_the_budget(port: u16, what: &str) {
    for fixed in [false, true] {
        for (policy, single, check_only, third) in [
            (
                WhenDown::Open,
                Some(Code::Ok),
                Some(Code::Ok),
                Some(Code::Ok),
            ),
            (
                WhenDown::Closed,
                Some(Code::OverLimit),
                Some(Code::OverLimit),
                Some(Code::OverLimit),
            ),
            // In process: 2 a minute, the third refused (a refusal read
            // back: several calls, all past the breaker or the deadline).
            (
                WhenDown::Local { share: 1.0 },
                Some(Code::Ok),
                Some(Code::Ok),
                Some(Code::OverLimit),
            ),
            (WhenDown::Error, None, None, None),
        ] {
            let s = service(port, fixed, policy, BUDGET);
            let case = format!("{what} fixed={fixed} {policy:?}");
            let (code, took) = ask(&s, vec![user("a", None)]).await;
            assert_eq!(code, single, "{case}: one descriptor");
            assert!(took <= BUDGET, "{case}: {took:?}");
            // A check-only descriptor (per-descriptor hits_addend 0): a read
            // first, then the charge of the other: two calls, one budget.
            let (code, took) = ask(&s, vec![user("b", Some(0)), user("c", None)]).await;
            assert_eq!(code, check_only, "{case}: check-only and a charge");
            assert!(took <= BUDGET, "{case}: {took:?}");
            let (code, took) = ask(&s, vec![user("b", None)]).await;
            assert!(took <= BUDGET, "{case}: {took:?}");
            let (code2, took2) = ask(&s, vec![user("b", None)]).await;
            assert!(took2 <= BUDGET, "{case}: {took2:?}");
            let (code3, took3) = ask(&s, vec![user("b", None)]).await;
            assert!(took3 <= BUDGET, "{case}: {took3:?}");
            assert_eq!(code, single, "{case}: b 1");
            assert_eq!(code2, single, "{case}: b 2");
            assert_eq!(code3, third, "{case}: b 3");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_dead_redis_is_answered_within_the_budget_under_each_policy() {
    each_policy_within_the_budget(dead(), "dead").await;
}

#[tokio::test(start_paused = true)]
async fn a_blackholed_redis_is_answered_within_the_budget_under_each_policy() {
    let port = blackhole().await;
    each_policy_within_the_budget(port, "blackhole").await;
}

/// A call timeout far past the budget (1 s) does not matter: the request's
/// deadline ends the call, whatever the number of calls the decision
/// would take (a check-only descriptor needs a read before a charge).
#[tokio::test(start_paused = true)]
async fn the_request_deadline_cuts_a_longer_call_timeout() {
    let port = blackhole().await;
    for fixed in [false, true] {
        let s = service(port, fixed, WhenDown::Open, Duration::from_secs(1));
        let (code, took) = ask(&s, vec![user("x", Some(0)), user("y", None)]).await;
        assert_eq!(code, Some(Code::Ok));
        assert_eq!(took, BUDGET, "fixed={fixed}");
    }
}
