//! `RateLimit-Policy` is honest: a client that follows what it advertises is
//! admitted in full, and is not held below the quota's rate.
//!
//! The client reads the policy from the first response, as a client would
//! (`q`, `w` and `limiter-burst` parsed from the header text), and then
//! sends each request at the earliest instant a token bucket of those
//! numbers allows: at most `limiter-burst` (else `q`) at once, `q` more
//! every `w` seconds, in exact rational arithmetic. Every request goes
//! through the real layer over a real `RateLimiter` on a `ManualClock`.

use std::convert::Infallible;
use std::future::Future;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use limiter_core::{ManualClock, Quota, RateLimiter};
use limiter_tower::{Global, RateLimitLayer};
use proptest::prelude::*;
use tower::{Layer, Service};

const NANOS: u128 = 1_000_000_000;

/// The policy as a client reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Advertised {
    q: u128,
    w: u128,
    at_once: u128,
}

fn parse_policy(value: &str) -> Advertised {
    let params: Vec<(&str, u128)> = value
        .split(';')
        .skip(1)
        .map(|p| {
            let (name, v) = p.split_once('=').expect("a parameter with a value");
            (name, v.parse().expect("an integer parameter"))
        })
        .collect();
    let get = |name: &str| params.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let q = get("q").expect("q is required");
    let w = get("w").expect("w is given");
    Advertised {
        q,
        w,
        at_once: get("limiter-burst").unwrap_or(q),
    }
}

type Body = Full<Bytes>;

fn ok(_request: Request<Body>) -> std::future::Ready<Result<Response<Body>, Infallible>> {
    std::future::ready(Ok(Response::new(Body::default())))
}

/// Polls an in-memory decision's response, which is ready at once.
fn respond<S, B>(service: &mut S) -> Response<B>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(service.poll_ready(&mut cx).is_ready());
    let mut future = std::pin::pin!(service.call(Request::new(Body::default())));
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(response) => response.expect("infallible"),
        Poll::Pending => panic!("an in-memory decision is ready at once"),
    }
}

/// Runs the client for `n` requests against `period`/`burst`; returns the
/// advertised policy and the instant (ns) of the last request.
fn follow(period: u64, burst: u32, n: u32, pauses: &[u64]) -> (Advertised, u128) {
    let clock = ManualClock::new();
    let quota = Quota::from_nanos(period, burst).unwrap();
    let layer = RateLimitLayer::new(RateLimiter::with_clock(quota, clock.clone()), Global);
    let mut service = layer.layer(tower::service_fn(ok));

    let first = respond(&mut service);
    assert_eq!(first.status(), StatusCode::OK);
    let policy = parse_policy(first.headers()["ratelimit-policy"].to_str().unwrap());
    // The client's own GCRA: emission interval w/q seconds, scaled by q so
    // that every quantity is an integer (`tat_q` is q × the theoretical
    // arrival time in ns).
    let big_w = policy.w * NANOS;
    let tolerance = (policy.at_once - 1) * big_w;
    let mut now: u128 = 0;
    let mut tat_q = big_w;
    let mut pauses = pauses.iter().cycle();
    for i in 1..n {
        // The earliest instant the bucket allows, after an optional pause.
        let earliest = tat_q.saturating_sub(tolerance).div_ceil(policy.q);
        let pause = if i % 7 == 0 {
            u128::from(*pauses.next().unwrap_or(&0))
        } else {
            0
        };
        now = now.max(earliest) + pause;
        clock.set(u64::try_from(now).unwrap());
        tat_q = tat_q.max(now * policy.q) + big_w;
        let response = respond(&mut service);
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "request {i} at {now} ns refused under {policy:?} (t={period} ns, burst {burst})"
        );
    }
    (policy, now)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_client_following_the_policy_is_admitted_in_full_at_the_whole_rate(
        period in prop_oneof![
            1_000u64..5_000_000,              // 200/s to 1M/s
            5_000_000u64..5_000_000_000,      // 0.2/s to 200/s
        ],
        burst in prop_oneof![1u32..4, 1u32..300],
        pauses in proptest::collection::vec(0u64..3_000_000_000, 0..4),
    ) {
        let n = burst + 200;
        let (policy, last) = follow(period, burst, n, &[]);
        // It may send the whole burst at once, never more than admitted ...
        prop_assert_eq!(policy.at_once, u128::from(burst));
        // ... and is held below the quota's rate by at most 0.1 %: the
        // n-th request of a quota's greediest client comes (n − burst)·t
        // after the first.
        let fastest = u128::from(n - burst) * u128::from(period);
        prop_assert!(last >= fastest);
        prop_assert!(last * 999 <= fastest * 1000 + 999, "{last} vs {fastest}");
        // With idle pauses the client is still admitted in full.
        follow(period, burst, n, &pauses);
    }
}

#[test]
fn the_issue_examples_state_the_whole_rate() {
    // 800/s, burst 1 and 1,000/s, burst 20.
    let (policy, _) = follow(1_250_000, 1, 50, &[]);
    assert_eq!(
        policy,
        Advertised {
            q: 800,
            w: 1,
            at_once: 1
        }
    );
    let (policy, _) = follow(1_000_000, 20, 50, &[]);
    assert_eq!(
        policy,
        Advertised {
            q: 1000,
            w: 1,
            at_once: 20
        }
    );
}
