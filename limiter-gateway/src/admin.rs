//! The admin listener: `/metrics` (Prometheus text), `/healthz`, `/rules`,
//! the dashboard (`/`, `/dashboard.json`, module `dashboard`).
//!
//! Every call that is not a read (`GET`, `HEAD`, `OPTIONS`) needs the
//! bearer token of the admin token file (module `admin_auth`): `401`
//! without it, `403` with another, before the path is even looked at.
//! Without a token file nothing can be changed, and the listener must be
//! on loopback ([`check_admin_bind`](crate::check_admin_bind), checked by
//! [`GatewayConfig::validate`](crate::GatewayConfig::validate) and at
//! start).
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use limiter_config::Mode;
use limiter_config::{ExplainRequest, Explanation, PathMatch, RuleSet, Verdict};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::admin_auth::{AdminToken, authorize};
use crate::admin_http::{json_escape, percent_decode, problem, segments};
use crate::dashboard::{Dashboard, rule_views};
use crate::front::{self, Refusal};
use crate::state::Shared;

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
        "Requests an upstream failed (connect, timeout, protocol) that the client got as 502 or 504, by upstream and kind."
    );
    describe_histogram!(
        "gateway_upstream_latency_seconds",
        metrics::Unit::Seconds,
        "Time from sending a request upstream to its response head."
    );
    describe_counter!(
        "gateway_upstream_retries_total",
        "Attempts that failed (connect, or a connection lost before the head) and were retried on another address, unseen by the client, by upstream."
    );
    describe_counter!(
        "gateway_upstream_connections_opened_total",
        "HTTP/1.1 upstream connections opened by the workers' own pools, by upstream (0 new per request once warm, under keep-alive)."
    );
    describe_counter!(
        "gateway_upstream_connections_kept_total",
        "HTTP/1.1 upstream connections whose client left mid-exchange, finished and kept in the pool, by upstream."
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
pub(crate) fn rules_json(rules: &RuleSet) -> String {
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

/// What the admin listener answers from: the rules in force, the
/// listeners' checks, the drain flag, the token guarding mutating calls, the dashboard.
#[derive(Debug)]
pub(crate) struct Admin {
    pub(crate) rules: RuleSet,
    /// The proxy listeners' state: `/explain` checks a request as they do.
    pub(crate) serving: Arc<Shared>,
    pub(crate) draining: Arc<AtomicBool>,
    pub(crate) token: Option<AdminToken>,
    pub(crate) dashboard: Arc<Dashboard>,
}

impl Admin {
    /// Answers one admin request. Every method other than `GET`, `HEAD`
    /// and `OPTIONS` is authorized first ([`authorize`]: `401` without the
    /// bearer token, `403` with another), whatever its path.
    pub(crate) async fn answer<B>(&self, request: Request<B>) -> Response<Full<Bytes>>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if let Err(denied) = authorize(self.token.as_ref(), request.method(), request.headers()) {
            return denied.into_response();
        }
        let (parts, body) = request.into_parts();
        let segments = segments(parts.uri.path());
        let segments: Vec<&str> = segments.iter().map(|s| &**s).collect();
        if let ["rules", rule, "keys", key] = segments.as_slice() {
            return crate::admin_keys::answer(&self.rules, &parts.method, rule, key, body).await;
        }
        let read = matches!(parts.method, Method::GET | Method::HEAD);
        match (read, segments.as_slice()) {
            (true, ["metrics"]) => {
                let handle = metrics_handle();
                handle.run_upkeep();
                text(StatusCode::OK, "text/plain; version=0.0.4", handle.render())
            }
            // Relaxed: a flag read on its own; a request racing the start
            // of shutdown may see either answer.
            (true, ["healthz"]) if self.draining.load(Ordering::Relaxed) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                "draining\n".into(),
            ),
            (true, ["healthz"]) => text(StatusCode::OK, "text/plain", "ok\n".into()),
            (true, ["rules"]) => text(StatusCode::OK, "application/json", rules_json(&self.rules)),
            (true, [""] | ["dashboard"] | ["dashboard.json"]) => {
                let metrics = metrics_handle().render();
                let views = rule_views(&self.rules);
                self.dashboard
                    .answer(parts.uri.path(), &views, &metrics)
                    .unwrap_or_else(|| problem(StatusCode::NOT_FOUND, "no such admin endpoint"))
            }
            (true, ["explain"]) => self.explain(parts.uri.query().unwrap_or("")),
            (false, ["rules", rule, "penalties", key]) if parts.method == Method::DELETE => {
                match self.rules.get(rule) {
                    None => problem(StatusCode::NOT_FOUND, &format!("no rule `{rule}` in force")),
                    Some(r) if r.penalty_box().is_none() => problem(
                        StatusCode::NOT_FOUND,
                        &format!("rule `{rule}` has no `penalty`"),
                    ),
                    Some(r) if r.release_penalty(key) => {
                        tracing::info!(rule = %rule, key = %key, "penalty released by the admin API");
                        text(
                            StatusCode::OK,
                            "application/json",
                            "{\"released\":true}".into(),
                        )
                    }
                    Some(_) => problem(
                        StatusCode::NOT_FOUND,
                        &format!("key `{key}` is not in rule `{rule}`'s penalty box"),
                    ),
                }
            }
            (
                false,
                [
                    "metrics" | "healthz" | "rules" | "" | "dashboard" | "dashboard.json"
                    | "explain",
                ],
            ) => {
                let mut response = problem(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "this admin endpoint only reads: use GET",
                );
                response
                    .headers_mut()
                    .insert(http::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
                response
            }
            _ => problem(
                StatusCode::NOT_FOUND,
                "admin endpoints: GET / (dashboard), /dashboard.json, /metrics, /healthz, /rules, /explain; GET, PUT, DELETE /rules/{rule}/keys/{key}; DELETE /rules/{rule}/penalties/{key}",
            ),
        }
    }
}

impl Admin {
    /// `/explain`: the request the query describes goes through the proxy
    /// listeners' own checks first ([`front::inspect`]: `Host`, sizes, the
    /// path's normal form), so the rules see what they would see from the
    /// listener; a request the listener refuses is explained as that
    /// refusal (`decision: client_error`).
    fn explain(&self, query: &str) -> Response<Full<Bytes>> {
        let request = match explain_request(query) {
            Ok(r) => r,
            Err(detail) => return problem(StatusCode::BAD_REQUEST, &detail),
        };
        let Ok(uri) = http::Uri::try_from(request.path.as_str()) else {
            return problem(
                StatusCode::BAD_REQUEST,
                &format!("path `{}` is not a request target", request.path),
            );
        };
        let mut head = Request::new(());
        *head.method_mut() = request.method.clone();
        *head.uri_mut() = uri;
        *head.headers_mut() = request.headers.clone();
        // Described without a Host, it is checked as HTTP/2 checks it,
        // where the authority is optional; with one, as HTTP/1.1.
        *head.version_mut() = if head.headers().contains_key(http::header::HOST) {
            http::Version::HTTP_11
        } else {
            http::Version::HTTP_2
        };
        let checks = self.serving.settings.load().checks;
        let json = match front::inspect(&mut head, checks) {
            Ok(()) => explanation_json(&self.rules.explain(&ExplainRequest {
                path: head.uri().path().to_owned(),
                ..request
            })),
            Err(refusal) => refusal_json(&refusal),
        };
        text(StatusCode::OK, "application/json", json)
    }
}

/// A request the listener refuses before any rule, as `/explain` shows it.
fn refusal_json(refusal: &Refusal) -> String {
    format!(
        "{{\"rule\":null,\"limit\":null,\"key\":null,\"shadow\":false,\"cost\":null,\"decision\":\"client_error\",\"status\":{},\"detail\":\"{}\"}}",
        refusal.status.as_u16(),
        json_escape(&refusal.detail)
    )
}

/// The request of `GET /explain?method=GET&path=/orders/7&header=x-user:42&ip=203.0.113.9`
/// (`header` repeated for several; `method` defaults to `GET`).
///
/// # Errors
///
/// The problem's detail: a missing `path`, or a parameter that is not a
/// method, a header or an address.
pub(crate) fn explain_request(query: &str) -> Result<ExplainRequest, String> {
    let mut request = ExplainRequest {
        method: Method::GET,
        path: String::new(),
        headers: http::HeaderMap::new(),
        client: None,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = value.replace('+', " ");
        let value = percent_decode(&value);
        match name {
            "method" => {
                request.method = Method::from_bytes(value.as_bytes())
                    .map_err(|_| format!("`{value}` is not an HTTP method"))?;
            }
            "path" if value.starts_with('/') => request.path = value.into_owned(),
            "path" => return Err(format!("path `{value}` must start with /")),
            "header" => {
                let (h, v) = value
                    .split_once(':')
                    .ok_or_else(|| format!("header `{value}`: write NAME:VALUE"))?;
                let name = http::HeaderName::try_from(h.trim())
                    .map_err(|_| format!("`{h}` is not a header name"))?;
                let v = HeaderValue::try_from(v.trim())
                    .map_err(|_| format!("the value of header `{h}` is not a header value"))?;
                request.headers.append(name, v);
            }
            "ip" => {
                request.client = Some(
                    value
                        .parse()
                        .map_err(|_| format!("ip `{value}` is not an IP address"))?,
                );
            }
            other => {
                return Err(format!(
                    "unknown parameter `{other}`: use method, path, header (NAME:VALUE), ip"
                ));
            }
        }
    }
    if request.path.is_empty() {
        return Err("give the request's path: /explain?path=/orders/7".into());
    }
    Ok(request)
}

/// An explanation as JSON: `rule`, `limit`, `key` (null when none),
/// `shadow`, `cost` (null when no rule matches, else `request`,
/// `response_header` (null when none) and `max_debt_ms`), `decision` (`unlimited`, `allowlisted`, `no_key`, `admitted`,
/// `delayed`, `refused`, `penalized`, `over_burst`, `concurrency`,
/// `not_read`) and its numbers: `remaining`, `wait_ms`, `retry_after_ms`,
/// `burst`, `in_flight`, `limit_now`; for a rule with a calendar `quota`,
/// `quota` with its `limit`, `remaining` and `reset_s` (seconds until the
/// period resets).
pub(crate) fn explanation_json(e: &Explanation) -> String {
    let string = |s: Option<&str>| match s {
        Some(s) => format!("\"{}\"", json_escape(s)),
        None => "null".into(),
    };
    // Whole milliseconds rounded up, as the 429 document's
    // `retry_after_ms`: a client that waits this long is not early.
    let ms = limiter_tower::problem::millis_up;
    let decision = match e.verdict {
        Verdict::Unlimited => "\"decision\":\"unlimited\"".to_owned(),
        Verdict::Allowlisted => "\"decision\":\"allowlisted\"".to_owned(),
        Verdict::NoKey => "\"decision\":\"no_key\"".to_owned(),
        Verdict::Admitted { remaining } => {
            format!("\"decision\":\"admitted\",\"remaining\":{remaining}")
        }
        Verdict::Delayed { wait, remaining } => format!(
            "\"decision\":\"delayed\",\"wait_ms\":{},\"remaining\":{remaining}",
            ms(wait)
        ),
        Verdict::Refused {
            retry_after,
            remaining,
        } => format!(
            "\"decision\":\"refused\",\"retry_after_ms\":{},\"remaining\":{remaining}",
            ms(retry_after)
        ),
        Verdict::Penalized { retry_after } => format!(
            "\"decision\":\"penalized\",\"retry_after_ms\":{},\"remaining\":0",
            ms(retry_after)
        ),
        Verdict::OverBurst { burst } => {
            format!("\"decision\":\"over_burst\",\"burst\":{burst}")
        }
        Verdict::Concurrency { in_flight, limit } => {
            format!("\"decision\":\"concurrency\",\"in_flight\":{in_flight},\"limit_now\":{limit}")
        }
        _ => "\"decision\":\"not_read\"".to_owned(),
    };
    let cost = match &e.cost {
        None => "null".to_owned(),
        Some(c) => format!(
            "{{\"request\":{},\"response_header\":{},\"max_debt_ms\":{}}}",
            c.request,
            string(c.response_header.as_ref().map(|h| h.as_str())),
            c.max_debt.as_millis()
        ),
    };
    let quota = match &e.quota {
        Some(q) => format!(
            ",\"quota\":{{\"limit\":{},\"remaining\":{},\"reset_s\":{}}}",
            q.limit,
            q.remaining,
            q.reset_in.as_secs_f64()
        ),
        None => String::new(),
    };
    format!(
        "{{\"rule\":{},\"limit\":{},\"key\":{},\"shadow\":{},\"cost\":{cost},{decision}{quota}}}",
        string(e.rule.as_deref()),
        string(e.limit.as_deref()),
        string(e.key.as_deref()),
        e.shadow
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict_json(verdict: Verdict) -> String {
        let json = explanation_json(&Explanation {
            rule: Some("r".into()),
            limit: None,
            key: Some("k".into()),
            shadow: false,
            cost: None,
            verdict,
            quota: None,
        });
        json[json.find("\"decision\"").unwrap()..].to_owned()
    }

    #[test]
    fn waits_are_whole_milliseconds_rounded_up_for_refused_and_penalized_keys() {
        use std::time::Duration;
        let refused = |retry_after| Verdict::Refused {
            retry_after,
            remaining: 0,
        };
        let penalized = |retry_after| Verdict::Penalized { retry_after };
        assert_eq!(
            verdict_json(refused(Duration::from_micros(2_500))),
            "\"decision\":\"refused\",\"retry_after_ms\":3,\"remaining\":0}"
        );
        assert_eq!(
            verdict_json(penalized(Duration::from_micros(2_500))),
            "\"decision\":\"penalized\",\"retry_after_ms\":3,\"remaining\":0}"
        );
        assert_eq!(
            verdict_json(penalized(Duration::from_nanos(3_599_999_999_001))),
            "\"decision\":\"penalized\",\"retry_after_ms\":3600000,\"remaining\":0}"
        );
        assert_eq!(
            verdict_json(refused(Duration::from_secs(3600))),
            "\"decision\":\"refused\",\"retry_after_ms\":3600000,\"remaining\":0}"
        );
        assert_eq!(
            verdict_json(Verdict::Delayed {
                wait: Duration::from_nanos(1),
                remaining: 0
            }),
            "\"decision\":\"delayed\",\"wait_ms\":1,\"remaining\":0}"
        );
    }

    #[test]
    fn a_concurrency_rule_is_explained_with_its_in_flight_and_limit() {
        let e = Explanation {
            rule: Some("db".into()),
            limit: Some("concurrency 2".into()),
            key: None,
            shadow: false,
            cost: None,
            verdict: Verdict::Concurrency {
                in_flight: 1,
                limit: 2,
            },
            quota: None,
        };
        assert_eq!(
            explanation_json(&e),
            "{\"rule\":\"db\",\"limit\":\"concurrency 2\",\"key\":null,\"shadow\":false,\"cost\":null,\"decision\":\"concurrency\",\"in_flight\":1,\"limit_now\":2}"
        );
    }
}
