//! Traces against a real OTLP receiver (tests/support/otlp_receiver.py,
//! from PyPI's opentelemetry-proto and grpcio, found through
//! `LIMITER_RLS_OTLP_PYTHON`: a python with both installed; scripts/test-all
//! makes one). The binary runs with `TRACING_ENABLED` and
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at the receiver; a tonic client
//! sends `ShouldRateLimit` with a `traceparent`.
#![cfg(feature = "otel")]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use support::{Rls, eventually, temp_dir};

const CONFIG: &str = "domain: traced
descriptors:
  - key: client_id
    rate_limit: {unit: minute, requests_per_unit: 1}
";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const CLIENT: &str = "secret-client-7f3a";

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("LIMITER_RLS_OTLP_PYTHON") {
        return p.into();
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/otlp-venv/bin/python");
    assert!(
        venv.is_file(),
        "no OTLP receiver python: run `python3 -m venv target/otlp-venv && \
         target/otlp-venv/bin/pip install opentelemetry-proto grpcio` and set \
         LIMITER_RLS_OTLP_PYTHON=$PWD/target/otlp-venv/bin/python"
    );
    venv
}

struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    fn start(dir: &Path) -> Receiver {
        let out = dir.join("spans.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/otlp_receiver.py");
        let mut child = Command::new(python())
            .arg(&script)
            .arg(&out)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the OTLP receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver prints its port");
        Receiver { child, port, out }
    }

    fn spans(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two calls with the same `traceparent`: the first admitted, the second
/// over the limit of 1 a minute. Returns the binary (still running).
fn run(receiver: &Receiver, dir: &Path, tracing: bool) -> Rls {
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(dir.join("config/traced.yaml"), CONFIG).unwrap();
    // Without a scheme, as Envoy Gateway passes it.
    let endpoint = format!("127.0.0.1:{}", receiver.port);
    let enabled = if tracing { "true" } else { "false" };
    let rls = Rls::start(
        dir,
        0,
        &[
            ("TRACING_ENABLED", enabled),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("TRACING_SERVICE_NAMESPACE", "edge"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
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

#[test]
fn each_call_is_a_span_of_the_callers_trace() {
    let dir = temp_dir("traces-on");
    let receiver = Receiver::start(&dir);
    let rls = run(&receiver, &dir, true);
    eventually(Duration::from_secs(30), "two spans received", || {
        receiver.spans().len() >= 2
    });
    assert!(rls.terminate().success());
    let spans = receiver.spans();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let text = serde_json::to_string(&spans).unwrap();
    assert!(
        !text.contains(CLIENT),
        "the client's key was exported: {text}"
    );
    for (span, decision) in spans.iter().zip(["OK", "OVER_LIMIT"]) {
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
fn tracing_off_sends_nothing() {
    let dir = temp_dir("traces-off");
    let receiver = Receiver::start(&dir);
    let rls = run(&receiver, &dir, false);
    // Shutdown would flush any queued span: after it, nothing may arrive.
    assert!(rls.terminate().success());
    assert_eq!(receiver.spans(), Vec::<serde_json::Value>::new());
}
