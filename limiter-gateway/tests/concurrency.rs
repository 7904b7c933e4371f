//! A concurrency rule in the gateway's rules file, on real sockets: while
//! the upstream holds `limit` requests the next is answered 503 with
//! `Retry-After` and the problem document without reaching the upstream;
//! the metrics show the limit, the in-flight count and the rejection; a
//! reload with permits held keeps them counted.

mod support;

use http::{Request, StatusCode};
use support::{Gated, Rig, client, empty, sample, text, until};

fn rules(limit: u32) -> String {
    format!(
        "rate_limits:\n  db:\n    algorithm: concurrency\n    limit: {limit}\n    match: {{ prefix: \"/db\" }}\n"
    )
}

async fn get(url: String) -> (StatusCode, http::HeaderMap, String) {
    let response = client()
        .request(Request::get(url).body(empty()).unwrap())
        .await
        .unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, text(response).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_rule_sheds_in_the_gateway_and_a_reload_keeps_the_permits_held() {
    let mut upstream = Gated::start("/db").await;
    let rig = Rig::start(&rules(2), &upstream.url(), |_| {}).await;
    let limiter = rig.rules.get("db").unwrap().concurrency().unwrap().clone();

    let mut held = Vec::new();
    for i in 0..2 {
        held.push(tokio::spawn(get(rig.url(&format!("/db/{i}")))));
        upstream.entered(1).await;
    }
    assert_eq!(limiter.in_flight(), 2);
    let (status, headers, body) = get(rig.url("/db/x")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert!(body.contains("\"in_flight\":2"), "{body}");
    let metrics = rig.admin("/metrics").await;
    assert_eq!(sample(&metrics, "concurrency_limit{limiter=\"db\"}"), 2.0);
    assert_eq!(
        sample(&metrics, "concurrency_in_flight{limiter=\"db\"}"),
        2.0
    );
    assert_eq!(
        sample(&metrics, "concurrency_rejected_total{limiter=\"db\"}"),
        1.0
    );

    // Raised to 3 with two held: the same limiter, so exactly one more
    // request reaches the upstream.
    std::fs::write(&rig.file, rules(3)).unwrap();
    assert_eq!(rig.rules.reload().unwrap().updated, ["db"]);
    assert!(
        rig.rules
            .get("db")
            .unwrap()
            .concurrency()
            .unwrap()
            .same_limiter(&limiter)
    );
    held.push(tokio::spawn(get(rig.url("/db/2"))));
    upstream.entered(1).await;
    assert_eq!(limiter.in_flight(), 3);
    assert_eq!(
        get(rig.url("/db/y")).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );

    upstream.open();
    for h in held {
        let (status, _, body) = h.await.unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::OK, "done"));
    }
    // Only the admitted requests reached the upstream.
    assert_eq!(upstream.requests(), 3);
    until("no request in flight", || limiter.in_flight() == 0).await;
    let metrics = rig.admin("/metrics").await;
    assert_eq!(
        sample(&metrics, "concurrency_rejected_total{limiter=\"db\"}"),
        2.0
    );
}
