//! Cost after the response: the layer admits on the up-front cost and
//! charges the rest, read from the response head, as capped debt on the
//! key. Exact `Retry-After`s and counters under paused tokio time, through
//! `oneshot` (the fast path) and delay mode (the waiting path).

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderName;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use limiter_async::TokioClock;
use limiter_core::{Quota, RateLimiter, SlidingWindow};
use limiter_keyed::KeyedLimiter;
use limiter_tower::{ConfigError, Global, Header, Mode, RateLimitLayer};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tower::{Layer, Service, ServiceExt, service_fn};

type Body = Full<Bytes>;

const TOKENS: HeaderName = HeaderName::from_static("x-tokens-used");

/// An upstream that answers with the `x-tokens-used` the request asks for
/// in `x-answer` (none when it does not ask).
fn upstream()
-> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send>
+ Clone
+ Send {
    service_fn(|r: Request<Body>| async move {
        let mut response = Response::new(Body::default());
        if let Some(v) = r.headers().get("x-answer") {
            response.headers_mut().insert(TOKENS, v.clone());
        }
        Ok::<_, Infallible>(response)
    })
}

fn request(user: &str, answer: Option<&str>) -> Request<Body> {
    let mut b = Request::builder().header("x-user", user);
    if let Some(a) = answer {
        b = b.header("x-answer", a);
    }
    b.body(Body::default()).unwrap()
}

/// 1 per second, burst 10: t = 1 s, tau = 9 s.
fn per_user() -> KeyedLimiter<http::HeaderValue, TokioClock> {
    KeyedLimiter::builder(Quota::per_second(1).unwrap().with_burst(10).unwrap())
        .clock(TokioClock::new())
        .build()
        .unwrap()
}

/// The counters of one snapshot, by name.
fn counters(snapshotter: &Snapshotter) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            *out.entry(key.key().name().to_owned()).or_default() += n;
        }
    }
    out
}

async fn status_and_retry<S>(svc: &mut S, req: Request<Body>) -> (StatusCode, Option<String>)
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    let response = svc.ready().await.unwrap().call(req).await.unwrap();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (response.status(), retry)
}

#[tokio::test(start_paused = true)]
async fn the_reported_cost_is_charged_as_debt_and_the_next_request_waits_exactly() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(per_user(), Header::new(HeaderName::from_static("x-user")))
            .name("tokens")
            .cost_from_response_header(TOKENS)
            .build()
            .unwrap()
    });
    let mut svc = layer.layer(upstream());
    // Admitted on 1; the response says 25 in all: 24 more, 9 from the
    // burst and 15 of debt, so tat = 25 s and the next permit is
    // tat − tau = 16 s away.
    assert_eq!(
        status_and_retry(&mut svc, request("ann", Some("25")))
            .await
            .0,
        200
    );
    let (status, retry) = status_and_retry(&mut svc, request("ann", None)).await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("16"))
    );
    // Other keys owe nothing.
    assert_eq!(
        status_and_retry(&mut svc, request("bob", None)).await.0,
        200
    );
    tokio::time::advance(Duration::from_millis(15_999)).await;
    assert_eq!(
        status_and_retry(&mut svc, request("ann", None)).await.0,
        429
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        status_and_retry(&mut svc, request("ann", None)).await.0,
        200
    );
    let c = counters(&snapshotter);
    assert_eq!(c["rate_limit_cost_charged_total"], 24);
    assert_eq!(c["rate_limit_cost_dropped_total"], 0);
    // The two requests without the header: missing is counted as invalid.
    assert_eq!(c["rate_limit_cost_invalid_total"], 2);
}

#[tokio::test(start_paused = true)]
async fn malformed_and_missing_costs_charge_nothing_and_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(per_user(), Header::new(HeaderName::from_static("x-user")))
            .cost_from_response_header(TOKENS)
            .build()
            .unwrap()
    });
    let mut svc = layer.layer(upstream());
    let malformed = [
        "25 tokens",
        "-3",
        "2.5",
        "",
        "99999999999999999999999",
        "0x10",
    ];
    for value in malformed {
        assert_eq!(
            status_and_retry(&mut svc, request("ann", Some(value)))
                .await
                .0,
            200
        );
    }
    // Nothing was charged: 6 of the burst of 10 are spent, 4 remain.
    for _ in 0..4 {
        assert_eq!(
            status_and_retry(&mut svc, request("ann", Some("1")))
                .await
                .0,
            200
        );
    }
    let (status, retry) = status_and_retry(&mut svc, request("ann", Some("1"))).await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("1"))
    );
    let c = counters(&snapshotter);
    assert_eq!(c["rate_limit_cost_invalid_total"], 6);
    // A total of 1 is the up-front cost: nothing more to charge.
    assert_eq!(c["rate_limit_cost_charged_total"], 0);
}

#[tokio::test(start_paused = true)]
async fn a_huge_cost_is_capped_and_the_rest_counted_as_dropped() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(per_user(), Header::new(HeaderName::from_static("x-user")))
            .cost_from_response_header(TOKENS)
            .max_debt(Duration::from_secs(30))
            .build()
            .unwrap()
    });
    let mut svc = layer.layer(upstream());
    let huge = "18446744073709551615"; // u64::MAX
    assert_eq!(
        status_and_retry(&mut svc, request("ann", Some(huge)))
            .await
            .0,
        200
    );
    // The next permit is exactly the cap away.
    let (status, retry) = status_and_retry(&mut svc, request("ann", None)).await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("30"))
    );
    tokio::time::advance(Duration::from_millis(29_999)).await;
    assert_eq!(
        status_and_retry(&mut svc, request("ann", None)).await.0,
        429
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        status_and_retry(&mut svc, request("ann", None)).await.0,
        200
    );
    let c = counters(&snapshotter);
    // tat may reach now + tau + cap = 39 s; 1 s was paid up front: 38.
    assert_eq!(c["rate_limit_cost_charged_total"], 38);
    assert_eq!(c["rate_limit_cost_dropped_total"], u64::MAX - 1 - 38);
}

#[tokio::test(start_paused = true)]
async fn a_total_below_the_up_front_cost_refunds_nothing() {
    let layer = RateLimitLayer::builder(per_user(), Header::new(HeaderName::from_static("x-user")))
        .cost(|_| 5)
        .cost_from_response_header(TOKENS)
        .build()
        .unwrap();
    let mut svc = layer.layer(upstream());
    assert_eq!(
        status_and_retry(&mut svc, request("ann", Some("2")))
            .await
            .0,
        200
    );
    assert_eq!(
        status_and_retry(&mut svc, request("ann", Some("5")))
            .await
            .0,
        200
    );
    // 10 spent up front, none refunded: the next 5 wait 5 s.
    let (status, retry) = status_and_retry(&mut svc, request("ann", None)).await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("5"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_delayed_request_is_charged_after_its_response_too() {
    let limiter = RateLimiter::with_clock(
        Quota::per_second(1).unwrap().with_burst(1).unwrap(),
        TokioClock::new(),
    );
    let layer = RateLimitLayer::builder(limiter, Global)
        .mode(Mode::Delay {
            max_delay: Duration::from_secs(2),
        })
        .cost_from_response_header(TOKENS)
        .build()
        .unwrap();
    let mut svc = layer.layer(upstream());
    assert_eq!(status_and_retry(&mut svc, request("a", None)).await.0, 200);
    // Held 1 s for its slot, then its response says 3: 2 more of debt.
    let start = tokio::time::Instant::now();
    assert_eq!(
        status_and_retry(&mut svc, request("a", Some("3"))).await.0,
        200
    );
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    // tat = 4 s, now 1 s: the next slot is 3 s away, past the 2 s allowed.
    let (status, retry) = status_and_retry(&mut svc, request("a", None)).await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("3"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_backend_that_cannot_carry_debt_drops_the_whole_charge() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let window = SlidingWindow::with_clock(10, Duration::from_secs(10), TokioClock::new()).unwrap();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(window, Global)
            .cost_from_response_header(TOKENS)
            .build()
            .unwrap()
    });
    let mut svc = layer.layer(upstream());
    assert_eq!(
        status_and_retry(&mut svc, request("a", Some("8"))).await.0,
        200
    );
    let c = counters(&snapshotter);
    assert_eq!(c["rate_limit_cost_charged_total"], 0);
    assert_eq!(c["rate_limit_cost_dropped_total"], 7);
}

#[test]
fn a_debt_cap_out_of_range_is_a_typed_error() {
    for cap in [Duration::ZERO, Duration::from_secs(86_401)] {
        let err = RateLimitLayer::builder(per_user_manual(), Global)
            .cost_from_response_header(TOKENS)
            .max_debt(cap)
            .build()
            .unwrap_err();
        assert_eq!(err, ConfigError::MaxDebtOutOfRange { max_debt: cap });
        assert!(err.to_string().contains("at most 86400s"), "{err}");
    }
}

fn per_user_manual() -> RateLimiter<limiter_core::ManualClock> {
    RateLimiter::with_clock(
        Quota::per_second(1).unwrap(),
        limiter_core::ManualClock::new(),
    )
}

#[tokio::test(start_paused = true)]
async fn oneshot_through_a_cloned_service_charges_the_same_key() {
    let layer = RateLimitLayer::builder(per_user(), Header::new(HeaderName::from_static("x-user")))
        .cost_from_response_header(TOKENS)
        .build()
        .unwrap();
    let svc = layer.layer(upstream());
    let r = svc
        .clone()
        .oneshot(request("ann", Some("12")))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // 11 more: 9 from the burst, 2 of debt: tat = 12 s, next permit 3 s.
    let r = svc.clone().oneshot(request("ann", None)).await.unwrap();
    assert_eq!(r.headers()["retry-after"], "3");
}
