//! Every algorithm of limiter-core works in the layer, with headers from its
//! own decision: GCRA, sliding window, warm-up, priority, adaptive, a
//! composite and a keyed limiter.
//!
//! Each case runs the layer over one limiter and, beside it, decides the
//! same requests directly on a twin (the same algorithm, quota and
//! `ManualClock`). Every response must say what the twin's decision says:
//! a grant is `200` with `RateLimit: r=<remaining>;t=<refill, whole seconds
//! up>` and the twin's `RateLimit-Policy`; a denial is `429` with `r=0`,
//! `t` and `Retry-After` the twin's wait rounded up.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::Full;
use limiter_core::{
    Decide, ManualClock, Policy, PriorityLimiter, Quota, RateLimiter, SlidingWindow, WarmUpLimiter,
    adaptive::AdaptiveBuilder, adaptive::EwmaAimd,
};
use limiter_keyed::KeyedLimiter;
use limiter_tower::{
    Backend, Draft10, Global, HeaderStyle, KeyError, KeyExtractor, PeerAddr, PeerIp, RateLimitInfo,
    RateLimitLayer, RequestHead,
};
use tower::{Layer, Service};

type Body = Full<Bytes>;

fn ok(_request: Request<Body>) -> std::future::Ready<Result<Response<Body>, Infallible>> {
    std::future::ready(Ok(Response::new(Body::default())))
}

fn header(response: &Response<impl Sized>, name: &str) -> String {
    response.headers()[name].to_str().unwrap().to_owned()
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// The `RateLimit-Policy` a decision's policy states.
fn policy_header(policy: Policy) -> String {
    let mut h = HeaderMap::new();
    let info = RateLimitInfo {
        name: "default",
        policy,
        remaining: 0,
        reset: Duration::ZERO,
    };
    Draft10.write(&info, &mut h);
    h["ratelimit-policy"].to_str().unwrap().to_owned()
}

/// Sends `steps` requests (advancing `clock` by each step's gap first)
/// through the layer over `backend`, and checks each response against the
/// twin's decision for `key`. Returns the statuses seen.
fn against_twin<B, E, T>(
    backend: B,
    extractor: E,
    twin: &T,
    key: &T::Key,
    request: impl Fn() -> Request<Body>,
    clock: &ManualClock,
    gaps_ms: &[u64],
) -> Vec<StatusCode>
where
    B: Backend,
    E: KeyExtractor<Key = B::Key>,
    T: Decide,
{
    let mut service = RateLimitLayer::new(backend, extractor).layer(tower::service_fn(ok));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut statuses = Vec::new();
    for (i, gap) in gaps_ms.iter().enumerate() {
        clock.advance(Duration::from_millis(*gap));
        assert!(service.poll_ready(&mut cx).is_ready());
        let response = match std::pin::pin!(service.call(request()))
            .as_mut()
            .poll(&mut cx)
        {
            Poll::Ready(r) => r.unwrap(),
            Poll::Pending => panic!("an in-memory decision is ready at once"),
        };
        let expected_policy = match twin.decide(key, 1, Duration::ZERO) {
            Ok(grant) => {
                assert_eq!(response.status(), StatusCode::OK, "request {i}");
                let h = grant.headroom;
                assert_eq!(
                    header(&response, "ratelimit"),
                    format!("\"default\";r={};t={}", h.remaining, ceil_secs(h.refill_in)),
                    "request {i}"
                );
                policy_header(grant.policy)
            }
            Err(denial) => {
                let wait = denial.retry_after().expect("a rate-limit denial");
                assert_eq!(
                    response.status(),
                    StatusCode::TOO_MANY_REQUESTS,
                    "request {i}"
                );
                assert_eq!(
                    header(&response, "ratelimit"),
                    format!("\"default\";r=0;t={}", ceil_secs(wait))
                );
                assert_eq!(
                    header(&response, "retry-after"),
                    ceil_secs(wait).max(1).to_string()
                );
                policy_header(denial.policy().expect("a refusal by the limit"))
            }
        };
        assert_eq!(header(&response, "ratelimit-policy"), expected_policy);
        statuses.push(response.status());
    }
    statuses
}

/// Gaps that drain a small burst, wait part of an interval, and refill.
const GAPS: [u64; 10] = [0, 0, 0, 0, 50, 10, 300, 0, 0, 2_000];

fn quota() -> Quota {
    Quota::per_second(10).unwrap().with_burst(3).unwrap()
}

fn plain() -> Request<Body> {
    Request::new(Body::default())
}

fn refused(statuses: &[StatusCode]) -> bool {
    statuses.contains(&StatusCode::TOO_MANY_REQUESTS) && statuses.contains(&StatusCode::OK)
}

#[test]
fn gcra() {
    let clock = ManualClock::new();
    let twin = RateLimiter::with_clock(quota(), clock.clone());
    let layer = RateLimiter::with_clock(quota(), clock.clone());
    let seen = against_twin(layer, Global, &twin, &(), plain, &clock, &GAPS);
    assert!(refused(&seen));
}

#[test]
fn sliding_window() {
    let clock = ManualClock::new();
    let make = || SlidingWindow::with_clock(3, Duration::from_millis(400), clock.clone()).unwrap();
    let twin = make();
    let seen = against_twin(make(), Global, &twin, &(), plain, &clock, &GAPS);
    assert!(refused(&seen));
}

#[test]
fn warm_up() {
    let clock = ManualClock::new();
    // Burst 1: stored permits play the burst's role.
    let stable = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let make = || WarmUpLimiter::with_clock(stable, Duration::from_secs(1), clock.clone()).unwrap();
    let twin = make();
    let seen = against_twin(make(), Global, &twin, &(), plain, &clock, &GAPS);
    assert!(refused(&seen));
}

/// The priority class from `x-class` (a number), 0 without it.
struct Class;

impl KeyExtractor for Class {
    type Key = usize;

    fn extract(&self, request: &RequestHead<'_>) -> Result<usize, KeyError> {
        Ok(request
            .headers()
            .get("x-class")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0))
    }
}

#[test]
fn priority() {
    let clock = ManualClock::new();
    let make =
        || Arc::new(PriorityLimiter::with_clock(quota(), &[1.0, 0.5], clock.clone()).unwrap());
    let twin = make();
    let low = || {
        let mut r = plain();
        r.headers_mut().insert("x-class", "1".parse().unwrap());
        r
    };
    let seen = against_twin(make(), Class, &twin, &1, low, &clock, &GAPS);
    assert!(refused(&seen));
}

#[test]
fn adaptive() {
    let clock = ManualClock::new();
    let make = || {
        AdaptiveBuilder::with_clock(EwmaAimd::new(Duration::from_millis(100)), clock.clone())
            .max_rate(10.0)
            .build()
            .unwrap()
    };
    let twin = make();
    let seen = against_twin(make(), Global, &twin, &(), plain, &clock, &GAPS);
    assert!(refused(&seen));
}

#[test]
fn composite_and_keyed() {
    let clock = ManualClock::new();
    let per_ip = || {
        KeyedLimiter::builder(quota())
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let global = || RateLimiter::with_clock(Quota::per_second(5).unwrap(), clock.clone());
    let from = || {
        let mut r = plain();
        r.extensions_mut()
            .insert(PeerAddr("192.0.2.7:1".parse::<SocketAddr>().unwrap()));
        r
    };
    let ip: std::net::IpAddr = "192.0.2.7".parse().unwrap();
    // Keyed alone.
    let twin = per_ip();
    let seen = against_twin(per_ip(), PeerIp::new(), &twin, &ip, from, &clock, &GAPS);
    assert!(refused(&seen));
    // Per IP and global, all or nothing.
    let twin = (per_ip(), global());
    let seen = against_twin(
        (per_ip(), global()),
        PeerIp::new(),
        &twin,
        &ip,
        from,
        &clock,
        &GAPS,
    );
    assert!(refused(&seen));
}
