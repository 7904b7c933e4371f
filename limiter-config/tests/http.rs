//! The HTTP half on a real axum server on a loopback port, with a real
//! client: requests go to the rule of their route and method, with that
//! rule's key, mode and headers; unmatched requests pass; a reload moves
//! the live rules.

use crate::support;

use std::net::SocketAddr;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use limiter_config::RuleSet;
use limiter_core::adaptive::Reason;
use std::time::Duration;
use support::{TempDir, within};

const RULES: &str = r#"
rate_limits:
  orders_read:
    algorithm: token_bucket
    rate: "1/h"
    burst: 2
    per_ip: true
    match: { route: "/orders/{id}", methods: [GET] }
  orders_write:
    algorithm: token_bucket
    rate: "1/h"
    burst: 1
    headers: legacy
    match: { route: "/orders/{id}", methods: [POST] }
  by_key:
    algorithm: token_bucket
    rate: "1/h"
    burst: 1
    key: "header:x-api-key"
    match: { prefix: "/keyed" }
  paced:
    algorithm: leaky_bucket
    rate: "1/s"
    max_delay: "1500ms"
    match: { route: "/paced" }
  library_only:
    algorithm: token_bucket
    rate: "1/h"
"#;

struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
}

async fn send(
    addr: SocketAddr,
    from: &str,
    method: Method,
    path: &str,
    key: Option<&str>,
) -> Reply {
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(from.parse().unwrap()));
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let response = client
        .request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    Reply {
        status: response.status(),
        headers: response.headers().clone(),
    }
}

async fn serve(rules: &RuleSet) -> SocketAddr {
    let app = axum::Router::new()
        .route(
            "/orders/{id}",
            axum::routing::get(|| async { "order" }).post(|| async { "created" }),
        )
        .route("/keyed/{x}", axum::routing::get(|| async { "keyed" }))
        .route("/paced", axum::routing::get(|| async { "paced" }))
        .route("/free", axum::routing::get(|| async { "free" }))
        .layer(rules.layer());
    support::serve_app(app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_follow_their_rule_by_route_and_method() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", RULES);
    let rules = RuleSet::load(&path).unwrap();
    let addr = serve(&rules).await;
    let get = |from: &'static str, path: &'static str| send(addr, from, Method::GET, path, None);

    // orders_read: per IP, burst 2, draft-10 headers named after the rule.
    let first = get("127.0.0.1", "/orders/1").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        first.headers["ratelimit-policy"],
        r#""orders_read";q=2;w=7200"#
    );
    assert_eq!(first.headers["ratelimit"], r#""orders_read";r=1;t=3600"#);
    // Another id is the same route: the same bucket of this IP.
    assert_eq!(get("127.0.0.1", "/orders/2").await.status, StatusCode::OK);
    let denied = get("127.0.0.1", "/orders/3").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.headers["retry-after"], "3600");
    assert_eq!(get("127.0.0.2", "/orders/1").await.status, StatusCode::OK);

    // orders_write: POST on the same route is another rule, global, legacy headers.
    let post = send(addr, "127.0.0.3", Method::POST, "/orders/1", None).await;
    assert_eq!(post.status, StatusCode::OK);
    assert_eq!(post.headers["x-ratelimit-limit"], "1");
    assert!(post.headers.get("ratelimit").is_none());
    let post = send(addr, "127.0.0.4", Method::POST, "/orders/9", None).await;
    assert_eq!(post.status, StatusCode::TOO_MANY_REQUESTS);

    // by_key: keyed by header, a missing header is the client's error.
    let keyed = |key| send(addr, "127.0.0.1", Method::GET, "/keyed/x", key);
    assert_eq!(keyed(Some("a")).await.status, StatusCode::OK);
    assert_eq!(keyed(Some("a")).await.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(keyed(Some("b")).await.status, StatusCode::OK);
    assert_eq!(keyed(None).await.status, StatusCode::BAD_REQUEST);

    // No rule: unlimited, no rate-limit headers.
    for _ in 0..5 {
        let free = get("127.0.0.1", "/free").await;
        assert_eq!(free.status, StatusCode::OK);
        assert!(free.headers.get("ratelimit-policy").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_bucket_rules_hold_requests_up_to_max_delay() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", RULES);
    let rules = RuleSet::load(&path).unwrap();
    let addr = serve(&rules).await;
    // 1/s, burst 1, max_delay 1.5 s: slots at 0 s and 1 s are served (the
    // second held), the slot at 2 s is past the delay and refused at once.
    let (a, b, c) = tokio::join!(
        send(addr, "127.0.0.1", Method::GET, "/paced", None),
        send(addr, "127.0.0.1", Method::GET, "/paced", None),
        send(addr, "127.0.0.1", Method::GET, "/paced", None),
    );
    let mut statuses = [a.status, b.status, c.status];
    statuses.sort();
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_moves_the_live_rules_and_keeps_their_state() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", RULES);
    let rules = RuleSet::load(&path).unwrap();
    let addr = serve(&rules).await;
    let get = || send(addr, "127.0.0.1", Method::GET, "/orders/1", None);
    assert_eq!(get().await.status, StatusCode::OK);
    assert_eq!(get().await.status, StatusCode::OK);
    assert_eq!(get().await.status, StatusCode::TOO_MANY_REQUESTS);
    let post = || send(addr, "127.0.0.1", Method::POST, "/orders/1", None);
    assert_eq!(post().await.status, StatusCode::OK);
    assert_eq!(post().await.status, StatusCode::TOO_MANY_REQUESTS);

    // A larger burst for readers, and the write rule moved to PUT (POST is
    // now unlimited). The drained IP keeps its 2 used permits: under burst 3
    // it gets the 1 more that the larger burst gives, not a fresh 3.
    let edited = RULES
        .replace("burst: 2\n    per_ip: true", "burst: 3\n    per_ip: true")
        .replace("methods: [POST]", "methods: [PUT]");
    std::fs::write(&path, edited).unwrap();
    let report = rules.reload().unwrap();
    assert_eq!(report.updated, ["orders_read"]);
    assert_eq!(get().await.status, StatusCode::OK);
    let denied = get().await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        denied.headers["ratelimit-policy"],
        r#""orders_read";q=3;w=10800"#
    );
    // A fresh IP gets the new burst of 3.
    for _ in 0..3 {
        let r = send(addr, "127.0.0.5", Method::GET, "/orders/1", None).await;
        assert_eq!(r.status, StatusCode::OK);
    }
    assert_eq!(post().await.status, StatusCode::OK);
    assert_eq!(post().await.status, StatusCode::OK);
}

const CLASSES_AND_ADAPTIVE: &str = r#"
rate_limits:
  tiers:
    algorithm: priority
    rate: "1/h"
    burst: 4
    classes: { critical: 1.0, batch: 0.5 }
    class_header: x-priority
    match: { route: "/tiers" }
  guarded:
    algorithm: adaptive
    target_latency: "10ms"
    min_rate: 10
    max_rate: 100
    burst: 100
    match: { route: "/shed" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_classes_by_header_and_adaptive_rules_fed_by_responses() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", CLASSES_AND_ADAPTIVE);
    let clock = limiter_core::ManualClock::new();
    let rules = RuleSet::load_with_clock(&path, clock.clone()).unwrap();
    let app = axum::Router::new()
        .route("/tiers", axum::routing::get(|| async { "tiers" }))
        .route(
            "/shed",
            axum::routing::get(|| async { StatusCode::SERVICE_UNAVAILABLE }),
        )
        .layer(rules.layer());
    let addr = support::serve_app(app).await;
    let tiers = |class: Option<&'static str>| async move {
        let client: Client<_, Empty<Bytes>> =
            Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        let mut request = Request::get(format!("http://{addr}/tiers"));
        if let Some(class) = class {
            request = request.header("x-priority", class);
        }
        client
            .request(request.body(Empty::new()).unwrap())
            .await
            .unwrap()
            .status()
    };
    // Burst 4: the batch class (and requests naming no class) may use half.
    assert_eq!(tiers(None).await, StatusCode::OK);
    assert_eq!(tiers(Some("batch")).await, StatusCode::OK);
    assert_eq!(tiers(Some("nonsense")).await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(tiers(Some("critical")).await, StatusCode::OK);
    assert_eq!(tiers(Some("critical")).await, StatusCode::OK);
    assert_eq!(tiers(Some("critical")).await, StatusCode::TOO_MANY_REQUESTS);

    // The downstream sheds (503): an overload signal; once the interval is
    // over the adaptive rule cuts its rate below max_rate.
    let shed = || send(addr, "127.0.0.1", Method::GET, "/shed", None);
    assert_eq!(shed().await.status, StatusCode::SERVICE_UNAVAILABLE);
    let guarded = rules.get("guarded").unwrap();
    let adaptive = guarded.adaptive_ewma().unwrap();
    assert_eq!(adaptive.current_rate(), 100.0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(shed().await.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(matches!(
        adaptive.last_decision().map(|d| d.reason),
        Some(Reason::Dropped { .. })
    ));
    assert!(
        adaptive.current_rate() < 100.0,
        "{}",
        adaptive.current_rate()
    );
}

/// Requests racing 100 reloads each see one whole rule set: version 1 routes
/// `/x` to rule `a` (burst 1000, draft-10 headers), version 2 to rule `b`
/// (burst 2000, legacy headers); a response with `a`'s name and legacy
/// headers, or `b`'s burst in draft-10, would be a mix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_during_reloads_see_one_rule_set() {
    use tower::ServiceExt;
    let v1 = "rate_limits:\n  a:\n    algorithm: token_bucket\n    rate: \"1000000/s\"\n    burst: 1000\n    match: { route: \"/x\" }\n";
    let v2 = "rate_limits:\n  b:\n    algorithm: token_bucket\n    rate: \"1000000/s\"\n    burst: 2000\n    headers: legacy\n    match: { route: \"/x\" }\n";
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", v1);
    let rules = RuleSet::load(&path).unwrap();
    let app = axum::Router::new()
        .route("/x", axum::routing::get(|| async { "x" }))
        .layer(rules.layer());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Each client reports its first answer: the reloads start once both
    // run, however late a loaded machine schedules them.
    let (running, mut started) = tokio::sync::mpsc::unbounded_channel();
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (app, stop, running) = (app.clone(), stop.clone(), running.clone());
            tokio::spawn(async move {
                let mut seen = [0u32; 2];
                let mut first = true;
                // Relaxed: a stop flag; what is checked comes in the response.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let request = Request::get("/x").body(axum::body::Body::empty()).unwrap();
                    let response = app.clone().oneshot(request).await.unwrap();
                    let h = response.headers();
                    match (h.get("ratelimit-policy"), h.get("x-ratelimit-limit")) {
                        (Some(p), None) => {
                            // Rule a's name with rule a's burst.
                            assert_eq!(p, r#""a";q=1000000;w=1;limiter-burst=1000"#);
                            seen[0] += 1;
                        }
                        (None, Some(l)) => {
                            assert_eq!(l, "2000");
                            seen[1] += 1;
                        }
                        other => panic!("a mixed or missing rule set: {other:?}"),
                    }
                    if std::mem::take(&mut first) {
                        let _ = running.send(());
                    }
                    tokio::task::yield_now().await;
                }
                seen
            })
        })
        .collect();
    drop(running);
    for _ in 0..2 {
        within("both clients' first answers", started.recv())
            .await
            .expect("a client ended before its first answer");
    }
    for i in 0..100 {
        std::fs::write(&path, if i % 2 == 0 { v2 } else { v1 }).unwrap();
        rules.reload().unwrap();
        tokio::task::yield_now().await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for c in clients {
        let seen = c.await.expect("a client saw a mixed rule set");
        total += seen[0] + seen[1];
    }
    assert!(total > 0);
    assert_eq!(rules.generation(), 101);
}
