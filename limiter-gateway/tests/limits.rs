//! Limiting through the rules file on real sockets: each request goes to
//! its rule, is counted within the exact GCRA bound, keyed per client
//! behind a trusted proxy, delayed in delay mode; unmatched requests pass;
//! a reload under load drops and mixes nothing and keeps the state.

mod support;

use std::time::Instant;

use http::{Request, StatusCode};
use http_body_util::BodyExt;
use limiter_gateway::echo::{Echo, pattern};
use support::{Rig, client, empty, sample, text};

async fn status(url: &str, xff: Option<&str>) -> StatusCode {
    let mut request = Request::get(url);
    if let Some(xff) = xff {
        request = request.header("x-forwarded-for", xff);
    }
    let response = client()
        .request(request.body(empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    if status == StatusCode::TOO_MANY_REQUESTS {
        assert!(response.headers().contains_key("retry-after"));
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
    }
    let _ = text(response).await;
    status
}

/// 50/s, burst 20: over `elapsed` seconds GCRA admits at most
/// `20 + floor(elapsed * 50)` and, offered more than that, at least the burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_admits_within_the_exact_gcra_bound_and_unmatched_requests_pass() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rules = "\
rate_limits:
  bound_api:
    algorithm: token_bucket
    rate: 50
    burst: 20
    match: { prefix: \"/api\" }
";
    let rig = Rig::start(rules, &echo.url(), |_| {}).await;
    let url = rig.url("/api/x");
    let started = Instant::now();
    let mut admitted = 0u64;
    let mut rejected = 0u64;
    for _ in 0..200 {
        match status(&url, None).await {
            StatusCode::OK => admitted += 1,
            StatusCode::TOO_MANY_REQUESTS => rejected += 1,
            other => panic!("unexpected {other}"),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let bound = 20 + (elapsed * 50.0).floor() as u64;
    assert!(admitted >= 20, "admitted {admitted}");
    assert!(
        admitted <= bound,
        "admitted {admitted} > bound {bound} over {elapsed}s"
    );
    assert_eq!(admitted + rejected, 200);
    // Only admitted requests reached the upstream.
    assert_eq!(echo.requests(), admitted);
    // Unmatched: no rule, no limit.
    for _ in 0..40 {
        assert_eq!(status(&rig.url("/other"), None).await, StatusCode::OK);
    }
    let metrics = rig.admin("/metrics").await;
    assert_eq!(
        sample(&metrics, "rate_limit_allowed_total{limiter=\"bound_api\"}"),
        admitted as f64
    );
    assert_eq!(
        sample(&metrics, "rate_limit_rejected_total{limiter=\"bound_api\"}"),
        rejected as f64
    );
    assert!(
        sample(
            &metrics,
            "gateway_upstream_responses_total{upstream=\"default\",class=\"2xx\"}"
        ) >= (admitted + 40) as f64
    );
    let rules_json = rig.admin("/rules").await;
    assert!(rules_json.starts_with("{\"generation\":1,"), "{rules_json}");
    assert!(
        rules_json.contains("\"name\":\"bound_api\",\"algorithm\":\"token_bucket\""),
        "{rules_json}"
    );
    assert_eq!(rig.admin("/healthz").await, "ok\n");
}

/// Behind a trusted proxy (loopback here), each client address in
/// `X-Forwarded-For` has its own bucket: burst 3, 1/h, so exactly 3 each.
#[tokio::test]
async fn clients_behind_a_trusted_proxy_have_their_own_buckets() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rules = "\
rate_limits:
  iso_per_ip:
    algorithm: token_bucket
    rate: 1/h
    burst: 3
    per_ip: true
    trusted_proxies: [ \"127.0.0.0/8\" ]
    match: { prefix: \"/\" }
";
    let rig = Rig::start(rules, &echo.url(), |_| {}).await;
    let url = rig.url("/pay");
    for client_ip in ["203.0.113.1", "203.0.113.2", "2001:db8::5"] {
        let mut admitted = 0;
        for _ in 0..6 {
            // A spoofed left-hand entry does not change the key.
            let xff = format!("10.9.9.{admitted}, {client_ip}");
            if status(&url, Some(&xff)).await == StatusCode::OK {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 3, "client {client_ip}");
    }
    assert_eq!(echo.requests(), 9);
}

/// A keyed table of 8 under rotation by 300 clients, each limited after
/// its one request (1/h, burst 1): the table stays full of limited keys,
/// and every new client is admitted all the same (its key takes the slot
/// of the least recently seen one); a returning client that was forgotten
/// starts again with a full burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_keyed_table_under_rotation_never_refuses_a_new_client() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rules = "\
rate_limits:
  per_client:
    algorithm: token_bucket
    rate: 1/h
    burst: 1
    per_ip: true
    max_keys: 8
    trusted_proxies: [ \"127.0.0.0/8\" ]
    match: { prefix: \"/\" }
";
    let rig = Rig::start(rules, &echo.url(), |_| {}).await;
    let url = rig.url("/x");
    for i in 0..300u32 {
        let ip = format!("198.51.{}.{}", i / 256, i % 256);
        assert_eq!(status(&url, Some(&ip)).await, StatusCode::OK, "client {ip}");
    }
    // The last client is still held (limited); the first was forgotten.
    assert_eq!(
        status(&url, Some("198.51.1.43")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(status(&url, Some("198.51.0.0")).await, StatusCode::OK);
    assert_eq!(echo.requests(), 301);
}

/// Leaky bucket 4/s with up to 3 s of delay: six requests at once all
/// pass, five of them held for their slot (in reject mode five would be
/// 429).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_mode_holds_requests_for_their_slot() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rules = "\
rate_limits:
  delay_paced:
    algorithm: leaky_bucket
    rate: 4/s
    max_delay: 3s
    match: { prefix: \"/paced\" }
";
    let rig = Rig::start(rules, &echo.url(), |_| {}).await;
    let url = rig.url("/paced");
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { status(&url, None).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    let metrics = rig.admin("/metrics").await;
    assert_eq!(
        sample(
            &metrics,
            "rate_limit_delayed_total{limiter=\"delay_paced\"}"
        ),
        5.0,
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "rate_limit_allowed_total{limiter=\"delay_paced\"}"
        ),
        6.0
    );
    assert_eq!(echo.requests(), 6);
}

/// 4 clients send 400 requests, each with its own id, while the file is
/// rewritten and reloaded 20 times (the rule's header style flips; its
/// quota stays). Every answer is 200 or 429, every 200 carries its own
/// request's id, and the rule admits exactly its burst: a reload that lost
/// the state would admit another burst each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_load_drops_nothing_mixes_nothing_and_keeps_state() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let file = |headers: &str| {
        format!(
            "\
rate_limits:
  hot_reload:
    algorithm: token_bucket
    rate: 1/h
    burst: 100
    headers: {headers}
    match: {{ prefix: \"/hot\" }}
"
        )
    };
    let rig = Rig::start(&file("draft10"), &echo.url(), |_| {}).await;
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let url = rig.url("/hot");
            tokio::spawn(async move {
                let client = client();
                let mut admitted = 0u32;
                for i in 0..100 {
                    let id = format!("{c}-{i}");
                    let request = Request::post(&url)
                        .header("x-id", &id)
                        .body(support::pattern_body(16, true))
                        .unwrap();
                    let response = client.request(request).await.unwrap();
                    match response.status() {
                        StatusCode::OK => {
                            assert_eq!(response.headers()["x-id"], id.as_str());
                            admitted += 1;
                        }
                        StatusCode::TOO_MANY_REQUESTS => {}
                        other => panic!("request {id}: {other}"),
                    }
                    let ok = response.status() == StatusCode::OK;
                    let body = response.into_body().collect().await.unwrap().to_bytes();
                    if ok {
                        assert_eq!(body, pattern(0, 16), "request {id}'s own body");
                    }
                }
                admitted
            })
        })
        .collect();
    for n in 0..20 {
        let style = if n % 2 == 0 { "legacy" } else { "draft10" };
        std::fs::write(&rig.file, file(style)).unwrap();
        let report = rig.rules.reload().expect("good file");
        assert_eq!(report.unchanged, ["hot_reload"]);
        // Spread the reloads over the run (not a timing assertion).
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let mut admitted = 0;
    for c in clients {
        admitted += c.await.unwrap();
    }
    assert_eq!(admitted, 100);
    assert_eq!(rig.rules.generation(), 21);
    assert!(rig.admin("/rules").await.starts_with("{\"generation\":21,"));
}
