//! The tower layer: one limit across axum routes and clones, shedding on a
//! real server when the inner latency rises, waiting up to a bound (paused
//! time), and the estimator fed from the inner service's status.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use limiter_concurrency::http::ConcurrencyLimitLayer;
use limiter_concurrency::{Aimd, Bounds, ConcurrencyLimiter, QueueOrder};
use tower::{Layer, ServiceExt, service_fn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_limit_across_routes_sheds_when_the_inner_latency_rises() {
    // The inner latency: none, or (once `slow` is set) until the test opens
    // `gate`, so the slow requests stay in flight however long a loaded
    // machine takes to send the others. `held` counts those that entered.
    let slow = Arc::new(AtomicBool::new(false));
    let held = Arc::new(AtomicU64::new(0));
    let (open, gate) = tokio::sync::watch::channel(false);
    let limiter = ConcurrencyLimiter::new(4).unwrap();
    let handler = {
        let (slow, held) = (slow.clone(), held.clone());
        move || {
            let (slow, held, mut gate) = (slow.clone(), held.clone(), gate.clone());
            async move {
                // SeqCst (both): test switches, read once per request.
                if slow.load(Ordering::SeqCst) {
                    held.fetch_add(1, Ordering::SeqCst);
                    gate.wait_for(|&open| open).await.unwrap();
                }
                "ok"
            }
        }
    };
    let app = Router::new()
        .route("/a", get(handler.clone()))
        .route("/b", get(handler))
        .layer(ConcurrencyLimitLayer::new("test", limiter.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let get = |path: &'static str| {
        let client = client.clone();
        async move {
            let response = client
                .get(format!("http://{addr}{path}").parse().unwrap())
                .await
                .unwrap();
            let (parts, body) = response.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            (parts, body)
        }
    };

    // Fast inner service: everything passes, one at a time.
    for path in ["/a", "/b"].into_iter().cycle().take(20) {
        assert_eq!(get(path).await.0.status, StatusCode::OK);
    }
    assert_eq!(limiter.in_flight(), 0);

    // The inner service slows down: 12 concurrent requests over both
    // routes; the 4 that got permits hold them, the other 8 are shed at
    // once, whichever route they came by. The slow ones are let go once
    // every request is either held or answered (bounded: a request that
    // is neither fails the test).
    slow.store(true, Ordering::SeqCst);
    let calls: Vec<_> = (0..12)
        .map(|i| tokio::spawn(get(if i % 2 == 0 { "/a" } else { "/b" })))
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let answered = calls.iter().filter(|c| c.is_finished()).count();
        // SeqCst: see the handler.
        if held.load(Ordering::SeqCst) as usize + answered == calls.len() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{answered} answered and {held:?} held of {}",
            calls.len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    open.send(true).unwrap();
    let mut ok = 0;
    let mut shed = 0;
    for c in calls {
        let (parts, body) = c.await.unwrap();
        match parts.status {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                shed += 1;
                assert_eq!(parts.headers["retry-after"], "1");
                assert_eq!(parts.headers["content-type"], "application/problem+json");
                assert!(body.starts_with(
                    br#"{"type":"about:blank","title":"Service Unavailable","status":503"#
                ));
            }
            s => panic!("unexpected status {s}"),
        }
    }
    assert_eq!((ok, shed), (4, 8));
    assert_eq!(limiter.in_flight(), 0);
    server.abort();
}

fn slow_service(
    delay: Duration,
    status: StatusCode,
) -> impl tower::Service<
    Request<()>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send,
> + Clone
+ Send
+ 'static {
    service_fn(move |_req: Request<()>| async move {
        tokio::time::sleep(delay).await;
        let mut r = Response::new(Full::new(Bytes::from_static(b"done")));
        *r.status_mut() = status;
        Ok::<_, Infallible>(r)
    })
}

#[tokio::test(start_paused = true)]
async fn wait_mode_waits_up_to_its_bound() {
    let limiter = ConcurrencyLimiter::builder(1)
        .queue(4, QueueOrder::Fifo)
        .build()
        .unwrap();
    let layer =
        ConcurrencyLimitLayer::new("wait", limiter.clone()).wait(Duration::from_millis(100));
    let start = tokio::time::Instant::now();
    // Holds the permit for 50 ms; the next request waits for it and is
    // served at 50 + 50 ms.
    let first = tokio::spawn(
        layer
            .layer(slow_service(Duration::from_millis(50), StatusCode::OK))
            .oneshot(Request::new(())),
    );
    tokio::task::yield_now().await;
    let second = layer
        .layer(slow_service(Duration::from_millis(50), StatusCode::OK))
        .oneshot(Request::new(()));
    let second = second.await.unwrap();
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    // A holder of 1 s: a waiter gives up at exactly its 100 ms bound.
    let holder = tokio::spawn(
        layer
            .layer(slow_service(Duration::from_secs(1), StatusCode::OK))
            .oneshot(Request::new(())),
    );
    tokio::task::yield_now().await;
    let t = tokio::time::Instant::now();
    let shed = layer
        .layer(slow_service(Duration::ZERO, StatusCode::OK))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(t.elapsed(), Duration::from_millis(100));
    assert_eq!(limiter.waiting(), 0);
    holder.await.unwrap().unwrap();
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_wait_bound_no_instant_can_hold_waits_as_long_as_it_takes() {
    let limiter = ConcurrencyLimiter::builder(1)
        .queue(4, QueueOrder::Fifo)
        .build()
        .unwrap();
    let layer = ConcurrencyLimitLayer::new("forever", limiter.clone()).wait(Duration::MAX);
    let start = tokio::time::Instant::now();
    let holder = tokio::spawn(
        layer
            .layer(slow_service(Duration::from_secs(3_600), StatusCode::OK))
            .oneshot(Request::new(())),
    );
    tokio::task::yield_now().await;
    // Served when the hour-long holder is done, not shed nor panicked.
    let waited = layer
        .layer(slow_service(Duration::ZERO, StatusCode::OK))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    assert_eq!(waited.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), Duration::from_secs(3_600));
    holder.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_estimator_is_fed_from_latency_and_status() {
    let aimd = Aimd::new(Bounds::new(8, 1, 100).unwrap())
        .backoff(0.5)
        .unwrap();
    let limiter = ConcurrencyLimiter::adaptive(aimd).build().unwrap();
    let layer = ConcurrencyLimitLayer::new("fed", limiter.clone());
    // A downstream 503 is overload: the limit halves.
    let r = layer
        .layer(slow_service(
            Duration::from_millis(5),
            StatusCode::SERVICE_UNAVAILABLE,
        ))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(limiter.limit(), 4);
    // A 404 is no capacity signal.
    layer
        .layer(slow_service(Duration::ZERO, StatusCode::NOT_FOUND))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    assert_eq!(limiter.limit(), 4);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_grpc_flavour_answers_resource_exhausted() {
    let limiter = ConcurrencyLimiter::new(1).unwrap();
    let layer = ConcurrencyLimitLayer::new("grpc", limiter.clone()).grpc();
    let holder = tokio::spawn(
        layer
            .layer(slow_service(Duration::from_secs(1), StatusCode::OK))
            .oneshot(Request::new(())),
    );
    tokio::task::yield_now().await;
    let r = layer
        .layer(slow_service(Duration::ZERO, StatusCode::OK))
        .oneshot(Request::new(()))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["grpc-status"], "8");
    assert_eq!(r.headers()["content-type"], "application/grpc");
    assert!(r.into_body().collect().await.unwrap().to_bytes().is_empty());
    holder.await.unwrap().unwrap();
}
