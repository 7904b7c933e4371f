//! The layer through `tower::ServiceExt::oneshot`, under paused tokio time:
//! exact statuses, headers and bodies.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use limiter_async::TokioClock;
use limiter_core::{Quota, RateLimiter};
use limiter_keyed::{KeyedLimiter, WhenFull};
use limiter_tower::{
    Global, Header, LegacyHeaders, Mode, PeerAddr, PeerIp, RateLimitLayer, Rejection,
};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

type Body = Full<Bytes>;

/// An inner service that counts its calls.
#[derive(Clone, Default)]
struct Counting {
    calls: Arc<AtomicUsize>,
    polls: Arc<AtomicUsize>,
    pending: bool,
}

impl Service<Request<Body>> for Counting {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.pending {
            Poll::Pending
        } else {
            Poll::Ready(Ok(()))
        }
    }

    fn call(&mut self, _request: Request<Body>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"ok")))))
    }
}

fn global(period: Duration, burst: u32) -> RateLimiter<TokioClock> {
    RateLimiter::with_clock(
        Quota::with_period(period)
            .unwrap()
            .with_burst(burst)
            .unwrap(),
        TokioClock::new(),
    )
}

fn request() -> Request<Body> {
    Request::new(Body::default())
}

fn from(peer: &str) -> Request<Body> {
    let mut r = request();
    r.extensions_mut()
        .insert(PeerAddr(peer.parse::<SocketAddr>().unwrap()));
    r
}

async fn body(response: Response<impl http_body::Body<Error: std::fmt::Debug>>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn header<B>(response: &Response<B>, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test(start_paused = true)]
async fn reject_mode_headers_are_exact() {
    // One permit every 10 s, burst 2: q=2, w=20.
    let layer = RateLimitLayer::builder(global(Duration::from_secs(10), 2), Global)
        .name("api")
        .build()
        .unwrap();
    let svc = layer.layer(Counting::default());

    let first = svc.clone().oneshot(request()).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(
        header(&first, "ratelimit-policy").unwrap(),
        "\"api\";q=2;w=20"
    );
    assert_eq!(header(&first, "ratelimit").unwrap(), "\"api\";r=1;t=10");
    assert_eq!(header(&first, "retry-after"), None);

    let second = svc.clone().oneshot(request()).await.unwrap();
    assert_eq!(header(&second, "ratelimit").unwrap(), "\"api\";r=0;t=10");

    tokio::time::advance(Duration::from_millis(2500)).await;
    let third = svc.clone().oneshot(request()).await.unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    // 7.5 s to go: both rounded up to 8.
    assert_eq!(header(&third, "retry-after").unwrap(), "8");
    assert_eq!(header(&third, "ratelimit").unwrap(), "\"api\";r=0;t=8");
    assert_eq!(
        header(&third, "ratelimit-policy").unwrap(),
        "\"api\";q=2;w=20"
    );
    assert_eq!(
        header(&third, "content-type").unwrap(),
        "application/problem+json"
    );
    assert_eq!(
        body(third).await,
        r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded; retry in 7500 ms","retry_after_ms":7500}"#
    );

    // The rejection consumed nothing: the slot is there after 7.5 s.
    tokio::time::advance(Duration::from_millis(7500)).await;
    let fourth = svc.oneshot(request()).await.unwrap();
    assert_eq!(fourth.status(), StatusCode::OK);
    assert_eq!(header(&fourth, "ratelimit").unwrap(), "\"api\";r=0;t=10");
}

/// Every header of `response`, in the order it is sent.
fn head<B>(response: &Response<B>) -> Vec<(String, String)> {
    response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect()
}

/// The 429 of the layer `name` for a wait of `ms` milliseconds (a limit of
/// one per 10 s), byte for byte: status, every header in order, body.
fn expected_429(name: &str, ms: u64) -> (Vec<(String, String)>, String) {
    let secs = ms.div_ceil(1000).max(1);
    let head = [
        ("content-type", "application/problem+json".to_owned()),
        ("retry-after", secs.to_string()),
        ("ratelimit-policy", format!("\"{name}\";q=1;w=10")),
        ("ratelimit", format!("\"{name}\";r=0;t={secs}")),
    ];
    let body = format!(
        r#"{{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded; retry in {ms} ms","retry_after_ms":{ms}}}"#
    );
    (
        head.into_iter().map(|(n, v)| (n.to_owned(), v)).collect(),
        body,
    )
}

/// One request through `service`, which refuses it: its head and body.
async fn refuse<S, B>(service: &S) -> (Vec<(String, String)>, String)
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone,
    B: http_body::Body<Error: std::fmt::Debug>,
{
    let response = service.clone().oneshot(request()).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    (head(&response), body(response).await)
}

#[tokio::test(start_paused = true)]
async fn refusals_are_exact_byte_for_byte_whatever_came_before() {
    // Two layers, each with its own `RateLimit-Policy` value, on one
    // thread: every refusal states its own layer's name and wait.
    let svc = |name: &str| {
        RateLimitLayer::builder(global(Duration::from_secs(10), 1), Global)
            .name(name)
            .build()
            .unwrap()
            .layer(Counting::default())
    };
    let (api, other) = (svc("api"), svc("other"));
    for s in [&api, &other] {
        assert_eq!(s.clone().oneshot(request()).await.unwrap().status(), 200);
    }
    // The same refusal twice, another name, back, a new wait, a wait
    // whose seconds round the same, and one under a second.
    assert_eq!(refuse(&api).await, expected_429("api", 10_000));
    assert_eq!(refuse(&api).await, expected_429("api", 10_000));
    assert_eq!(refuse(&other).await, expected_429("other", 10_000));
    assert_eq!(refuse(&api).await, expected_429("api", 10_000));
    tokio::time::advance(Duration::from_millis(2_500)).await;
    assert_eq!(refuse(&api).await, expected_429("api", 7_500));
    tokio::time::advance(Duration::from_millis(400)).await;
    assert_eq!(refuse(&api).await, expected_429("api", 7_100));
    assert_eq!(refuse(&other).await, expected_429("other", 7_100));
    tokio::time::advance(Duration::from_millis(6_999)).await;
    assert_eq!(refuse(&api).await, expected_429("api", 101));
    assert_eq!(refuse(&api).await, expected_429("api", 101));
}

#[tokio::test(start_paused = true)]
async fn a_sub_second_wait_is_retry_after_one() {
    let svc = RateLimitLayer::new(global(Duration::from_millis(100), 1), Global)
        .layer(Counting::default());
    svc.clone().oneshot(request()).await.unwrap();
    let limited = svc.oneshot(request()).await.unwrap();
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&limited, "retry-after").unwrap(), "1");
    assert_eq!(
        header(&limited, "ratelimit").unwrap(),
        "\"default\";r=0;t=1"
    );
}

#[tokio::test(start_paused = true)]
async fn poll_ready_forwards_and_consumes_nothing() {
    let limiter = Arc::new(global(Duration::from_secs(1), 3));
    let inner = Counting::default();
    let mut svc = RateLimitLayer::new(Arc::clone(&limiter), Global).layer(inner.clone());
    for _ in 0..5 {
        std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
    }
    assert_eq!(inner.polls.load(Ordering::SeqCst), 5);
    assert_eq!(limiter.available(), 3);

    let pending = Counting {
        pending: true,
        ..Counting::default()
    };
    let mut svc = RateLimitLayer::new(Arc::clone(&limiter), Global).layer(pending);
    let waker = std::task::Waker::noop();
    assert!(svc.poll_ready(&mut Context::from_waker(waker)).is_pending());
    assert_eq!(limiter.available(), 3);
}

#[tokio::test(start_paused = true)]
async fn clones_and_layers_share_one_state() {
    let layer = RateLimitLayer::new(global(Duration::from_secs(1), 2), Global);
    let a = layer.layer(Counting::default());
    let b = layer.clone().layer(Counting::default());
    assert_eq!(a.clone().oneshot(request()).await.unwrap().status(), 200);
    assert_eq!(b.clone().oneshot(request()).await.unwrap().status(), 200);
    assert_eq!(a.oneshot(request()).await.unwrap().status(), 429);
    assert_eq!(b.oneshot(request()).await.unwrap().status(), 429);
}

#[tokio::test(start_paused = true)]
async fn delay_mode_waits_for_the_slot_then_rejects_past_max_delay() {
    let inner = Counting::default();
    let svc = RateLimitLayer::builder(global(Duration::from_millis(500), 1), Global)
        .mode(Mode::Delay {
            max_delay: Duration::from_secs(1),
        })
        .build()
        .unwrap()
        .layer(inner.clone());
    let start = Instant::now();
    assert_eq!(svc.clone().oneshot(request()).await.unwrap().status(), 200);
    assert_eq!(start.elapsed(), Duration::ZERO);

    let second = tokio::spawn(svc.clone().oneshot(request()));
    let third = tokio::spawn(svc.clone().oneshot(request()));
    tokio::task::yield_now().await;
    // Both hold slots (500 ms and 1 s); a fourth would wait 1.5 s.
    let fourth = svc.clone().oneshot(request()).await.unwrap();
    assert_eq!(fourth.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&fourth, "retry-after").unwrap(), "2");
    assert_eq!(inner.calls.load(Ordering::SeqCst), 1);

    let second = second.await.unwrap().unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    assert_eq!(second.status(), StatusCode::OK);
    // Told at the slot: none left, the next in one period.
    assert_eq!(header(&second, "ratelimit").unwrap(), "\"default\";r=0;t=1");
    third.await.unwrap().unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(inner.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_delayed_grant_keeps_the_slot_of_its_decision_however_late_its_first_poll() {
    let inner = Counting::default();
    let mut svc = RateLimitLayer::builder(global(Duration::from_millis(500), 1), Global)
        .mode(Mode::Delay {
            max_delay: Duration::from_secs(5),
        })
        .build()
        .unwrap()
        .layer(inner.clone());
    let start = Instant::now();
    svc.ready().await.unwrap();
    assert_eq!(svc.call(request()).await.unwrap().status(), 200);
    // Decided now, for the slot 500 ms away; first polled 300 ms later.
    svc.ready().await.unwrap();
    let held = svc.call(request());
    // Decided now too, for the slot 1 s away; first polled 1.2 s later.
    svc.ready().await.unwrap();
    let late = svc.call(request());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(held.await.unwrap().status(), 200);
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(late.await.unwrap().status(), 200);
    // Past its slot at the first poll: called at once.
    assert_eq!(start.elapsed(), Duration::from_millis(1200));
    assert_eq!(inner.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_delayed_request_gives_its_slot_back() {
    let limiter = Arc::new(global(Duration::from_secs(1), 1));
    let inner = Counting::default();
    let svc = RateLimitLayer::builder(Arc::clone(&limiter), Global)
        .mode(Mode::Delay {
            max_delay: Duration::from_secs(5),
        })
        .build()
        .unwrap()
        .layer(inner.clone());
    svc.clone().oneshot(request()).await.unwrap();
    // Delayed 1 s, then dropped (the client went away) before its slot.
    let abandoned = tokio::spawn(svc.clone().oneshot(request()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    abandoned.abort();
    assert!(abandoned.await.unwrap_err().is_cancelled());
    assert_eq!(inner.calls.load(Ordering::SeqCst), 1);

    // The next request gets that slot (0.7 s away), not the one after it.
    let start = Instant::now();
    svc.oneshot(request()).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(700));
    assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_cost_above_the_burst_is_413_and_consumes_nothing() {
    let limiter = Arc::new(global(Duration::from_secs(1), 2));
    let svc = RateLimitLayer::builder(Arc::clone(&limiter), Global)
        .cost(|head| {
            head.headers()
                .get("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        })
        .mode(Mode::Delay {
            max_delay: Duration::from_secs(60),
        })
        .build()
        .unwrap()
        .layer(Counting::default());
    let costly = Request::builder()
        .header("x-cost", "3")
        .body(Body::default())
        .unwrap();
    let response = svc.clone().oneshot(costly).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(header(&response, "retry-after"), None);
    assert!(body(response).await.ends_with(r#""cost":3,"burst":2}"#));
    assert_eq!(limiter.available(), 2);

    let two = Request::builder()
        .header("x-cost", "2")
        .body(Body::default())
        .unwrap();
    let response = svc.oneshot(two).await.unwrap();
    assert_eq!(
        header(&response, "ratelimit").unwrap(),
        "\"default\";r=0;t=1"
    );
}

#[tokio::test(start_paused = true)]
async fn per_ip_keys_are_independent() {
    let limiter = KeyedLimiter::builder(Quota::per_second(1).unwrap())
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let svc = RateLimitLayer::new(limiter, PeerIp::new()).layer(Counting::default());
    let ok = |peer| svc.clone().oneshot(from(peer));
    assert_eq!(ok("192.0.2.1:1").await.unwrap().status(), 200);
    assert_eq!(ok("192.0.2.1:2").await.unwrap().status(), 429);
    assert_eq!(ok("[::ffff:192.0.2.1]:3").await.unwrap().status(), 429);
    assert_eq!(ok("192.0.2.2:1").await.unwrap().status(), 200);
    assert_eq!(ok("[2001:db8::1]:1").await.unwrap().status(), 200);
    // Same /64.
    assert_eq!(ok("[2001:db8::2]:1").await.unwrap().status(), 429);
}

#[tokio::test(start_paused = true)]
async fn a_missing_peer_is_a_500_naming_the_fix() {
    let inner = Counting::default();
    let limiter = KeyedLimiter::builder(Quota::per_second(1).unwrap())
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let svc = RateLimitLayer::new(limiter, PeerIp::new()).layer(inner.clone());
    let response = svc.oneshot(request()).await.unwrap();
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body(response)
            .await
            .contains("into_make_service_with_connect_info::<SocketAddr>()")
    );
    assert_eq!(inner.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_fallback_key_is_used_only_when_configured() {
    use limiter_tower::KeyExtractor as _;
    let limiter = KeyedLimiter::builder(Quota::per_second(1).unwrap())
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let key = PeerIp::new().or("0.0.0.0".parse().unwrap());
    let svc = RateLimitLayer::new(limiter, key).layer(Counting::default());
    assert_eq!(svc.clone().oneshot(request()).await.unwrap().status(), 200);
    assert_eq!(svc.oneshot(request()).await.unwrap().status(), 429);
}

#[tokio::test(start_paused = true)]
async fn bypassed_requests_are_not_counted() {
    let limiter = Arc::new(
        KeyedLimiter::builder(Quota::per_second(1).unwrap())
            .clock(TokioClock::new())
            .build()
            .unwrap(),
    );
    let inner = Counting::default();
    let svc = RateLimitLayer::builder(Arc::clone(&limiter), PeerIp::new())
        .bypass(|head| head.uri().path() == "/health")
        .allow_ips(["10.0.0.0/8".parse().unwrap()])
        .allow_key(|ip| *ip == "192.0.2.99".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
        .layer(inner.clone());
    for _ in 0..3 {
        let mut health = from("192.0.2.1:1");
        *health.uri_mut() = "/health".parse().unwrap();
        let response = svc.clone().oneshot(health).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "ratelimit"), None);
        assert_eq!(
            svc.clone()
                .oneshot(from("10.1.2.3:1"))
                .await
                .unwrap()
                .status(),
            200
        );
        assert_eq!(
            svc.clone()
                .oneshot(from("192.0.2.99:1"))
                .await
                .unwrap()
                .status(),
            200
        );
    }
    assert!(limiter.is_empty());
    assert_eq!(
        svc.clone()
            .oneshot(from("192.0.2.1:1"))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        svc.oneshot(from("192.0.2.1:1")).await.unwrap().status(),
        429
    );
    assert_eq!(inner.calls.load(Ordering::SeqCst), 10);
}

fn full_table() -> KeyedLimiter<http::HeaderValue, TokioClock> {
    KeyedLimiter::builder(Quota::per_hour(1).unwrap())
        .clock(TokioClock::new())
        .max_keys(1)
        .when_full(WhenFull::RejectNewKeys)
        .build()
        .unwrap()
}

fn user(name: &'static str) -> Request<Body> {
    Request::builder()
        .header("x-user", name)
        .body(Body::default())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn backend_failure_is_503_unless_failing_open() {
    let key = || Header::new(http::HeaderName::from_static("x-user"));
    let closed = RateLimitLayer::new(full_table(), key()).layer(Counting::default());
    assert_eq!(
        closed.clone().oneshot(user("a")).await.unwrap().status(),
        200
    );
    let refused = closed.oneshot(user("b")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);

    let inner = Counting::default();
    let open = RateLimitLayer::builder(full_table(), key())
        .fail_open(true)
        .build()
        .unwrap()
        .layer(inner.clone());
    assert_eq!(open.clone().oneshot(user("a")).await.unwrap().status(), 200);
    let through = open.clone().oneshot(user("b")).await.unwrap();
    assert_eq!(through.status(), StatusCode::OK);
    assert_eq!(header(&through, "ratelimit"), None);
    assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
    // A missing header is the client's mistake.
    let anonymous = open.oneshot(request()).await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test(start_paused = true)]
async fn legacy_headers_custom_rejections_and_no_headers() {
    let svc = RateLimitLayer::builder(global(Duration::from_secs(4), 2), Global)
        .headers(LegacyHeaders)
        .on_rejection(|rejection| {
            let mut r = Response::new(Full::new(Bytes::from("slow down")));
            *r.status_mut() = rejection.status();
            r
        })
        .build()
        .unwrap()
        .layer(Counting::default());
    let ok = svc.clone().oneshot(request()).await.unwrap();
    assert_eq!(header(&ok, "x-ratelimit-limit").unwrap(), "2");
    assert_eq!(header(&ok, "x-ratelimit-remaining").unwrap(), "1");
    assert_eq!(header(&ok, "x-ratelimit-reset").unwrap(), "4");
    assert_eq!(header(&ok, "ratelimit"), None);
    svc.clone().oneshot(request()).await.unwrap();
    let limited = svc.oneshot(request()).await.unwrap();
    assert_eq!(limited.status(), 429);
    assert_eq!(header(&limited, "retry-after").unwrap(), "4");
    assert_eq!(header(&limited, "x-ratelimit-remaining").unwrap(), "0");
    assert_eq!(body(limited).await, "slow down");

    let quiet = RateLimitLayer::builder(global(Duration::from_secs(4), 1), Global)
        .without_headers()
        .build()
        .unwrap()
        .layer(Counting::default());
    let ok = quiet.clone().oneshot(request()).await.unwrap();
    assert!(ok.headers().is_empty());
    let limited = quiet.oneshot(request()).await.unwrap();
    assert_eq!(header(&limited, "retry-after").unwrap(), "4");
    assert_eq!(header(&limited, "ratelimit"), None);
}

#[test]
fn names_that_cannot_go_into_a_header_are_refused() {
    let limiter = || RateLimiter::new(Quota::per_second(1).unwrap());
    for bad in ["", "a\"b", "back\\slash", "tab\there", "é"] {
        assert!(
            RateLimitLayer::builder(limiter(), Global)
                .name(bad)
                .build()
                .is_err(),
            "{bad:?}"
        );
    }
    assert!(
        RateLimitLayer::builder(limiter(), Global)
            .name("per-ip v2")
            .build()
            .is_ok()
    );
}

#[test]
fn rejection_statuses_are_distinct() {
    let limited = Rejection::RateLimited {
        retry_after: Duration::from_secs(1),
    };
    let over = Rejection::OverBurst { cost: 2, burst: 1 };
    assert_eq!(limited.status(), 429);
    assert_eq!(over.status(), 413);
    assert_eq!(Rejection::Unavailable.status(), 503);
}
