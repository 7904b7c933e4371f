//! `ShouldRateLimit`: from a [`RateLimitRequest`] to a
//! [`RateLimitResponse`], transport-free (gRPC and `POST /json` both call
//! [`RateLimitService::should_rate_limit`]).
//!
//! Per descriptor, as envoyproxy/ratelimit does: the matched rule (or the
//! request's `limit` override); `unlimited` answers OK with
//! `limit_remaining = u32::MAX` and is not counted; a rule whose `name` some
//! other matched rule `replaces` is dropped; hits are the descriptor's
//! `hits_addend` when set (0 checks without spending, more is a cost
//! charged even past the limit), else the request's, where 0 means 1. The decision over the rest is `decide`'s (all or
//! nothing). `SHADOW_MODE` answers OK to a request that is over the limit
//! (counted as `global_shadow_mode`). Optional: `RateLimit-*` response
//! headers from the descriptor closest to its limit (the refusing one when
//! refused), and `dynamic_metadata` (domain, descriptors, hits and the
//! `metadata` of the descriptors that passed).

use std::collections::HashSet;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::backend::{CounterStore, Part};
use crate::call_trace::CallTrace;
use crate::config::RuleSet;
use crate::decide::{self, Check};
use crate::matcher::Matched;
use crate::proto::{
    Code, DescriptorStatus, HeaderValue, Kind, ListValue, RateLimit, RateLimitRequest,
    RateLimitResponse, Struct, Unit, Value,
};
use crate::stats::{Delta, Recorder};

/// The knobs of a decision (the environment variables of theirs that shape
/// an answer).
#[derive(Debug, Clone)]
pub struct Options {
    /// `SHADOW_MODE`: every over-limit answer becomes OK.
    pub global_shadow: bool,
    /// `QUOTA_MODE`: every descriptor in quota mode.
    pub global_quota: bool,
    /// `RESPONSE_DYNAMIC_METADATA`.
    pub dynamic_metadata: bool,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED` with the three header names
    /// (`LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER`).
    pub headers: Option<[String; 3]>,
    /// `NEAR_LIMIT_RATIO`.
    pub near_ratio: f32,
    /// `REDIS_TIMEOUT`: the time all store calls of one request may take
    /// together (the request's deadline, counted from its start).
    pub store_budget: core::time::Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            global_shadow: false,
            global_quota: false,
            dynamic_metadata: false,
            headers: None,
            near_ratio: 0.8,
            store_budget: core::time::Duration::from_millis(10),
        }
    }
}

/// A request the service refuses to decide (their "service error").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// `domain` is empty.
    EmptyDomain,
    /// No descriptors.
    NoDescriptors,
    /// A `limit` override without a known unit.
    OverrideWithoutUnit,
    /// The backend could not answer (the `error` failure policy).
    Store(String),
}

impl core::fmt::Display for RequestError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RequestError::EmptyDomain => f.write_str("rate limit domain must not be empty"),
            RequestError::NoDescriptors => {
                f.write_str("rate limit descriptor list must not be empty")
            }
            RequestError::OverrideWithoutUnit => {
                f.write_str("a descriptor's limit override has no unit")
            }
            RequestError::Store(e) => write!(f, "the limit store failed: {e}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// The rate limit service: the rule set in force, the backend, the options.
#[derive(Debug)]
pub struct RateLimitService<B> {
    rules: ArcSwap<RuleSet>,
    backend: B,
    options: Options,
    recorder: Recorder,
    /// `None` (the default): the gRPC face does no tracing work.
    #[cfg(feature = "otel")]
    tracer: Option<opentelemetry_sdk::trace::SdkTracer>,
}

impl<B: CounterStore> RateLimitService<B> {
    /// A service deciding `rules` on `backend`.
    pub fn new(
        rules: RuleSet,
        backend: B,
        options: Options,
        recorder: Recorder,
    ) -> RateLimitService<B> {
        RateLimitService {
            rules: ArcSwap::from_pointee(rules),
            backend,
            options,
            recorder,
            #[cfg(feature = "otel")]
            tracer: None,
        }
    }

    /// Records a span per gRPC call with `tracer`, continuing the call's
    /// `traceparent` (what it records: docs/rls.md, Traces).
    #[cfg(feature = "otel")]
    #[must_use]
    pub fn with_tracer(mut self, tracer: opentelemetry_sdk::trace::SdkTracer) -> Self {
        self.tracer = Some(tracer);
        self
    }

    #[cfg(feature = "otel")]
    pub(crate) fn tracer(&self) -> Option<&opentelemetry_sdk::trace::SdkTracer> {
        self.tracer.as_ref()
    }

    /// The rule set in force.
    pub fn rules(&self) -> Arc<RuleSet> {
        self.rules.load_full()
    }

    /// Puts `rules` in force for the next requests (limiter state is kept:
    /// counters are keyed by descriptor and limit, not by rule set).
    pub fn set_rules(&self, rules: RuleSet) {
        self.rules.store(Arc::new(rules));
    }

    /// The stats recorder.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Decides `req`; see the module docs.
    ///
    /// # Errors
    ///
    /// [`RequestError`] for a request without a domain or descriptors, an
    /// override without a unit, or a backend failure under the `error`
    /// policy.
    pub async fn should_rate_limit(
        &self,
        req: &RateLimitRequest,
    ) -> Result<RateLimitResponse, RequestError> {
        self.answer(req, None).await
    }

    /// [`Self::should_rate_limit`], recording into `trace` when there is
    /// one (`None`: no tracing work at all).
    pub(crate) async fn answer(
        &self,
        req: &RateLimitRequest,
        mut trace: Option<&mut CallTrace>,
    ) -> Result<RateLimitResponse, RequestError> {
        if let Some(t) = trace.as_deref_mut() {
            t.domain(&req.domain);
        }
        if req.domain.is_empty() {
            return Err(RequestError::EmptyDomain);
        }
        if req.descriptors.is_empty() {
            return Err(RequestError::NoDescriptors);
        }
        let rules = self.rules.load();
        if !rules.domains.contains_key(&req.domain) {
            self.recorder.domain_not_found(&req.domain);
        }
        let mut matched: Vec<Option<Matched>> = req
            .descriptors
            .iter()
            .map(|d| rules.find(&req.domain, &d.entries, d.limit.as_ref()))
            .collect();
        let replacing: HashSet<&str> = matched
            .iter()
            .flatten()
            .flat_map(|m| m.rule.replaces.iter().map(String::as_str))
            .collect();
        let replaced: Vec<bool> = matched
            .iter()
            .map(|m| {
                m.as_ref().is_some_and(|m| {
                    !m.rule.unlimited
                        && !m.rule.name.is_empty()
                        && replacing.contains(m.rule.name.as_str())
                })
            })
            .collect();
        for (m, r) in matched.iter_mut().zip(&replaced) {
            if *r {
                *m = None;
            }
        }
        let request_hits = u64::from(req.hits_addend.max(1));
        let mut checks = Vec::new();
        let mut check_of = vec![None; req.descriptors.len()];
        for (i, (d, m)) in req.descriptors.iter().zip(&matched).enumerate() {
            let Some(m) = m else { continue };
            if m.rule.unlimited {
                continue;
            }
            if m.rule.limit.unit == Unit::Unknown {
                return Err(RequestError::OverrideWithoutUnit);
            }
            let mut key = String::with_capacity(64);
            key.push_str(&req.domain);
            key.push('_');
            for (j, e) in d.entries.iter().enumerate() {
                key.push_str(&e.key);
                key.push('_');
                match m.share_patterns.get(j).filter(|p| !p.is_empty()) {
                    Some(p) => key.push_str(p),
                    None => key.push_str(&e.value),
                }
                key.push('_');
            }
            check_of[i] = Some(checks.len());
            checks.push(Check {
                part: Part {
                    key,
                    domain_len: req.domain.len(),
                    limit: m.rule.limit,
                    hits: 0,
                },
                hits: d.hits_addend.map_or(request_hits, |h| h.value),
                cost: d.hits_addend.is_some_and(|h| h.value > 0),
                shadow: m.rule.shadow_mode,
                quota: self.options.global_quota || m.rule.quota_mode,
            });
        }
        // A budget no instant can hold (`Duration::MAX`) is no deadline.
        let deadline =
            limiter_async::deadline_after(tokio::time::Instant::now(), self.options.store_budget);
        let started = trace.is_some().then(std::time::Instant::now);
        let decision = decide::decide(&self.backend, &checks, deadline).await;
        if let (Some(t), Some(started)) = (trace.as_deref_mut(), started) {
            t.backend(self.backend.store(), started.elapsed());
            if let Err(e) = &decision {
                t.failed(&e.0);
            }
        }
        let decision = decision.map_err(|e| RequestError::Store(e.0))?;
        let mut statuses = Vec::with_capacity(req.descriptors.len());
        let mut closest: Option<(usize, u32, bool)> = None;
        let mut passed = Vec::new();
        for (i, m) in matched.iter().enumerate() {
            let status = match (m, check_of[i]) {
                (Some(m), _) if m.rule.unlimited => DescriptorStatus {
                    code: Code::Ok as i32,
                    current_limit: None,
                    limit_remaining: u32::MAX,
                    ..DescriptorStatus::default()
                },
                (Some(m), Some(c)) => {
                    let o = decision.parts[c];
                    let check = &checks[c];
                    self.recorder.record(
                        &req.domain,
                        &m.rule,
                        &m.stats_key,
                        Delta::of(
                            o.used_before,
                            check.hits,
                            m.rule.limit.requests_per_unit,
                            o.over,
                            check.shadow,
                            self.options.near_ratio,
                        ),
                    );
                    if o.degraded {
                        self.recorder.service("call.should_rate_limit.redis_error");
                    }
                    let answers_over = o.over && !check.shadow;
                    if !answers_over {
                        passed.push(i);
                    }
                    // Their header choice: the lowest remaining, and a
                    // refusing (not quota-mode) descriptor wins.
                    let refusing = answers_over && !check.quota;
                    if closest.is_none_or(|(_, r, was_refusing)| {
                        refusing || (!was_refusing && o.remaining < r)
                    }) {
                        closest = Some((i, o.remaining, refusing));
                    }
                    if let Some(t) = trace.as_deref_mut() {
                        t.descriptor(&m.rule.full_key, answers_over, o.reset);
                    }
                    DescriptorStatus {
                        code: if answers_over {
                            Code::OverLimit
                        } else {
                            Code::Ok
                        } as i32,
                        current_limit: Some(RateLimit {
                            requests_per_unit: m.rule.limit.requests_per_unit,
                            unit: m.rule.limit.unit as i32,
                            name: m.rule.name.clone(),
                        }),
                        limit_remaining: o.remaining,
                        duration_until_reset: Some(crate::proto::Duration {
                            seconds: i64::try_from(o.reset.as_secs()).unwrap_or(i64::MAX),
                            nanos: i32::try_from(o.reset.subsec_nanos()).unwrap_or(0),
                        }),
                        ..DescriptorStatus::default()
                    }
                }
                _ => {
                    passed.push(i);
                    DescriptorStatus {
                        code: Code::Ok as i32,
                        ..DescriptorStatus::default()
                    }
                }
            };
            statuses.push(status);
        }
        let mut over = decision.over;
        if over && self.options.global_shadow {
            over = false;
            self.recorder.service("global_shadow_mode");
        }
        if let Some(t) = trace {
            t.decided(over);
        }
        let mut response = RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            ..RateLimitResponse::default()
        };
        if let (Some(names), Some((i, _, _))) = (&self.options.headers, closest) {
            let s = &statuses[i];
            let limit = s.current_limit.as_ref().map_or(0, |l| l.requests_per_unit);
            let reset = s
                .duration_until_reset
                .as_ref()
                .map_or(0, |d| d.seconds + i64::from(d.nanos > 0));
            response.response_headers_to_add = vec![
                HeaderValue {
                    key: names[0].clone(),
                    value: limit.to_string(),
                    ..HeaderValue::default()
                },
                HeaderValue {
                    key: names[1].clone(),
                    value: s.limit_remaining.to_string(),
                    ..HeaderValue::default()
                },
                HeaderValue {
                    key: names[2].clone(),
                    value: reset.to_string(),
                    ..HeaderValue::default()
                },
            ];
        }
        if self.options.dynamic_metadata {
            response.dynamic_metadata = Some(metadata(req, &matched, &passed));
        }
        response.statuses = statuses;
        Ok(response)
    }
}

fn string(s: String) -> Value {
    Value {
        kind: Some(Kind::StringValue(s)),
    }
}

#[allow(clippy::cast_precision_loss)]
fn number(n: u64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(n as f64)),
    }
}

fn list(values: Vec<Value>) -> Value {
    Value {
        kind: Some(Kind::ListValue(ListValue { values })),
    }
}

fn object(fields: std::collections::HashMap<String, Value>) -> Value {
    Value {
        kind: Some(Kind::StructValue(Struct { fields })),
    }
}

/// JSON (from a config `metadata`) as a protobuf `Value`.
pub(crate) fn json_to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value {
            kind: Some(Kind::NullValue(0)),
        },
        serde_json::Value::Bool(b) => Value {
            kind: Some(Kind::BoolValue(*b)),
        },
        serde_json::Value::Number(n) => Value {
            kind: Some(Kind::NumberValue(n.as_f64().unwrap_or(0.0))),
        },
        serde_json::Value::String(s) => string(s.clone()),
        serde_json::Value::Array(a) => list(a.iter().map(json_to_value).collect()),
        serde_json::Value::Object(o) => object(
            o.iter()
                .map(|(k, v)| (k.clone(), json_to_value(v)))
                .collect(),
        ),
    }
}

/// Their `ratelimitToMetadata`: the request and the passed descriptors'
/// metadata (merged, the first value of a key kept, maps merged deeply).
fn metadata(req: &RateLimitRequest, matched: &[Option<Matched>], passed: &[usize]) -> Struct {
    let mut fields = std::collections::HashMap::new();
    fields.insert("domain".to_owned(), string(req.domain.clone()));
    let descriptors = req
        .descriptors
        .iter()
        .map(|d| {
            let mut f = std::collections::HashMap::new();
            f.insert(
                "entries".to_owned(),
                list(
                    d.entries
                        .iter()
                        .map(|e| string(format!("{}={}", e.key, e.value)))
                        .collect(),
                ),
            );
            if let Some(l) = &d.limit {
                f.insert(
                    "limit".to_owned(),
                    string(format!(
                        "requests_per_unit:{} unit:{}",
                        l.requests_per_unit,
                        Unit::try_from(l.unit)
                            .unwrap_or(Unit::Unknown)
                            .name()
                            .to_ascii_uppercase()
                    )),
                );
            }
            if let Some(h) = d.hits_addend {
                f.insert("hitsAddend".to_owned(), number(h.value));
            }
            object(f)
        })
        .collect();
    fields.insert("descriptors".to_owned(), list(descriptors));
    if req.hits_addend != 0 {
        fields.insert("hitsAddend".to_owned(), number(u64::from(req.hits_addend)));
    }
    let mut merged = serde_json::Map::new();
    for &i in passed {
        if let Some(Some(m)) = matched.get(i)
            && let Some(md) = &m.metadata
        {
            merge(&mut merged, md);
        }
    }
    if !merged.is_empty() {
        fields.insert(
            "metadata".to_owned(),
            json_to_value(&serde_json::Value::Object(merged)),
        );
    }
    Struct { fields }
}

fn merge(
    dest: &mut serde_json::Map<String, serde_json::Value>,
    src: &serde_json::Map<String, serde_json::Value>,
) {
    for (k, v) in src {
        match (dest.get_mut(k), v) {
            (Some(serde_json::Value::Object(d)), serde_json::Value::Object(s)) => merge(d, s),
            (Some(_), _) => {}
            (None, _) => {
                dest.insert(k.clone(), v.clone());
            }
        }
    }
}
