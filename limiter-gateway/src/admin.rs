//! The admin listener: `/metrics` (Prometheus text), `/healthz`, `/rules`.
//!
//! `/metrics` renders the process's recorder ([`metrics_handle`]): the
//! layer's `rate_limit_*` series per rule, the rules crate's
//! `rate_limit_config_*`, and the proxy's `gateway_*`. The recorder must be
//! installed before the rules are loaded, because the layer registers its
//! handles when a rule set is built: [`metrics_handle`] is called by
//! [`Gateway::start`](crate::Gateway::start) and should be called first by
//! anyone loading rules themselves.
//!
//! `/healthz` is `200 ok` while serving and `503 draining` once shutdown
//! has begun (so a load balancer stops sending). `/rules` is JSON: the
//! generation in force, the file, and each rule as understood.

use std::convert::Infallible;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use limiter_config::Mode;
use limiter_config::{PathMatch, RuleSet};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// `s` escaped for the inside of a JSON string (the workspace's one
/// escaper, `limiter_tower::problem::write_json_string`, without its quotes).
fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    limiter_tower::problem::write_json_string(&mut out, s);
    out[1..out.len() - 1].to_owned()
}

/// Histogram buckets (seconds) of every `*_seconds` metric: 100 µs to 10 s.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0,
];

/// The process's Prometheus recorder, installed as the global `metrics`
/// recorder on first call. If another recorder was installed first, the
/// handle renders nothing and a warning is logged.
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new();
        let builder = builder
            .set_buckets_for_metric(Matcher::Suffix("seconds".into()), &BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics will be empty");
        }
        handle
    })
}

/// Describes the gateway's metric families (HELP lines) and registers the
/// ones without per-upstream labels, so each exists from start.
pub(crate) fn register() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "gateway_upstream_responses_total",
        "Responses from upstreams, by upstream and status class."
    );
    describe_counter!(
        "gateway_upstream_errors_total",
        "Requests an upstream failed (connect, timeout, protocol), by upstream and kind."
    );
    describe_histogram!(
        "gateway_upstream_latency_seconds",
        metrics::Unit::Seconds,
        "Time from sending a request upstream to its response head."
    );
    describe_gauge!(
        "gateway_upstream_available_addresses",
        "Addresses of an upstream that are neither ejected nor failing their health check."
    );
    describe_counter!(
        "gateway_accept_errors_total",
        "Failed accepts on the proxy listeners (such as EMFILE), each followed by a backoff."
    );
    describe_counter!(
        "gateway_connections_refused_total",
        "Client connections closed at accept, by reason (per_client: the address is at its cap)."
    );
    describe_counter!(
        "gateway_connections_timed_out_total",
        "Client connections closed by a deadline, by phase (head: no complete request head; idle: keep-alive)."
    );
    metrics::counter!("gateway_accept_errors_total").increment(0);
    metrics::counter!("gateway_connections_refused_total", "reason" => "per_client").increment(0);
    for phase in ["head", "idle"] {
        metrics::counter!("gateway_connections_timed_out_total", "phase" => phase).increment(0);
    }
    crate::front::register();
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    response
}

/// The rule set in force as JSON.
pub fn rules_json(rules: &RuleSet) -> String {
    let snapshot = rules.snapshot();
    let mut out = format!(
        "{{\"generation\":{},\"file\":\"{}\",\"rules\":[",
        snapshot.generation(),
        json_escape(&rules.path().display().to_string())
    );
    for (i, rule) in snapshot.rules().enumerate() {
        let spec = rule.spec();
        if i > 0 {
            out.push(',');
        }
        let matcher = match &spec.matcher {
            None => "null".to_owned(),
            Some(m) => {
                let (kind, path) = match &m.path {
                    PathMatch::Route(r) => ("route", r),
                    PathMatch::Prefix(p) => ("prefix", p),
                };
                let methods: Vec<String> = m
                    .methods
                    .iter()
                    .map(|m| format!("\"{}\"", m.as_str()))
                    .collect();
                format!(
                    "{{\"{kind}\":\"{}\",\"methods\":[{}]}}",
                    json_escape(path),
                    methods.join(",")
                )
            }
        };
        let mode = match spec.mode {
            Mode::Reject => "\"reject\"".to_owned(),
            Mode::Delay { max_delay } => {
                format!(
                    "{{\"delay\":{{\"max_delay_ms\":{}}}}}",
                    max_delay.as_millis()
                )
            }
        };
        let backend = match spec.backend {
            limiter_config::BackendSpec::Local => "local",
            limiter_config::BackendSpec::Redis(_) => "redis",
        };
        out.push_str(&format!(
            "{{\"name\":\"{}\",\"algorithm\":\"{}\",\"describe\":\"{}\",\"key\":\"{}\",\"mode\":{mode},\"match\":{matcher},\"backend\":\"{backend}\"}}",
            json_escape(&spec.name),
            spec.algorithm.name(),
            json_escape(&spec.algorithm.to_string()),
            json_escape(&spec.key.to_string()),
        ));
    }
    out.push_str("]}");
    out
}

/// Answers one admin request.
pub(crate) fn answer<B>(
    request: &Request<B>,
    rules: &RuleSet,
    draining: &AtomicBool,
) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(match request.uri().path() {
        "/metrics" => {
            let handle = metrics_handle();
            handle.run_upkeep();
            text(StatusCode::OK, "text/plain; version=0.0.4", handle.render())
        }
        // Relaxed: a flag read on its own; a request racing the start of
        // shutdown may see either answer.
        "/healthz" if draining.load(Ordering::Relaxed) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "draining\n".into(),
        ),
        "/healthz" => text(StatusCode::OK, "text/plain", "ok\n".into()),
        "/rules" => text(StatusCode::OK, "application/json", rules_json(rules)),
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain",
            "admin endpoints: /metrics /healthz /rules\n".into(),
        ),
    })
}
