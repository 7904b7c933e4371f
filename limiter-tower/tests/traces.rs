//! The layer's decision spans at a real OTLP receiver (test-support's
//! `otlp`: PyPI's opentelemetry-proto and grpcio), over OTLP/gRPC and
//! OTLP/HTTP, from a real axum server on loopback: one span per decision
//! with the rule, the decision, the wait and the backend's latency, the
//! caller's trace continued, the raw key never exported, and the handler
//! handed the decision span as its parent.

use std::time::Duration;

use axum::routing::get;
use http::HeaderMap;
use limiter_core::Quota;
use limiter_keyed::KeyedLimiter;
use limiter_test_support::http1;
use limiter_test_support::otlp::Receiver;
use limiter_tower::otel::{Defaults, Protocol, TraceConfig, tracer_provider};
use limiter_tower::{Header, Mode, RateLimitLayer};
use opentelemetry::trace::TracerProvider as _;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const KEY: &str = "secret-key-7f3a";

/// The handler answers the `traceparent` it was handed.
async fn echo_traceparent(headers: HeaderMap) -> String {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// Serves a layer (2/s per API key, burst 2, requests held up to 600 ms,
/// the cost in `x-cost`) traced by `tracer` (or not), and sends it three
/// requests one after the other with the caller's `traceparent`: cost 1,
/// admitted; cost 2, delayed (~500 ms, one permit short); cost 2 again,
/// rejected (its slot ~1 s away, unless it came 400 ms after the second
/// was let through). Returns the replies.
async fn three_requests(tracer: Option<opentelemetry_sdk::trace::SdkTracer>) -> Vec<http1::Reply> {
    let limiter = KeyedLimiter::new(Quota::per_second(2).unwrap().with_burst(2).unwrap());
    let builder = RateLimitLayer::builder(
        limiter,
        Header::new(http::HeaderName::from_static("x-api-key")),
    )
    .name("orders")
    .mode(Mode::Delay {
        max_delay: Duration::from_millis(600),
    })
    .cost(|head| {
        head.headers()
            .get("x-cost")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(1)
    });
    let builder = match tracer {
        Some(tracer) => builder.tracer(tracer),
        None => builder,
    };
    let app = axum::Router::new()
        .route("/", get(echo_traceparent))
        .layer(builder.build().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut replies = Vec::new();
    for cost in ["1", "2", "2"] {
        let reply = tokio::task::spawn_blocking(move || {
            let traceparent = format!("00-{TRACE_ID}-{PARENT}-01");
            let headers = [
                ("x-api-key", KEY),
                ("traceparent", &traceparent),
                ("x-cost", cost),
            ];
            http1::get(port, "/", &headers)
        })
        .await
        .unwrap()
        .unwrap();
        replies.push(reply);
    }
    replies
}

async fn traced(protocol: Protocol) {
    let receiver = Receiver::start();
    let endpoint = match protocol {
        Protocol::Grpc => format!("http://{}", receiver.grpc_endpoint()),
        Protocol::HttpProtobuf => format!("{}/v1/traces", receiver.http_endpoint()),
    };
    let config = TraceConfig {
        protocol,
        endpoint,
        ..TraceConfig::from_otel_env(
            &|_| None,
            Defaults {
                service_name: "tower-test",
                ..Defaults::default()
            },
        )
        .unwrap()
    };
    let provider = tracer_provider(&config).unwrap();
    let replies = three_requests(Some(provider.tracer("limiter-tower-test"))).await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 429]);
    // Shutdown sends what is queued; it blocks, so off the runtime's threads.
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap()
        .unwrap();
    let spans = receiver.wait_for(3, Duration::from_secs(30));
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let text = serde_json::to_string(&spans).unwrap();
    assert!(!text.contains(KEY), "the client's key was exported: {text}");
    for (span, decision) in spans.iter().zip(["admitted", "delayed", "rejected"]) {
        assert_eq!(span["protocol"], receiver_protocol(protocol));
        assert_eq!(span["name"], "ratelimit.decision");
        assert_eq!(span["trace_id"], TRACE_ID, "{span}");
        assert_eq!(span["parent_span_id"], PARENT, "{span}");
        assert_eq!(span["resource"]["service.name"], "tower-test");
        let a = &span["attributes"];
        assert_eq!(a["ratelimit.rule"], "orders");
        assert_eq!(a["ratelimit.decision"], decision, "{a}");
        assert!(
            a["ratelimit.backend.latency_us"].is_number()
                || a["ratelimit.backend.latency_us"].is_string(),
            "{a}"
        );
        let wait = a["ratelimit.wait_ms"].as_f64().unwrap();
        match decision {
            "admitted" => assert_eq!(wait, 0.0),
            // Held for its slot, ~500 ms away (less the time between the
            // two requests), at most the 600 ms the layer holds.
            "delayed" => assert!(wait > 0.0 && wait <= 600.0, "{wait}"),
            // Refused: its slot was ~1 s away; it may retry when that is
            // within the 600 ms hold.
            _ => assert!(wait > 0.0 && wait <= 1_000.0, "{decision}: {wait}"),
        }
    }
    // The admitted and the delayed request reached the handler as children
    // of their decision spans, in the caller's trace.
    for (reply, span) in replies.iter().zip(&spans).take(2) {
        let span_id = span["span_id"].as_str().unwrap();
        assert_eq!(reply.body, format!("00-{TRACE_ID}-{span_id}-01"));
    }
}

fn receiver_protocol(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Grpc => "grpc",
        Protocol::HttpProtobuf => "http",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_spans_over_otlp_grpc() {
    traced(Protocol::Grpc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_spans_over_otlp_http() {
    traced(Protocol::HttpProtobuf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_tracer_the_traceparent_goes_on_untouched() {
    let replies = three_requests(None).await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 429]);
    for reply in &replies[..2] {
        assert_eq!(reply.body, format!("00-{TRACE_ID}-{PARENT}-01"));
    }
}
