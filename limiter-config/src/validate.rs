//! The schema check: a positioned tree in, every rule understood or every
//! problem found out.
//!
//! The walk never stops at the first problem: each field is checked on its
//! own, a bad field is recorded and skipped, and the rule is dropped from
//! the result only at the end. Unknown fields are problems, not ignored (the
//! effect of serde's `deny_unknown_fields`, but reported all at once, with
//! the list of the fields allowed for that rule's algorithm). Numbers go
//! through the core's own constructors (on a `ManualClock`, so nothing runs),
//! so a quota the limiter cannot represent fails here with the core's
//! [`QuotaError`](limiter_core::QuotaError) text, never later.

use std::path::Path;
use std::time::Duration;

use http::Method;
use http::header::HeaderName;
use ipnet::IpNet;
use limiter_core::{
    AdaptiveLimiter, EwmaAimd, ManualClock, PercentileWindow, PriorityLimiter, Quota,
    SlidingWindow, WarmUpBuilder,
};
use limiter_redis::FailurePolicy;
use limiter_tower::Mode;

use crate::error::{ALGORITHMS, ConfigError, Problem};
use crate::routes::{ambiguous, template_of};
use crate::schema::{
    AdaptivePolicySpec, Algorithm, BackendSpec, DEFAULT_MAX_DELAY, DEFAULT_MAX_KEYS, HeaderSpec,
    KeyPart, KeySpec, MatchSpec, PathMatch, RedisSpec, RuleSpec,
};
use crate::source::{Node, Pos, Value};
use crate::units::{Rate, parse_duration};

const COMMON: &[&str] = &[
    "algorithm",
    "key",
    "per_ip",
    "match",
    "mode",
    "max_delay",
    "backend",
    "redis",
    "allowlist",
    "trusted_proxies",
    "headers",
    "max_keys",
];

/// The fields each algorithm allows, beyond [`COMMON`].
fn fields_of(algorithm: &str) -> &'static [&'static str] {
    match algorithm {
        "token_bucket" | "leaky_bucket" => &["rate", "burst"],
        "sliding_window" => &["limit", "window"],
        "warm_up" => &["rate", "warm_up", "cold_factor"],
        "adaptive" => &["policy", "target_latency", "min_rate", "max_rate", "burst"],
        "priority" => &["rate", "burst", "classes", "class_header"],
        _ => &[],
    }
}

/// Every field name any rule may have, for the unknown-field message of a
/// rule whose algorithm is itself unknown.
const ALL_FIELDS: &[&str] = &[
    "algorithm",
    "key",
    "per_ip",
    "match",
    "mode",
    "max_delay",
    "backend",
    "redis",
    "allowlist",
    "trusted_proxies",
    "headers",
    "max_keys",
    "rate",
    "burst",
    "limit",
    "window",
    "warm_up",
    "cold_factor",
    "policy",
    "target_latency",
    "min_rate",
    "max_rate",
    "classes",
    "class_header",
];

/// Collects the problems of one file.
struct Check<'a> {
    file: &'a Path,
    errors: Vec<ConfigError>,
}

impl Check<'_> {
    fn push(&mut self, pos: Pos, rule: Option<&str>, field: Option<&str>, problem: Problem) {
        self.errors.push(ConfigError {
            file: self.file.to_path_buf(),
            pos,
            rule: rule.map(str::to_owned),
            field: field.map(str::to_owned),
            problem,
        });
    }
}

/// The fields of one table, and which of them were read.
struct Table<'n> {
    entries: &'n [(String, Pos, Node)],
    pos: Pos,
}

impl<'n> Table<'n> {
    fn get(&self, name: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|(k, _, _)| k == name)
            .map(|(_, _, n)| n)
    }
}

/// Checks the tree of `file`; the rules in file order, or every problem.
pub(crate) fn validate(file: &Path, root: &Node) -> Result<Vec<RuleSpec>, Vec<ConfigError>> {
    let mut check = Check {
        file,
        errors: Vec::new(),
    };
    let mut rules = Vec::new();
    let mut match_pos = Vec::new();
    match &root.value {
        Value::Map(entries) => {
            for (key, pos, _) in entries {
                if key != "rate_limits" {
                    let problem = Problem::UnknownField {
                        found: key.clone(),
                        expected: vec!["rate_limits"],
                    };
                    check.push(*pos, None, Some(key), problem);
                }
            }
            match entries.iter().find(|(k, _, _)| k == "rate_limits") {
                None => check.push(root.pos, None, Some("rate_limits"), Problem::MissingField),
                Some((_, _, limits)) => match &limits.value {
                    Value::Map(rule_entries) => {
                        for (name, pos, node) in rule_entries {
                            if let Some((rule, mpos)) = rule(&mut check, name, *pos, node) {
                                rules.push(rule);
                                match_pos.push(mpos);
                            }
                        }
                    }
                    // An empty `rate_limits:` in YAML: no rules.
                    Value::Null => {}
                    other => check.push(
                        limits.pos,
                        None,
                        Some("rate_limits"),
                        wrong("a table of rules by name", other),
                    ),
                },
            }
        }
        Value::Null => check.push(root.pos, None, Some("rate_limits"), Problem::MissingField),
        other => check.push(
            root.pos,
            None,
            None,
            wrong("a table with `rate_limits`", other),
        ),
    }
    // Two rules that match the same requests, reported at the later one.
    for (j, later) in rules.iter().enumerate() {
        for earlier in &rules[..j] {
            if let (Some(a), Some(b)) = (&earlier.matcher, &later.matcher)
                && let Some(overlap) = ambiguous(a, b)
            {
                let problem = Problem::AmbiguousMatch {
                    other: earlier.name.clone(),
                    overlap,
                };
                check.push(match_pos[j], Some(&later.name), Some("match"), problem);
            }
        }
    }
    if check.errors.is_empty() {
        Ok(rules)
    } else {
        check.errors.sort_by_key(|e| e.pos);
        Err(check.errors)
    }
}

fn wrong(expected: &'static str, found: &Value) -> Problem {
    Problem::WrongType {
        expected,
        found: found.kind(),
    }
}

/// One rule; `None` if any of its fields has a problem (all recorded).
fn rule(check: &mut Check<'_>, name: &str, pos: Pos, node: &Node) -> Option<(RuleSpec, Pos)> {
    let before = check.errors.len();
    let header_safe = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| (b.is_ascii_graphic() && b != b'"' && b != b'\\') || b == b' ');
    if !header_safe {
        let problem = Problem::InvalidValue {
            reason: format!("the rule name {name:?} cannot go into a RateLimit header"),
            expected: "1 to 64 visible ASCII characters other than '\"' and '\\'".into(),
        };
        check.push(pos, Some(name), None, problem);
    }
    let Value::Map(entries) = &node.value else {
        check.push(
            node.pos,
            Some(name),
            None,
            wrong("a table of fields", &node.value),
        );
        return None;
    };
    let t = Table {
        entries,
        pos: node.pos,
    };
    let mut f = Fields { check, name, t: &t };

    let algorithm_name = match t.get("algorithm") {
        None => {
            f.err(pos, "algorithm", Problem::MissingField);
            None
        }
        Some(n) => match f.string(n, "algorithm") {
            Some(a) if ALGORITHMS.contains(&a) => Some(a),
            Some(a) => {
                let found = a.to_owned();
                f.err(n.pos, "algorithm", Problem::UnknownAlgorithm { found });
                None
            }
            None => None,
        },
    };
    // Unknown fields: against this algorithm's list when it is known.
    let allowed: Vec<&'static str> = match algorithm_name {
        Some(a) => COMMON.iter().chain(fields_of(a)).copied().collect(),
        None => ALL_FIELDS.to_vec(),
    };
    for (key, kpos, _) in entries {
        if !allowed.contains(&key.as_str()) {
            let problem = Problem::UnknownField {
                found: key.clone(),
                expected: allowed.clone(),
            };
            f.err(*kpos, key, problem);
        }
    }

    let algorithm = algorithm_name.and_then(|a| f.algorithm(a));
    let key = f.key();
    let (matcher, match_pos) = f.matcher();
    let mode = f.mode(algorithm_name == Some("leaky_bucket"));
    let backend = f.backend(algorithm.as_ref());
    let allowlist = f.cidrs("allowlist");
    let trusted_proxies = f.cidrs("trusted_proxies");
    let headers = f.headers();
    let max_keys = match t.get("max_keys") {
        None => Some(DEFAULT_MAX_KEYS),
        Some(n) => f
            .positive(n, "max_keys")
            .and_then(|v| usize::try_from(v).ok()),
    };
    if let (Some(a), Some(k)) = (&algorithm, &key)
        && !k.is_global()
        && !matches!(
            a,
            Algorithm::TokenBucket { .. } | Algorithm::LeakyBucket { .. }
        )
    {
        let problem = Problem::InvalidValue {
            reason: format!("a keyed `{}` rule is not supported", a.name()),
            expected:
                "`key: global` here, or algorithm token_bucket or leaky_bucket for a key per client"
                    .into(),
        };
        let at = t.get("key").or(t.get("per_ip")).map_or(pos, |n| n.pos);
        f.err(at, "key", problem);
    }
    if f.check.errors.len() > before {
        return None;
    }
    let spec = RuleSpec {
        name: name.to_owned(),
        pos,
        algorithm: algorithm?,
        key: key?,
        matcher,
        mode: mode?,
        backend: backend?,
        allowlist: allowlist?,
        trusted_proxies: trusted_proxies?,
        headers: headers?,
        max_keys: max_keys?,
    };
    Some((spec, match_pos))
}

/// The reader of one rule's fields.
struct Fields<'c, 'a, 'n> {
    check: &'c mut Check<'a>,
    name: &'c str,
    t: &'c Table<'n>,
}

impl<'n> Fields<'_, '_, 'n> {
    fn err(&mut self, pos: Pos, field: &str, problem: Problem) {
        self.check.push(pos, Some(self.name), Some(field), problem);
    }

    fn string<'v>(&mut self, n: &'v Node, field: &str) -> Option<&'v str> {
        match &n.value {
            Value::Str(s) => Some(s),
            other => {
                self.err(n.pos, field, wrong("a string", other));
                None
            }
        }
    }

    /// A whole number ≥ 1.
    fn positive(&mut self, n: &Node, field: &str) -> Option<u64> {
        match n.value {
            Value::Int(i) if i >= 1 => match u64::try_from(i) {
                Ok(v) => Some(v),
                Err(_) => {
                    self.err(n.pos, field, too_large());
                    None
                }
            },
            Value::Int(0) => {
                self.err(n.pos, field, Problem::ZeroBurst);
                None
            }
            Value::Int(i) => {
                let problem = Problem::InvalidValue {
                    reason: format!("{i} is negative"),
                    expected: "a whole number of at least 1".into(),
                };
                self.err(n.pos, field, problem);
                None
            }
            ref other => {
                self.err(n.pos, field, wrong("a whole number of at least 1", other));
                None
            }
        }
    }

    fn u32_field(&mut self, field: &str) -> Option<Option<u32>> {
        let Some(n) = self.t.get(field) else {
            return Some(None);
        };
        let v = self.positive(n, field)?;
        match u32::try_from(v) {
            Ok(v) => Some(Some(v)),
            Err(_) => {
                self.err(n.pos, field, too_large());
                None
            }
        }
    }

    fn required(&mut self, field: &str) -> Option<&'n Node> {
        let n = self.t.get(field);
        if n.is_none() {
            let pos = self.t.pos;
            self.err(pos, field, Problem::MissingField);
        }
        n
    }

    fn rate(&mut self, field: &str) -> Option<Rate> {
        let n = self.required(field)?;
        let rate = match &n.value {
            Value::Int(i) if *i <= 0 => Err(if *i == 0 {
                "0 permits admit nothing".to_owned()
            } else {
                format!("{i} is negative")
            }),
            Value::Int(i) => u32::try_from(*i)
                .map(|permits| Rate::Count {
                    permits,
                    per: Duration::from_secs(1),
                })
                .map_err(|_| format!("{i} permits is more than 4294967295")),
            Value::Float(r) if r.is_nan() || *r <= 0.0 || !r.is_finite() => {
                Err(format!("{r} is not a finite number above 0"))
            }
            Value::Float(r) => Ok(Rate::PerSecond(*r)),
            Value::Str(s) => s.parse(),
            other => {
                let problem = wrong("a number per second or a string such as \"100/s\"", other);
                self.err(n.pos, field, problem);
                return None;
            }
        };
        match rate {
            Ok(r) => Some(r),
            Err(reason) => {
                self.err(n.pos, field, Problem::InvalidRate { reason });
                None
            }
        }
    }

    fn duration(&mut self, field: &str) -> Option<Option<(Duration, Pos)>> {
        let Some(n) = self.t.get(field) else {
            return Some(None);
        };
        let s = self.string(n, field)?;
        match parse_duration(s) {
            Ok(d) => Some(Some((d, n.pos))),
            Err(reason) => {
                self.err(n.pos, field, Problem::InvalidDuration { reason });
                None
            }
        }
    }

    /// The quota of `rate` with `burst` (default 1), or the core's error at
    /// the field that caused it.
    fn quota(&mut self) -> Option<(Rate, Quota)> {
        let rate = self.rate("rate");
        let burst = self.u32_field("burst");
        let (rate, burst) = (rate?, burst?);
        let rate_pos = self.t.get("rate").map_or(self.t.pos, |n| n.pos);
        let quota = match rate.quota() {
            Ok(q) => q,
            Err(e) => {
                self.err(rate_pos, "rate", Problem::Quota(e));
                return None;
            }
        };
        match quota.with_burst(burst.unwrap_or(1)) {
            Ok(q) => Some((rate, q)),
            Err(e) => {
                let pos = self.t.get("burst").map_or(rate_pos, |n| n.pos);
                self.err(pos, "burst", Problem::Quota(e));
                None
            }
        }
    }

    fn core_error(&mut self, field: &str, e: limiter_core::QuotaError) {
        let pos = self.t.get(field).map_or(self.t.pos, |n| n.pos);
        self.err(pos, field, Problem::Quota(e));
    }

    fn algorithm(&mut self, name: &str) -> Option<Algorithm> {
        match name {
            "token_bucket" => self
                .quota()
                .map(|(rate, quota)| Algorithm::TokenBucket { rate, quota }),
            "leaky_bucket" => self
                .quota()
                .map(|(rate, quota)| Algorithm::LeakyBucket { rate, quota }),
            "sliding_window" => {
                let limit = self
                    .required("limit")
                    .and_then(|n| self.positive(n, "limit"));
                let window = self.required("window").and(self.duration("window"));
                let limit = match u32::try_from(limit?) {
                    Ok(l) => l,
                    Err(_) => {
                        let pos = self.t.get("limit").map_or(self.t.pos, |n| n.pos);
                        self.err(pos, "limit", too_large());
                        return None;
                    }
                };
                let (window, _) = window??;
                if let Err(e) = SlidingWindow::with_clock(limit, window, ManualClock::new()) {
                    self.core_error("window", e);
                    return None;
                }
                Some(Algorithm::SlidingWindow { limit, window })
            }
            "warm_up" => {
                let quota = self.quota();
                let warm_up = self.required("warm_up").and(self.duration("warm_up"));
                let cold_factor = match self.t.get("cold_factor") {
                    None => Some(3.0),
                    Some(n) => self.number(n, "cold_factor"),
                };
                let ((rate, quota), (warm_up, _), cold_factor) = (quota?, warm_up??, cold_factor?);
                let built = WarmUpBuilder::with_clock(quota, warm_up, ManualClock::new())
                    .cold_factor(cold_factor)
                    .build();
                if let Err(e) = built {
                    let field = match e {
                        limiter_core::QuotaError::InvalidParameter { name, .. }
                            if name.contains("cold") =>
                        {
                            "cold_factor"
                        }
                        _ => "warm_up",
                    };
                    self.core_error(field, e);
                    return None;
                }
                Some(Algorithm::WarmUp {
                    rate,
                    quota,
                    warm_up,
                    cold_factor,
                })
            }
            "adaptive" => self.adaptive(),
            "priority" => self.priority(),
            _ => None,
        }
    }

    fn number(&mut self, n: &Node, field: &str) -> Option<f64> {
        match n.value {
            Value::Float(f) => Some(f),
            Value::Int(i) => Some(i as f64),
            ref other => {
                self.err(n.pos, field, wrong("a number", other));
                None
            }
        }
    }

    fn adaptive(&mut self) -> Option<Algorithm> {
        let target = self
            .required("target_latency")
            .and(self.duration("target_latency"));
        let policy = match self.t.get("policy") {
            None => Some("ewma_aimd"),
            Some(n) => match self.string(n, "policy") {
                Some(p @ ("ewma_aimd" | "percentile")) => Some(p),
                Some(other) => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown adaptive policy `{other}`"),
                        expected: "ewma_aimd or percentile".into(),
                    };
                    self.err(n.pos, "policy", problem);
                    None
                }
                None => None,
            },
        };
        let min = self.rate("min_rate");
        let max = self.rate("max_rate");
        let burst = self.u32_field("burst");
        let ((target, _), policy, min, max, burst) = (target??, policy?, min?, max?, burst?);
        let burst = burst.unwrap_or(1);
        let (min_rate, max_rate) = (min.per_second(), max.per_second());
        let clock = ManualClock::new();
        let built = match policy {
            "percentile" => AdaptiveLimiter::builder(PercentileWindow::with_threshold(target))
                .clock(clock)
                .min_rate(min_rate)
                .max_rate(max_rate)
                .burst(burst)
                .build()
                .map(|_| ()),
            _ => AdaptiveLimiter::builder(EwmaAimd::new(target))
                .clock(clock)
                .min_rate(min_rate)
                .max_rate(max_rate)
                .burst(burst)
                .build()
                .map(|_| ()),
        };
        if let Err(e) = built {
            self.core_error("min_rate", e);
            return None;
        }
        let policy = if policy == "percentile" {
            AdaptivePolicySpec::Percentile { target }
        } else {
            AdaptivePolicySpec::EwmaAimd { target }
        };
        Some(Algorithm::Adaptive {
            policy,
            min_rate,
            max_rate,
            burst,
        })
    }

    fn priority(&mut self) -> Option<Algorithm> {
        let quota = self.quota();
        let n = self.required("classes")?;
        let Value::Map(entries) = &n.value else {
            self.err(
                n.pos,
                "classes",
                wrong("a table of class names to shares", &n.value),
            );
            return None;
        };
        let mut classes = Vec::new();
        for (name, _, share) in entries {
            let field = format!("classes.{name}");
            classes.push((name.clone(), self.number(share, &field)?));
        }
        let class_header = match self.t.get("class_header") {
            None => Some(None),
            Some(n) => {
                self.string(n, "class_header")
                    .and_then(|h| match HeaderName::try_from(h.trim()) {
                        Ok(h) => Some(Some(h)),
                        Err(_) => {
                            let problem = Problem::InvalidValue {
                                reason: format!("`{h}` is not a valid header name"),
                                expected: "a header name such as x-priority".into(),
                            };
                            self.err(n.pos, "class_header", problem);
                            None
                        }
                    })
            }
        };
        let ((rate, quota), class_header) = (quota?, class_header?);
        let shares: Vec<f64> = classes.iter().map(|(_, s)| *s).collect();
        if let Err(e) = PriorityLimiter::with_clock(quota, &shares, ManualClock::new()) {
            self.core_error("classes", e);
            return None;
        }
        Some(Algorithm::Priority {
            rate,
            quota,
            classes,
            class_header,
        })
    }

    fn key(&mut self) -> Option<KeySpec> {
        let per_ip = match self.t.get("per_ip") {
            None => false,
            Some(n) => match n.value {
                Value::Bool(b) => b,
                ref other => {
                    self.err(n.pos, "per_ip", wrong("true or false", other));
                    return None;
                }
            },
        };
        let Some(n) = self.t.get("key") else {
            let parts = if per_ip {
                vec![KeyPart::Ip]
            } else {
                Vec::new()
            };
            return Some(KeySpec { parts });
        };
        let items: Vec<&Node> = match &n.value {
            Value::Str(_) => vec![n],
            Value::Seq(items) if !items.is_empty() => items.iter().collect(),
            other => {
                let problem = wrong("a key kind or a non-empty list of key parts", other);
                self.err(n.pos, "key", problem);
                return None;
            }
        };
        let mut parts = Vec::new();
        let mut ok = true;
        for item in items {
            let Some(s) = self.string(item, "key") else {
                ok = false;
                continue;
            };
            let part = match s.split_once(':') {
                _ if s == "global" && n.pos == item.pos => None,
                _ if s == "ip" => Some(KeyPart::Ip),
                _ if s == "route" => Some(KeyPart::Route),
                Some(("header", name)) => match HeaderName::try_from(name.trim()) {
                    Ok(h) => Some(KeyPart::Header(h)),
                    Err(_) => {
                        let problem = Problem::InvalidValue {
                            reason: format!("`{name}` is not a valid header name"),
                            expected: "header:NAME with a header name such as x-api-key".into(),
                        };
                        self.err(item.pos, "key", problem);
                        ok = false;
                        continue;
                    }
                },
                _ => {
                    let found = s.to_owned();
                    self.err(item.pos, "key", Problem::UnknownKeyKind { found });
                    ok = false;
                    continue;
                }
            };
            parts.extend(part);
        }
        if per_ip && parts != [KeyPart::Ip] && ok {
            let problem = Problem::InvalidValue {
                reason: "`per_ip: true` contradicts this `key`".into(),
                expected: "either `per_ip: true` or `key`, not both".into(),
            };
            self.err(n.pos, "key", problem);
            return None;
        }
        ok.then_some(KeySpec { parts })
    }

    fn matcher(&mut self) -> (Option<MatchSpec>, Pos) {
        let Some(n) = self.t.get("match") else {
            return (None, self.t.pos);
        };
        let Value::Map(entries) = &n.value else {
            let problem = wrong("a table with `route` or `prefix`, and `methods`", &n.value);
            self.err(n.pos, "match", problem);
            return (None, n.pos);
        };
        let m = Table {
            entries,
            pos: n.pos,
        };
        for (key, kpos, _) in entries {
            if !["route", "prefix", "methods"].contains(&key.as_str()) {
                let problem = Problem::UnknownField {
                    found: key.clone(),
                    expected: vec!["route", "prefix", "methods"],
                };
                self.err(*kpos, &format!("match.{key}"), problem);
            }
        }
        let path = match (m.get("route"), m.get("prefix")) {
            (Some(r), None) => self.path(r, "match.route").map(PathMatch::Route),
            (None, Some(p)) => self.path(p, "match.prefix").map(|p| {
                let trimmed = p.trim_end_matches('/');
                PathMatch::Prefix(if trimmed.is_empty() {
                    "/".into()
                } else {
                    trimmed.into()
                })
            }),
            (r, _) => {
                let problem = Problem::InvalidValue {
                    reason: if r.is_some() {
                        "both `route` and `prefix`".into()
                    } else {
                        "neither `route` nor `prefix`".into()
                    },
                    expected:
                        "exactly one of `route` (a template such as /orders/{id}) and `prefix`"
                            .into(),
                };
                self.err(n.pos, "match", problem);
                None
            }
        };
        let mut methods = Vec::new();
        if let Some(ms) = m.get("methods") {
            match &ms.value {
                Value::Seq(items) => {
                    for item in items {
                        let Some(s) = self.string(item, "match.methods") else {
                            continue;
                        };
                        match Method::from_bytes(s.to_ascii_uppercase().as_bytes()) {
                            Ok(method) => methods.push(method),
                            Err(_) => {
                                let problem = Problem::InvalidValue {
                                    reason: format!("`{s}` is not an HTTP method"),
                                    expected: "methods such as GET, POST, PUT, DELETE".into(),
                                };
                                self.err(item.pos, "match.methods", problem);
                            }
                        }
                    }
                }
                other => self.err(ms.pos, "match.methods", wrong("a list of methods", other)),
            }
        }
        (path.map(|path| MatchSpec { path, methods }), n.pos)
    }

    fn path(&mut self, n: &Node, field: &str) -> Option<String> {
        let s = self.string(n, field)?;
        if !s.starts_with('/') || template_of(s).is_none() {
            let problem = Problem::InvalidValue {
                reason: format!("`{s}` is not a path"),
                expected: "a path starting with `/`, parameters as {name} and a last {*rest}"
                    .into(),
            };
            self.err(n.pos, field, problem);
            return None;
        }
        Some(s.to_owned())
    }

    fn mode(&mut self, leaky: bool) -> Option<Mode> {
        let delay = match self.t.get("mode") {
            None => leaky,
            Some(n) => match self.string(n, "mode")? {
                "reject" => false,
                "delay" => true,
                other => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown mode `{other}`"),
                        expected: "reject or delay".into(),
                    };
                    self.err(n.pos, "mode", problem);
                    return None;
                }
            },
        };
        let max_delay = self.duration("max_delay")?;
        match (delay, max_delay) {
            (false, Some((_, pos))) => {
                let problem = Problem::InvalidValue {
                    reason: "`max_delay` has no effect in reject mode".into(),
                    expected: "`mode: delay` with it, or no `max_delay`".into(),
                };
                self.err(pos, "max_delay", problem);
                None
            }
            (false, None) => Some(Mode::Reject),
            (true, d) => Some(Mode::Delay {
                max_delay: d.map_or(DEFAULT_MAX_DELAY, |(d, _)| d),
            }),
        }
    }

    fn backend(&mut self, algorithm: Option<&Algorithm>) -> Option<BackendSpec> {
        let redis = match self.t.get("backend") {
            None => false,
            Some(n) => match self.string(n, "backend")? {
                "local" => false,
                "redis" => true,
                other => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown backend `{other}`"),
                        expected: "local or redis".into(),
                    };
                    self.err(n.pos, "backend", problem);
                    return None;
                }
            },
        };
        let section = self.t.get("redis");
        if !redis {
            if let Some(s) = section {
                let problem = Problem::InvalidValue {
                    reason: "a `redis` section on a local rule".into(),
                    expected: "`backend: redis` with it, or no `redis` section".into(),
                };
                self.err(s.pos, "redis", problem);
                return None;
            }
            return Some(BackendSpec::Local);
        }
        let section = self.required("redis")?;
        let Value::Map(entries) = &section.value else {
            self.err(
                section.pos,
                "redis",
                wrong("a table with `url`", &section.value),
            );
            return None;
        };
        let r = Table {
            entries,
            pos: section.pos,
        };
        const REDIS_FIELDS: &[&str] = &[
            "url",
            "key_prefix",
            "failure_policy",
            "local_share",
            "timeout",
        ];
        let mut ok = true;
        for (key, kpos, _) in entries {
            if !REDIS_FIELDS.contains(&key.as_str()) {
                let problem = Problem::UnknownField {
                    found: key.clone(),
                    expected: REDIS_FIELDS.to_vec(),
                };
                self.err(*kpos, &format!("redis.{key}"), problem);
                ok = false;
            }
        }
        let url = match r.get("url") {
            None => {
                self.err(section.pos, "redis.url", Problem::MissingField);
                None
            }
            Some(n) => self
                .string(n, "redis.url")
                .and_then(|u| match redis::Client::open(u) {
                    Ok(_) => Some(u.to_owned()),
                    Err(e) => {
                        let message = e.to_string();
                        self.err(n.pos, "redis.url", Problem::InvalidRedisUrl { message });
                        None
                    }
                }),
        };
        let key_prefix = match r.get("key_prefix") {
            None => Some(format!("limiter:{}", self.name)),
            Some(n) => self.string(n, "redis.key_prefix").map(str::to_owned),
        };
        let share = match r.get("local_share") {
            None => Some(1.0),
            Some(n) => match self.number(n, "redis.local_share") {
                Some(s) if s > 0.0 && s <= 1.0 => Some(s),
                Some(s) => {
                    let problem = Problem::InvalidValue {
                        reason: format!("a share of {s}"),
                        expected: "a share in (0, 1]: 1/instances".into(),
                    };
                    self.err(n.pos, "redis.local_share", problem);
                    None
                }
                None => None,
            },
        };
        let failure_policy = match r.get("failure_policy") {
            None => share.map(|share| FailurePolicy::Local { share }),
            Some(n) => match (self.string(n, "redis.failure_policy"), share) {
                (Some("local"), Some(share)) => Some(FailurePolicy::Local { share }),
                (Some("open"), _) => Some(FailurePolicy::Open),
                (Some("closed"), _) => Some(FailurePolicy::Closed),
                (Some("error"), _) => Some(FailurePolicy::Error),
                (Some(other), _) => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown failure policy `{other}`"),
                        expected: "local, open, closed or error".into(),
                    };
                    self.err(n.pos, "redis.failure_policy", problem);
                    None
                }
                _ => None,
            },
        };
        let timeout = match r.get("timeout") {
            None => Some(Duration::from_millis(100)),
            Some(n) => self
                .string(n, "redis.timeout")
                .and_then(|s| match parse_duration(s) {
                    Ok(d) if !d.is_zero() => Some(d),
                    Ok(_) => {
                        let reason = "a timeout of 0 fails every call".to_owned();
                        self.err(n.pos, "redis.timeout", Problem::InvalidDuration { reason });
                        None
                    }
                    Err(reason) => {
                        self.err(n.pos, "redis.timeout", Problem::InvalidDuration { reason });
                        None
                    }
                }),
        };
        match algorithm {
            Some(Algorithm::TokenBucket { quota, .. } | Algorithm::LeakyBucket { quota, .. })
                if !quota.period_nanos().is_multiple_of(1_000) =>
            {
                let problem = Problem::InvalidValue {
                        reason: format!(
                            "one permit every {} ns is not a whole number of microseconds, the unit Redis counts in",
                            quota.period_nanos()
                        ),
                        expected: "a rate whose period is whole microseconds (at most 1,000,000/s; 3/s is not, 4/s is)".into(),
                    };
                let pos = self.t.get("rate").map_or(self.t.pos, |n| n.pos);
                self.err(pos, "rate", problem);
                ok = false;
            }
            Some(Algorithm::TokenBucket { .. } | Algorithm::LeakyBucket { .. }) => {}
            Some(other) => {
                let problem = Problem::InvalidValue {
                    reason: format!("`{}` has no Redis backend", other.name()),
                    expected:
                        "`backend: local`, or algorithm token_bucket or leaky_bucket on Redis"
                            .into(),
                };
                let pos = self.t.get("backend").map_or(self.t.pos, |n| n.pos);
                self.err(pos, "backend", problem);
                ok = false;
            }
            None => {}
        }
        let spec = RedisSpec {
            url: url?,
            key_prefix: key_prefix?,
            failure_policy: failure_policy?,
            timeout: timeout?,
        };
        ok.then_some(BackendSpec::Redis(spec))
    }

    fn cidrs(&mut self, field: &str) -> Option<Vec<IpNet>> {
        let Some(n) = self.t.get(field) else {
            return Some(Vec::new());
        };
        let Value::Seq(items) = &n.value else {
            self.err(n.pos, field, wrong("a list of networks", &n.value));
            return None;
        };
        let mut nets = Vec::new();
        let mut ok = true;
        for item in items {
            let Some(s) = self.string(item, field) else {
                ok = false;
                continue;
            };
            let parsed = s
                .parse::<IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from));
            match parsed {
                Ok(net) => nets.push(net),
                Err(_) => {
                    let found = s.to_owned();
                    self.err(item.pos, field, Problem::InvalidCidr { found });
                    ok = false;
                }
            }
        }
        ok.then_some(nets)
    }

    fn headers(&mut self) -> Option<HeaderSpec> {
        let Some(n) = self.t.get("headers") else {
            return Some(HeaderSpec::Draft10);
        };
        match self.string(n, "headers")? {
            "draft10" => Some(HeaderSpec::Draft10),
            "legacy" => Some(HeaderSpec::Legacy),
            "none" => Some(HeaderSpec::None),
            other => {
                let problem = Problem::InvalidValue {
                    reason: format!("unknown header style `{other}`"),
                    expected: "draft10, legacy or none".into(),
                };
                self.err(n.pos, "headers", problem);
                None
            }
        }
    }
}

fn too_large() -> Problem {
    Problem::InvalidValue {
        reason: "too large".into(),
        expected: "at most 4294967295".into(),
    }
}
