//! The binary's traces at a real OTLP receiver (test-support's `otlp`):
//! with `OTEL_EXPORTER_OTLP_ENDPOINT` set, each rule decision is a span of
//! the request's trace (its `traceparent` continued) with the rule, the
//! decision and the wait, never the client's key; the upstream receives a
//! `traceparent` whose parent is the decision's span. Without the
//! variables nothing is exported and the `traceparent` goes on as it came.

use http::Request;
use limiter_gateway::echo::Echo;
use limiter_test_support::otlp::Receiver;
use tokio::process::{Child, Command};

use crate::binary::{signal, spawn_with_env};
use crate::support::{TempDir, client, empty, text};

const BIN: &str = env!("CARGO_BIN_EXE_limiter-gateway");
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const KEY: &str = "secret-key-7f3a";
const RULES: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 1/min
    burst: 1
    key: \"header:x-api-key\"
    match: { prefix: \"/\" }
";

/// Starts the binary with `env` (spans sent every 100 ms); returns it and
/// its proxy address.
async fn start(rules: &std::path::Path, upstream: &str, env: &[(&str, String)]) -> (Child, String) {
    let mut env = env.to_vec();
    env.push(("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()));
    let p = spawn_with_env(rules, upstream, &[], &env).await;
    (p.child, p.addr.to_string())
}

/// Two requests with the caller's `traceparent` (admitted, then refused
/// by the 1-a-minute rule); returns the upstream's view of the first (the
/// request's headers) and the second's status.
async fn two_requests(addr: &str) -> (String, u16) {
    let mut answers = Vec::new();
    for _ in 0..2 {
        let request = Request::get(format!("http://{addr}/headers"))
            .header("x-api-key", KEY)
            .header("traceparent", format!("00-{TRACE_ID}-{PARENT}-01"))
            .body(empty())
            .unwrap();
        let response = client().request(request).await.unwrap();
        let status = response.status().as_u16();
        answers.push((text(response).await, status));
    }
    assert_eq!(answers[0].1, 200);
    (answers[0].0.clone(), answers[1].1)
}

fn traceparent_seen(headers: &str) -> &str {
    headers
        .lines()
        .find_map(|l| l.strip_prefix("traceparent: "))
        .unwrap_or_else(|| panic!("no traceparent upstream: {headers}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_decisions_are_spans_of_the_callers_trace() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let receiver = Receiver::start();
    let dir = TempDir::new();
    let rules = dir.write("rules.yaml", RULES);
    let env = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.http_endpoint()),
    ];
    let (mut child, addr) = start(&rules, &echo.url(), &env).await;
    let (upstream_saw, second) = two_requests(&addr).await;
    assert_eq!(second, 429);
    signal(&child, "TERM");
    assert!(child.wait().await.unwrap().success());
    let spans = receiver.spans();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let text = serde_json::to_string(&spans).unwrap();
    assert!(!text.contains(KEY), "the client's key was exported: {text}");
    for (span, decision) in spans.iter().zip(["admitted", "rejected"]) {
        assert_eq!(span["protocol"], "http");
        assert_eq!(span["name"], "ratelimit.decision");
        assert_eq!(span["trace_id"], TRACE_ID, "{span}");
        assert_eq!(span["parent_span_id"], PARENT, "{span}");
        assert_eq!(span["resource"]["service.name"], "limiter-gateway");
        let a = &span["attributes"];
        assert_eq!(a["ratelimit.rule"], "api");
        assert_eq!(a["ratelimit.decision"], decision, "{a}");
        let wait = a["ratelimit.wait_ms"].as_f64().unwrap();
        match decision {
            "admitted" => assert_eq!(wait, 0.0),
            _ => assert!(wait > 50_000.0 && wait <= 60_000.0, "{wait}"),
        }
        assert!(a.get("ratelimit.backend.latency_us").is_some(), "{a}");
    }
    // The upstream continues the trace below the decision's span.
    let admitted = spans[0]["span_id"].as_str().unwrap();
    assert_eq!(
        traceparent_seen(&upstream_saw),
        format!("00-{TRACE_ID}-{admitted}-01")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_otel_variables_nothing_is_traced() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let receiver = Receiver::start();
    let dir = TempDir::new();
    let rules = dir.write("rules.yaml", RULES);
    let (mut child, addr) = start(&rules, &echo.url(), &[]).await;
    let (upstream_saw, second) = two_requests(&addr).await;
    assert_eq!(second, 429);
    assert_eq!(
        traceparent_seen(&upstream_saw),
        format!("00-{TRACE_ID}-{PARENT}-01")
    );
    signal(&child, "TERM");
    assert!(child.wait().await.unwrap().success());
    assert_eq!(receiver.spans(), Vec::<serde_json::Value>::new());
}

#[tokio::test]
async fn a_bad_otel_variable_is_a_usage_error() {
    let dir = TempDir::new();
    let rules = dir.write("rules.yaml", RULES);
    let output = Command::new(BIN)
        .arg("--config")
        .arg(&rules)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9",
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{stderr}");
}
