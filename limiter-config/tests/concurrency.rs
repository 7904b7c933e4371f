//! `concurrency` and `adaptive_concurrency` rules through `rules.layer()`:
//! on a real axum server, the limit reached answers 503 with `Retry-After`
//! and the problem document, and a reload with permits held keeps them
//! counted (the same limiter, a new limit); under paused time, `mode:
//! delay` waits in the rule's queue up to `max_delay`, and a reload of an
//! adaptive rule's bounds keeps limiter, permits and waiters. `explain`
//! reports a concurrency rule's requests in flight and limit.

use crate::support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use limiter_config::{ExplainRequest, RuleError, RuleSet, Verdict};
use support::{TempDir, serve_app, until, within};
use tokio::sync::{mpsc, oneshot};
use tower::{Layer, Service, ServiceExt, service_fn};

fn rules(limit: u32) -> String {
    format!(
        "rate_limits:\n  db:\n    algorithm: concurrency\n    limit: {limit}\n    match: {{ prefix: \"/db\" }}\n"
    )
}

/// A handler that reports each request as it enters with the gate that
/// releases that request alone, then waits for the test to open it. One
/// gate per request: a shared semaphore would release its waiters in the
/// order their handlers reached it, which a loaded machine may reorder
/// after the order they entered in.
fn gated(entered: mpsc::UnboundedSender<oneshot::Sender<()>>) -> Router {
    Router::new()
        .route(
            "/db/{id}",
            get(move || {
                let entered = entered.clone();
                async move {
                    let (open, gate) = oneshot::channel();
                    entered.send(open).unwrap();
                    gate.await.unwrap();
                    "done"
                }
            }),
        )
        .route("/free", get(|| async { "free" }))
}

async fn get_path(addr: SocketAddr, path: &str) -> (StatusCode, http::HeaderMap, Bytes) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client
        .get(format!("http://{addr}{path}").parse().unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_sheds_on_a_real_server_and_a_reload_keeps_the_permits_held() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &rules(2));
    let rules_set = RuleSet::load(&path).unwrap();
    let (entered_tx, mut entered) = mpsc::unbounded_channel();
    let app = gated(entered_tx).layer(rules_set.layer());
    let addr = serve_app(app).await;
    let db = rules_set.get("db").unwrap();
    let limiter = db.concurrency().unwrap().clone();
    // Not a rate: the rate methods say where the permits are.
    assert!(matches!(
        db.try_acquire().await,
        Err(RuleError::Concurrency { .. })
    ));

    // Two requests inside the handler hold both permits; `gates[i]`
    // releases `held[i]`.
    let (mut held, mut gates) = (Vec::new(), Vec::new());
    for i in 0..2 {
        held.push(tokio::spawn(async move {
            get_path(addr, &format!("/db/{i}")).await
        }));
        gates.push(
            within(&format!("request {i} in the handler"), entered.recv())
                .await
                .unwrap(),
        );
    }
    assert_eq!(limiter.in_flight(), 2);
    // Explained as a concurrency rule: no key, the requests in flight and
    // the limit, nothing taken.
    let request = ExplainRequest {
        method: http::Method::GET,
        path: "/db/x".into(),
        headers: http::HeaderMap::new(),
        client: None,
    };
    let explained = rules_set.explain(&request);
    assert_eq!(
        (explained.rule.as_deref(), explained.key, explained.verdict),
        (
            Some("db"),
            None,
            Verdict::Concurrency {
                in_flight: 2,
                limit: 2
            }
        )
    );
    assert_eq!(limiter.in_flight(), 2);
    let (status, headers, body) = get_path(addr, "/db/x").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers[http::header::RETRY_AFTER], "1");
    assert_eq!(
        headers[http::header::CONTENT_TYPE],
        "application/problem+json"
    );
    let body = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        body.contains("\"limit\":2") && body.contains("\"in_flight\":2"),
        "{body}"
    );
    // A route no rule matches is not limited.
    assert_eq!(get_path(addr, "/free").await.0, StatusCode::OK);

    // Raised to 3 with two permits held: the same limiter, both still
    // counted, so exactly one more request enters.
    std::fs::write(&path, rules(3)).unwrap();
    let report = rules_set.reload().unwrap();
    assert_eq!(report.updated, ["db"]);
    let reloaded = rules_set.get("db").unwrap();
    assert!(reloaded.concurrency().unwrap().same_limiter(&limiter));
    assert_eq!((limiter.limit(), limiter.in_flight()), (3, 2));
    held.push(tokio::spawn(async move { get_path(addr, "/db/2").await }));
    gates.push(
        within("request 2 in the handler", entered.recv())
            .await
            .unwrap(),
    );
    assert_eq!(limiter.in_flight(), 3);
    assert_eq!(
        get_path(addr, "/db/x").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );

    // Cut to 1 with three held: nothing is revoked; each release frees a
    // permit for nobody until fewer than 1 are held.
    std::fs::write(&path, rules(1)).unwrap();
    assert_eq!(rules_set.reload().unwrap().updated, ["db"]);
    assert_eq!((limiter.limit(), limiter.in_flight()), (1, 3));
    // The same numbers again: unchanged, still the same limiter.
    assert_eq!(rules_set.reload().unwrap().unchanged, ["db"]);
    gates.remove(0).send(()).unwrap();
    let first = held.remove(0).await.unwrap();
    assert_eq!((first.0, &first.2[..]), (StatusCode::OK, &b"done"[..]));
    // The permit goes back once the response is ready; wait for the count.
    until("two requests in flight", || limiter.in_flight() == 2).await;
    assert_eq!(
        get_path(addr, "/db/x").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    for gate in gates {
        gate.send(()).unwrap();
    }
    for h in held {
        assert_eq!(h.await.unwrap().0, StatusCode::OK);
    }
    until("no request in flight", || limiter.in_flight() == 0).await;
    // Now one request at a time passes.
    let last = tokio::spawn(async move { get_path(addr, "/db/y").await });
    within("request y in the handler", entered.recv())
        .await
        .unwrap()
        .send(())
        .unwrap();
    assert_eq!(last.await.unwrap().0, StatusCode::OK);
}

/// The inner service of the paused-time tests: answers after the delay
/// the request's path names in milliseconds (`/db/250`).
fn sleeper() -> impl Service<
    Request<String>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    service_fn(|request: Request<String>| async move {
        let ms: u64 = request.uri().path()["/db/".len()..].parse().unwrap();
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"done"))))
    })
}

const ADAPTIVE: &str = "rate_limits:\n  db:\n    algorithm: adaptive_concurrency\n    estimator: aimd\n    initial_limit: 1\n    min_limit: 1\n    max_limit: MAX\n    queue: 1\n    mode: delay\n    max_delay: 100ms\n    match: { prefix: \"/db\" }\n";

#[tokio::test(start_paused = true)]
async fn delay_mode_waits_in_the_queue_and_a_reload_of_the_bounds_keeps_everything() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &ADAPTIVE.replace("MAX", "4"));
    let rules_set = RuleSet::load(&path).unwrap();
    let limiter = rules_set.get("db").unwrap().concurrency().unwrap().clone();
    assert!(limiter.is_adaptive());
    let service = rules_set.layer().layer(sleeper());
    let call = |ms: u64| {
        let service = service.clone();
        tokio::spawn(async move {
            let request = Request::get(format!("/db/{ms}"))
                .body(String::new())
                .unwrap();
            let response = service.oneshot(request).await.unwrap();
            (tokio::time::Instant::now(), response.status())
        })
    };
    let start = tokio::time::Instant::now();
    // The first holds the one permit for 50 ms; the second waits in the
    // queue and is served when it is released; a third finds the queue
    // (capacity 1) full and is refused at once.
    let first = call(50);
    tokio::task::yield_now().await;
    let second = call(1000);
    tokio::task::yield_now().await;
    assert_eq!((limiter.in_flight(), limiter.waiting()), (1, 1));
    let third = call(10);
    assert_eq!(
        third.await.unwrap(),
        (start, StatusCode::SERVICE_UNAVAILABLE)
    );

    // A reload that narrows the bounds to [1, 1] and doubles the queue
    // while one request is held and one waits: the same limiter, the
    // permit still held, the waiter still queued.
    std::fs::write(
        &path,
        ADAPTIVE.replace("MAX", "1").replace("queue: 1", "queue: 2"),
    )
    .unwrap();
    assert_eq!(rules_set.reload().unwrap().updated, ["db"]);
    assert!(
        rules_set
            .get("db")
            .unwrap()
            .concurrency()
            .unwrap()
            .same_limiter(&limiter)
    );
    assert_eq!(
        (
            limiter.in_flight(),
            limiter.waiting(),
            limiter.queue_capacity()
        ),
        (1, 1, 2)
    );

    assert_eq!(
        first.await.unwrap(),
        (start + Duration::from_millis(50), StatusCode::OK)
    );
    // The waiter got the permit at 50 ms (it now runs for 1 s). AIMD's
    // raise on the first sample is held at the new bounds' 1, so one more
    // waits its 100 ms and is refused at exactly its bound.
    tokio::task::yield_now().await;
    assert_eq!(
        (limiter.limit(), limiter.in_flight(), limiter.waiting()),
        (1, 1, 0)
    );
    let fourth = call(10);
    assert_eq!(
        fourth.await.unwrap(),
        (
            start + Duration::from_millis(150),
            StatusCode::SERVICE_UNAVAILABLE
        )
    );
    assert_eq!(
        second.await.unwrap(),
        (start + Duration::from_millis(1050), StatusCode::OK)
    );
    assert_eq!(limiter.in_flight(), 0);

    // Another algorithm: a new limiter (the kind is part of the shape).
    std::fs::write(&path, rules(3)).unwrap();
    assert_eq!(rules_set.reload().unwrap().replaced, ["db"]);
    let fixed = rules_set.get("db").unwrap().concurrency().unwrap().clone();
    assert!(!fixed.same_limiter(&limiter) && !fixed.is_adaptive());
}
