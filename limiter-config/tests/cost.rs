//! A rule's `cost:` on a real axum server on a loopback port, the rules on
//! a `ManualClock`: the upstream's `x-tokens-used` is charged to the
//! request's key as capped debt when the response head passes the rule's
//! layer, so the key's next request waits exactly as the debt says;
//! `explain` shows the configured cost.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use limiter_config::{CostSpec, ExplainRequest, RuleSet, Verdict};
use limiter_core::ManualClock;
use support::TempDir;

/// 1 per second, burst 10 (t = 1 s, tau = 9 s), per `x-user`.
const RULES: &str = r#"
rate_limits:
  tokens:
    algorithm: token_bucket
    rate: 1/s
    burst: 10
    key: header:x-user
    cost: { request: 1, response_header: x-tokens-used, max_debt: 30s }
    match: { prefix: "/tokens" }
  upfront:
    algorithm: token_bucket
    rate: 1/s
    burst: 10
    key: header:x-user
    cost: 4
    match: { prefix: "/upfront" }
"#;

async fn get(addr: SocketAddr, path: &str, user: &str) -> (StatusCode, Option<String>) {
    let client: Client<_, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let request = Request::builder()
        .method(Method::GET)
        .uri(format!("http://{addr}{path}"))
        .header("x-user", user)
        .body(Empty::new())
        .unwrap();
    let response = client.request(request).await.unwrap();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (response.status(), retry)
}

/// An upstream that reports the tokens its path names:
/// `/tokens/250` answers `x-tokens-used: 250`.
async fn serve(rules: &RuleSet<ManualClock>) -> SocketAddr {
    let app = axum::Router::new()
        .route(
            "/tokens/{used}",
            axum::routing::get(
                |axum::extract::Path(used): axum::extract::Path<String>| async move {
                    ([("x-tokens-used", used)], "done")
                },
            ),
        )
        .route("/upfront", axum::routing::get(|| async { "done" }))
        .layer(rules.layer());
    support::serve_app(app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstreams_cost_makes_the_next_request_of_the_key_wait_exactly() {
    let dir = TempDir::new();
    let clock = ManualClock::new();
    let rules = RuleSet::load_with_clock(dir.write("rules.yaml", RULES), clock.clone()).unwrap();
    let addr = serve(&rules).await;

    // 25 in all: 24 more after the response, 9 from the burst and 15 of
    // debt; tat = 25 s, so the next permit is tat − tau = 16 s away.
    assert_eq!(get(addr, "/tokens/25", "ann").await.0, StatusCode::OK);
    let (status, retry) = get(addr, "/tokens/1", "ann").await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("16"))
    );
    assert_eq!(get(addr, "/tokens/1", "bob").await.0, StatusCode::OK);
    clock.advance(Duration::from_millis(15_999));
    assert_eq!(
        get(addr, "/tokens/1", "ann").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(get(addr, "/tokens/1", "ann").await.0, StatusCode::OK);

    // Malformed: nothing charged (cy's 10 permits are all there).
    assert_eq!(get(addr, "/tokens/25tokens", "cy").await.0, StatusCode::OK);
    for _ in 0..9 {
        assert_eq!(get(addr, "/tokens/1", "cy").await.0, StatusCode::OK);
    }
    assert_eq!(
        get(addr, "/tokens/1", "cy").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );

    // Huge: held at the cap, the next permit exactly 30 s away.
    assert_eq!(
        get(addr, "/tokens/999999999999", "dee").await.0,
        StatusCode::OK
    );
    let (status, retry) = get(addr, "/tokens/1", "dee").await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("30"))
    );

    // An up-front cost alone: 4 a request, 2 requests and 2 permits left.
    for _ in 0..2 {
        assert_eq!(get(addr, "/upfront", "ann").await.0, StatusCode::OK);
    }
    let (status, retry) = get(addr, "/upfront", "ann").await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("2"))
    );
}

#[tokio::test]
async fn explain_shows_the_configured_cost_and_decides_on_the_up_front_one() {
    let dir = TempDir::new();
    let rules =
        RuleSet::load_with_clock(dir.write("rules.yaml", RULES), ManualClock::new()).unwrap();
    let mut headers = http::HeaderMap::new();
    headers.insert("x-user", "ann".parse().unwrap());
    let explain = |path: &str| {
        rules.explain(&ExplainRequest {
            method: Method::GET,
            path: path.into(),
            headers: headers.clone(),
            client: None,
        })
    };
    let e = explain("/tokens/7");
    assert_eq!(
        e.cost,
        Some(CostSpec {
            request: 1,
            response_header: Some(http::header::HeaderName::from_static("x-tokens-used")),
            max_debt: Duration::from_secs(30),
        })
    );
    assert_eq!(e.verdict, Verdict::Admitted { remaining: 9 });
    let e = explain("/upfront");
    assert_eq!(e.cost.as_ref().map(|c| c.request), Some(4));
    assert_eq!(e.verdict, Verdict::Admitted { remaining: 6 });
    assert_eq!(explain("/elsewhere").cost, None);
}
