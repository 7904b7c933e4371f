//! Traces against a real OTLP receiver (test-support's `otlp`, from PyPI's
//! opentelemetry-proto and grpcio), over both of envoyproxy/ratelimit's
//! `TRACING_EXPORTER_PROTOCOL`s: the binary runs with `TRACING_ENABLED`
//! and `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at the receiver; a tonic
//! client sends `ShouldRateLimit` with a `traceparent`.
#![cfg(feature = "otel")]

use crate::support;

use std::path::Path;
use std::time::Duration;

use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use limiter_test_support::otlp::Receiver;
use support::{Rls, temp_dir};

const CONFIG: &str = "domain: traced
descriptors:
  - key: client_id
    rate_limit: {unit: minute, requests_per_unit: 1}
";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const CLIENT: &str = "secret-client-7f3a";

/// Two calls with the same `traceparent`: the first admitted, the second
/// over the limit of 1 a minute. Returns the binary (still running).
fn run(dir: &Path, env: &[(&str, &str)]) -> Rls {
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(dir.join("config/traced.yaml"), CONFIG).unwrap();
    let mut env = env.to_vec();
    env.extend([
        ("TRACING_SERVICE_NAMESPACE", "edge"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ]);
    let rls = Rls::start(dir, 0, &env);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let codes = rt.block_on(async {
        let mut client = RateLimitClient::connect(format!("http://{}", rls.grpc))
            .await
            .unwrap();
        let mut codes = Vec::new();
        for _ in 0..2 {
            let mut call = tonic::Request::new(RateLimitRequest {
                domain: "traced".into(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![Entry {
                        key: "client_id".into(),
                        value: CLIENT.into(),
                    }],
                    ..RateLimitDescriptor::default()
                }],
                ..RateLimitRequest::default()
            });
            call.metadata_mut().insert(
                "traceparent",
                format!("00-{TRACE_ID}-{PARENT}-01").parse().unwrap(),
            );
            codes.push(client.should_rate_limit(call).await.unwrap().overall_code);
        }
        codes
    });
    assert_eq!(codes, [Code::Ok as i32, Code::OverLimit as i32]);
    rls
}

/// Both calls arrive as spans of the caller's trace, by `protocol`.
fn each_call_is_a_span(protocol: &str, env: &[(&str, &str)], receiver: &Receiver) {
    let dir = temp_dir(&format!("traces-{protocol}"));
    let mut env = env.to_vec();
    env.push(("TRACING_ENABLED", "true"));
    let rls = run(&dir, &env);
    receiver.wait_for(2, Duration::from_secs(30));
    assert!(rls.terminate().success());
    let spans = receiver.spans();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let text = serde_json::to_string(&spans).unwrap();
    assert!(
        !text.contains(CLIENT),
        "the client's key was exported: {text}"
    );
    for (span, decision) in spans.iter().zip(["admitted", "rejected"]) {
        assert_eq!(span["protocol"], protocol);
        assert_eq!(span["name"], "ShouldRateLimit");
        assert_eq!(span["trace_id"], TRACE_ID);
        assert_eq!(span["parent_span_id"], PARENT);
        assert_eq!(span["kind"], 2, "a server span");
        assert_eq!(span["resource"]["service.name"], "RateLimit");
        assert_eq!(span["resource"]["service.namespace"], "edge");
        let a = &span["attributes"];
        assert_eq!(a["ratelimit.domain"], "traced");
        assert_eq!(a["ratelimit.decision"], decision);
        assert_eq!(a["ratelimit.backend"], "memory");
        // The JSON of an OTLP int64 is a decimal string or a number.
        assert!(
            a["ratelimit.backend.latency_us"].is_number()
                || a["ratelimit.backend.latency_us"].is_string(),
            "{a}"
        );
        let events = span["events"].as_array().unwrap();
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!(e["name"], "ratelimit.descriptor");
        assert_eq!(e["attributes"]["ratelimit.rule"], "traced.client_id");
        assert_eq!(e["attributes"]["ratelimit.decision"], decision);
        let wait = e["attributes"]["ratelimit.wait_ms"].as_f64().unwrap();
        assert!(wait > 0.0 && wait <= 60_000.0, "{wait}");
    }
}

#[test]
fn each_call_is_a_span_over_otlp_grpc() {
    let receiver = Receiver::start();
    let endpoint = receiver.grpc_endpoint();
    let env = [
        ("TRACING_EXPORTER_PROTOCOL", "grpc"),
        // Without a scheme, as Envoy Gateway passes it.
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
    ];
    each_call_is_a_span("grpc", &env, &receiver);
}

#[test]
fn each_call_is_a_span_over_otlp_http_their_default() {
    let receiver = Receiver::start();
    let endpoint = receiver.http_endpoint();
    // No TRACING_EXPORTER_PROTOCOL: theirs defaults to http.
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];
    each_call_is_a_span("http", &env, &receiver);
}

#[test]
fn tracing_off_sends_nothing() {
    let dir = temp_dir("traces-off");
    let receiver = Receiver::start();
    let endpoint = receiver.grpc_endpoint();
    let rls = run(
        &dir,
        &[
            ("TRACING_ENABLED", "false"),
            ("TRACING_EXPORTER_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ],
    );
    // Shutdown would flush any queued span: after it, nothing may arrive.
    assert!(rls.terminate().success());
    assert_eq!(receiver.spans(), Vec::<serde_json::Value>::new());
}
