//! The fast path allocates nothing of its own: an admitted or rejected
//! in-memory request costs the allocations of the response (its body and
//! header values) and no more. Under axum, whose body the layer answers
//! in, a request costs what axum's own work around any layer does: the
//! response is not boxed again.
//!
//! A counting global allocator (this test binary's own) counts the
//! allocations each thread makes; every measurement runs on the test's
//! thread and counts every request from a layer's first (the keyed ones
//! from a key's second: the first makes the key), compared with what the
//! same response costs when built by hand.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderName;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Full;
use limiter_core::{ManualClock, Quota, RateLimiter};
use limiter_keyed::KeyedLimiter;
use limiter_tower::{ClientIp, Global, PeerAddr, PeerIp, RateLimitLayer, Rejection};
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
/// before counting) and the response's status.
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

fn from(peer: &str, forwarded: Option<&str>) -> Request<Body> {
    let mut request = Request::new(Body::default());
    request
        .extensions_mut()
        .insert(PeerAddr(peer.parse::<SocketAddr>().unwrap()));
    if let Some(f) = forwarded {
        request
            .headers_mut()
            .insert("x-forwarded-for", HeaderValue::from_str(f).unwrap());
    }
    request
}

/// The layer's own headers, built by hand into `headers`: `Retry-After` (on
/// a 429) and the `RateLimit` value each written into one allocation, and
/// `RateLimit-Policy` shared (static here; the layer's is made once).
fn by_hand(headers: &mut HeaderMap, retry_after: bool, rate_limit: bool) {
    if retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_bytes(b"1").unwrap());
    }
    if rate_limit {
        let policy = HeaderValue::from_static("\"default\";q=1000;w=1");
        headers.insert(HeaderName::from_static("ratelimit-policy"), policy);
        let item = HeaderValue::from_bytes(b"\"default\";r=999;t=1").unwrap();
        headers.insert(HeaderName::from_static("ratelimit"), item);
    }
}

/// What the layer's 429 costs when built by hand: the problem document, its
/// response, and the headers of [`by_hand`].
fn rejection_cost(retry_after: Duration, rate_limit: bool) -> u64 {
    allocations(|| {
        let mut response = Rejection::RateLimited { retry_after }.problem();
        by_hand(response.headers_mut(), true, rate_limit);
        response
    })
    .0
}

#[test]
fn admitted_and_rejected_requests_allocate_only_their_response() {
    let quota = Quota::per_second(1000).unwrap().with_burst(1000).unwrap();
    let clock = ManualClock::new();
    let bare = one(&mut Hello, Request::new(Body::default())).0;
    assert_eq!(bare, 0, "the inner service alone allocates nothing");

    // Global, without headers: an admitted request allocates nothing.
    let layer = RateLimitLayer::builder(RateLimiter::with_clock(quota, clock.clone()), Global)
        .without_headers()
        .build()
        .unwrap();
    let mut service = layer.layer(Hello);
    for _ in 0..3 {
        let (n, response) = one(&mut service, Request::new(Body::default()));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(n, 0, "an admitted request without headers");
    }

    // With headers: exactly the cost of the headers themselves, from the
    // first request, which also makes the layer's `RateLimit-Policy` value
    // (its bytes, and the count its copies share).
    let limiter = RateLimiter::with_clock(quota, clock.clone());
    let mut service = RateLimitLayer::new(limiter, Global).layer(Hello);
    let headers = allocations(|| {
        let mut response = Response::new(());
        by_hand(response.headers_mut(), false, true);
        response
    })
    .0;
    let (first, response) = one(&mut service, Request::new(Body::default()));
    assert_eq!(
        response.headers()["ratelimit-policy"],
        "\"default\";q=1000;w=1"
    );
    assert_eq!(
        first,
        headers + 2,
        "the first request makes the policy value"
    );
    for _ in 0..3 {
        let (n, response) = one(&mut service, Request::new(Body::default()));
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().contains_key("ratelimit"));
        assert_eq!(n, headers, "an admitted request allocates its headers only");
    }

    // Keyed by peer and by forwarded client (a key already in the table).
    let keyed = KeyedLimiter::builder(quota)
        .clock(clock.clone())
        .build()
        .unwrap();
    let layer = RateLimitLayer::builder(keyed, PeerIp::new())
        .without_headers()
        .build()
        .unwrap();
    let mut service = layer.layer(Hello);
    one(&mut service, from("192.0.2.7:1", None));
    let (n, response) = one(&mut service, from("192.0.2.7:1", None));
    assert_eq!((n, response.status()), (0, StatusCode::OK));
    let keyed = KeyedLimiter::builder(quota)
        .clock(clock.clone())
        .build()
        .unwrap();
    let trusted = ClientIp::x_forwarded_for(["10.0.0.0/8".parse().unwrap()]);
    let layer = RateLimitLayer::builder(keyed, trusted)
        .without_headers()
        .build()
        .unwrap();
    let mut service = layer.layer(Hello);
    let chain = Some("6.6.6.6, 203.0.113.9, 10.1.1.1");
    one(&mut service, from("10.0.0.2:1", chain));
    let (n, response) = one(&mut service, from("10.0.0.2:1", chain));
    assert_eq!(
        (n, response.status()),
        (0, StatusCode::OK),
        "a forwarded chain is walked without collecting it"
    );

    // Rejected: exactly the cost of the 429 built by hand, from the first
    // refusal. The 429 document's fixed text is made once per process, on
    // first use: here, before counting.
    let wait = Duration::from_secs(1);
    Rejection::RateLimited { retry_after: wait }.problem();
    let tight = Quota::per_second(1).unwrap();
    for with_headers in [false, true] {
        let limiter = RateLimiter::with_clock(tight, clock.clone());
        let builder = RateLimitLayer::builder(limiter, Global);
        let builder = if with_headers {
            builder
        } else {
            builder.without_headers()
        };
        let mut service = builder.build().unwrap().layer(Hello);
        let (first, response) = one(&mut service, Request::new(Body::default()));
        assert_eq!(response.status(), StatusCode::OK);
        // Admitted: its headers and the policy value, or nothing.
        assert_eq!(first, if with_headers { headers + 2 } else { 0 });
        // With headers, Retry-After is a slice of the RateLimit value's
        // allocation: one fewer than built by hand.
        let expected = rejection_cost(wait, with_headers) - u64::from(with_headers);
        for _ in 0..3 {
            let (n, response) = one(&mut service, Request::new(Body::default()));
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(response.headers()[header::RETRY_AFTER], "1");
            assert_eq!(
                n, expected,
                "a rejected request allocates its response only"
            );
        }
    }
}

#[test]
fn a_cost_after_the_response_allocates_one_box_per_admitted_request() {
    let quota = Quota::per_second(1000).unwrap().with_burst(1000).unwrap();
    let clock = ManualClock::new();
    let layer = RateLimitLayer::builder(RateLimiter::with_clock(quota, clock), Global)
        .without_headers()
        .cost_from_response_header(header::HeaderName::from_static("x-tokens-used"))
        .build()
        .unwrap();
    let mut service = layer.layer(Hello);
    one(&mut service, Request::new(Body::default()));
    for _ in 0..3 {
        // The response has no cost header: read, counted invalid, nothing
        // charged; the key and the layer were kept in one box until then.
        let (n, response) = one(&mut service, Request::new(Body::default()));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(n, 1, "one box keeps the key until the response head");
    }
}

/// What one request through `router` allocates, after a warm-up request,
/// and its status. The router is given its state first, as `axum::serve`
/// does (its routes, and the layers around them, are then built once, not
/// per request).
fn through_router(router: axum::Router, peer: &str) -> (u64, StatusCode) {
    let mut router = router.with_state(());
    let router = &mut router;
    one(router, from(peer, None));
    let (n, response) = one(router, from(peer, None));
    (n, response.status())
}

#[test]
fn through_axum_an_admitted_request_allocates_what_the_router_alone_does() {
    // The layer answers in axum's own body type, which axum hands on as it
    // is: a body of any other type would be boxed once more per response.
    let quota = Quota::per_second(1000).unwrap().with_burst(1000).unwrap();
    let app = || axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    // A layer that does nothing, in axum's body: what axum's own work
    // around any layer allocates (a boxed route and its boxed future per
    // request). A layer answering in another body type costs one more (the
    // body boxed into axum's).
    let nothing = tower::util::MapResponseLayer::new(|r: axum::response::Response| r);
    let (bare, status) = through_router(app().layer(nothing), "192.0.2.7:1");
    assert_eq!(status, StatusCode::OK);
    assert!(bare > 0, "the router allocates for its own work");

    let global =
        RateLimitLayer::builder(RateLimiter::with_clock(quota, ManualClock::new()), Global)
            .without_headers()
            .build()
            .unwrap();
    let keyed = RateLimitLayer::builder(
        KeyedLimiter::builder(quota)
            .clock(ManualClock::new())
            .build()
            .unwrap(),
        PeerIp::new(),
    )
    .without_headers()
    .build()
    .unwrap();
    for _ in 0..3 {
        assert_eq!(
            through_router(app().layer(global.clone()), "192.0.2.7:1"),
            (bare, StatusCode::OK),
            "global, through axum"
        );
        assert_eq!(
            through_router(app().layer(keyed.clone()), "192.0.2.7:1"),
            (bare, StatusCode::OK),
            "keyed by peer, through axum"
        );
    }
}
