//! The layer answers in the inner service's own body type: under axum an
//! admitted request allocates what the same router with a layer that does
//! nothing allocates (axum boxes any body that is not its own once more
//! per response; the layer's is its own).
//!
//! A counting global allocator (this test binary's own) counts the
//! allocations each thread makes; every measurement runs on the test's
//! thread, in steady state (after a warm-up request through the same
//! router).

use std::convert::Infallible;
use std::future::Future;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use http::{Request, Response, StatusCode};
use limiter_concurrency::ConcurrencyLimiter;
use limiter_concurrency::http::ConcurrencyLimitLayer;
use tower::Service;

use limiter_test_support::counting_alloc::{Counting, allocations};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One request through `service`, polled to its response; returns the
/// allocations from `call` to the response (the request itself is built
/// before counting) and the response.
fn one<S>(service: &mut S) -> (u64, Response<Body>)
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(service.poll_ready(&mut cx).is_ready());
    let request = Request::new(Body::empty());
    allocations(|| {
        let mut future = std::pin::pin!(service.call(request));
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(response)) => response,
            Poll::Ready(Err(e)) => match e {},
            Poll::Pending => panic!("a free permit and a ready handler answer at once"),
        }
    })
}

/// What one request through `router` allocates, after a warm-up request,
/// and its status. The router is given its state first, as `axum::serve`
/// does (its routes, and the layers around them, are then built once, not
/// per request).
fn through_router(router: axum::Router) -> (u64, StatusCode) {
    let mut router = router.with_state(());
    one(&mut router);
    let (n, response) = one(&mut router);
    (n, response.status())
}

#[test]
fn through_axum_an_admitted_request_allocates_what_the_router_alone_does() {
    let app = || axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    // A layer that does nothing, in axum's body: what axum's own work
    // around any layer allocates (a boxed route and its boxed future per
    // request). A layer answering in another body type costs one more (the
    // body boxed into axum's).
    let nothing = tower::util::MapResponseLayer::new(|r: axum::response::Response| r);
    let (bare, status) = through_router(app().layer(nothing));
    assert_eq!(status, StatusCode::OK);
    assert!(bare > 0, "the router allocates for its own work");

    let limiter = ConcurrencyLimiter::new(4).unwrap();
    let at_once = ConcurrencyLimitLayer::new("at_once", limiter.clone());
    // Wait mode takes the same path when a permit is free: nothing boxed.
    let waiting =
        ConcurrencyLimitLayer::new("waiting", limiter.clone()).wait(Duration::from_millis(50));
    let grpc = ConcurrencyLimitLayer::new("grpc", limiter.clone()).grpc();
    for (layer, name) in [(at_once, "at once"), (waiting, "wait mode"), (grpc, "gRPC")] {
        assert_eq!(
            through_router(app().layer(layer)),
            (bare, StatusCode::OK),
            "{name}, through axum"
        );
        assert_eq!(limiter.in_flight(), 0, "{name}: the permit is released");
    }
}
