//! The rule set's layer adds no allocation of its own: a request no rule
//! matches, or one its rule admits at once, costs what the inner service
//! and the rule's headers cost, and nothing more (no service built, no
//! inner service cloned, no boxed future per request). Under axum, whose
//! body the layer answers in, the response is not boxed again.
//!
//! A counting global allocator (this test binary's own) counts the
//! allocations each thread makes; every measurement runs on the test's
//! thread, in steady state (after a warm-up request, so the thread's
//! cached `RateLimit-Policy` value and the rule's key exist), and is
//! compared with what the same headers cost when written by hand.

mod support;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::HeaderName;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use limiter_config::RuleSet;
use limiter_core::ManualClock;
use limiter_tower::PeerAddr;
use support::TempDir;
use tower::{Layer, Service};

use limiter_test_support::counting_alloc::{Counting, allocations};

#[global_allocator]
static GLOBAL: Counting = Counting;

type Body = Full<Bytes>;

/// An inner service whose response allocates nothing (an empty header map,
/// a static body).
#[derive(Clone)]
struct Hello;

impl Service<Request<Body>> for Hello {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: Request<Body>) -> Self::Future {
        std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"ok")))))
    }
}

/// One request through `service`, polled to its response; returns the
/// allocations from `call` to the response (the request itself is built
/// before counting) and the response.
fn one<S, B>(service: &mut S, request: Request<Body>) -> (u64, Response<B>)
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>,
{
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(service.poll_ready(&mut cx).is_ready());
    allocations(|| {
        let mut future = std::pin::pin!(service.call(request));
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(response)) => response,
            Poll::Ready(Err(e)) => match e {},
            Poll::Pending => panic!("an in-memory decision is ready at once"),
        }
    })
}

/// A GET of `path` from the socket peer `peer`.
fn get(path: &str, peer: &str) -> Request<Body> {
    let mut request = Request::get(path).body(Body::default()).unwrap();
    request
        .extensions_mut()
        .insert(PeerAddr(peer.parse::<SocketAddr>().unwrap()));
    request
}

/// What the draft-10 headers of rule `name` cost a fresh response: the
/// header map and the `RateLimit` value, written into one allocation (a
/// layer makes its `RateLimit-Policy` value once and shares it: static
/// here).
fn draft10_cost(name: &str) -> u64 {
    let item = format!("\"{name}\";r=998;t=1");
    allocations(|| {
        let mut response = Response::new(());
        let headers = response.headers_mut();
        let policy = HeaderValue::from_static("\"x\";q=1000;w=1");
        headers.insert(HeaderName::from_static("ratelimit-policy"), policy);
        let item = HeaderValue::from_bytes(item.as_bytes()).unwrap();
        headers.insert(HeaderName::from_static("ratelimit"), item);
        response
    })
    .0
}

const RULES: &str = r#"
rate_limits:
  global:
    algorithm: token_bucket
    rate: 1000
    burst: 1000
    match: { route: "/global" }
  per_client:
    algorithm: token_bucket
    rate: 1000
    burst: 1000
    per_ip: true
    match: { route: "/keyed" }
  quiet:
    algorithm: token_bucket
    rate: 1000
    burst: 1000
    per_ip: true
    headers: none
    match: { route: "/quiet" }
"#;

#[test]
fn an_admitted_request_allocates_only_its_headers() {
    let dir = TempDir::new();
    let rules = RuleSet::load_with_clock(dir.write("rules.yaml", RULES), ManualClock::new())
        .expect("the rules load");
    let mut service = rules.layer().layer(Hello);
    let bare = one(&mut Hello, get("/", "192.0.2.7:1")).0;
    assert_eq!(bare, 0, "the inner service alone allocates nothing");

    // No rule matches: the inner service, through (after a first request,
    // which sets up the thread's slot for reading the rule set).
    one(&mut service, get("/elsewhere", "192.0.2.7:1"));
    for _ in 0..3 {
        let (n, response) = one(&mut service, get("/elsewhere", "192.0.2.7:1"));
        assert_eq!((n, response.status()), (0, StatusCode::OK), "unrouted");
    }

    // A keyed rule without headers: nothing at all (the key is in the
    // table after the first request, and an IPv4 or IPv6 key is inline).
    for peer in ["192.0.2.7:1", "[2001:db8:1234:5678::1]:1"] {
        one(&mut service, get("/quiet", peer));
        for _ in 0..3 {
            let (n, response) = one(&mut service, get("/quiet", peer));
            assert_eq!(response.status(), StatusCode::OK);
            assert!(!response.headers().contains_key("ratelimit"));
            assert_eq!(n, 0, "an admitted request of {peer} without headers");
        }
    }

    // With headers, global and keyed: exactly the cost of the headers.
    for (path, name) in [("/global", "global"), ("/keyed", "per_client")] {
        let (_, warm) = one(&mut service, get(path, "192.0.2.7:1"));
        assert!(warm.headers().contains_key("ratelimit-policy"));
        let headers = draft10_cost(name);
        assert!(headers > 0, "the headers have values of their own");
        for _ in 0..3 {
            let (n, response) = one(&mut service, get(path, "192.0.2.7:1"));
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(
                response.headers().get("ratelimit-policy"),
                warm.headers().get("ratelimit-policy")
            );
            assert_eq!(
                n, headers,
                "an admitted request of {name} allocates its headers only"
            );
        }
    }
}

/// What one GET of `path` through `router` allocates, after a warm-up
/// request, and its status. The router is given its state first, as
/// `axum::serve` does (its routes, and the layers around them, are then
/// built once, not per request).
fn through_router(router: axum::Router, path: &str) -> (u64, StatusCode) {
    let mut router = router.with_state(());
    one(&mut router, get(path, "192.0.2.7:1"));
    let (n, response) = one(&mut router, get(path, "192.0.2.7:1"));
    (n, response.status())
}

#[test]
fn through_axum_an_admitted_request_allocates_what_the_router_alone_does() {
    // The rules' layer answers in axum's own body type, which axum hands
    // on as it is: a body of any other type would be boxed once more per
    // response.
    let dir = TempDir::new();
    let rules = RuleSet::load_with_clock(dir.write("rules.yaml", RULES), ManualClock::new())
        .expect("the rules load");
    let app = || {
        axum::Router::new()
            .route("/quiet", axum::routing::get(|| async { "ok" }))
            .route("/elsewhere", axum::routing::get(|| async { "ok" }))
    };
    // A layer that does nothing, in axum's body: what axum's own work
    // around any layer allocates.
    let nothing = || tower::util::MapResponseLayer::new(|r: axum::response::Response| r);
    for path in ["/quiet", "/elsewhere"] {
        let (bare, status) = through_router(app().layer(nothing()), path);
        assert_eq!(status, StatusCode::OK);
        for _ in 0..3 {
            assert_eq!(
                through_router(app().layer(rules.layer()), path),
                (bare, StatusCode::OK),
                "{path}, through axum"
            );
        }
    }
}
