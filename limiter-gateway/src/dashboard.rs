//! The live dashboard of the admin listener: `GET /` serves one
//! self-contained HTML page (no CDN, no build step: `dashboard/index.html`,
//! compiled into the binary), `GET /dashboard.json` the snapshot it polls.
//!
//! # What the snapshot holds, and where it comes from
//!
//! Per rule: its limit as the rules file states it, the keys in use where
//! the rule can count them, the totals of `rate_limit_allowed_total`,
//! `rate_limit_delayed_total`, `rate_limit_rejected_total` and
//! `rate_limit_shadow_rejected` read from the **same recorder `/metrics`
//! renders** at the moment of the request (summed over the rule's route
//! labels), so the page and `/metrics` never disagree; the samples of the
//! last [`HISTORY`] sampling intervals, from which the page draws the
//! per-second rates; and the top keys by rejections from a bounded
//! heavy-hitters summary (`limiter_keyed::TopKeys`) that the rules'
//! limiting path records into (`RuleSet::record_top_keys`, switched on by
//! the gateway with its admin listener); the keys a keyed rule holds now.
//!
//! # Memory
//!
//! Fixed: [`HISTORY`] samples of at most [`MAX_RULES`] rules (a rule past
//! it is not sampled; its totals still show in `/metrics`); each rule's
//! top-keys summary is 128 counters, held by the rule.
//! Recording a rejection takes a read lock on the rule table (shared by all
//! recorders; the write lock only when a rule is first seen) and one shard
//! of the rule's summary.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use limiter_config::RuleSet;

use limiter_tower::problem::write_json_string;

/// The page, compiled in.
pub(crate) const DASHBOARD_HTML: &str = include_str!("dashboard/index.html");

/// Samples kept per rule: 300, five minutes at one per second.
pub(crate) const HISTORY: usize = 300;
/// Rules the dashboard tracks.
pub(crate) const MAX_RULES: usize = 1_024;
/// Top keys listed per rule.
pub(crate) const TOP_LISTED: usize = 10;

/// The four decision counters of one rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// `rate_limit_allowed`.
    pub allowed: u64,
    /// `rate_limit_delayed`.
    pub delayed: u64,
    /// `rate_limit_rejected`.
    pub rejected: u64,
    /// `rate_limit_shadow_rejected`.
    pub shadow_rejected: u64,
}

/// What the dashboard shows of one rule besides its counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleView {
    /// The rule's name (the `limiter` label of its series).
    pub name: String,
    /// Its limit, as the rules file states it.
    pub limit: String,
    /// Keys in use, where the rule can count them.
    pub keys: Option<usize>,
    /// The keys with the most refusals, heaviest first: key text, count,
    /// and how much of the count may belong to keys evicted before it.
    pub top: Vec<(String, u64, u64)>,
}

/// The rules of `rules` in force, for [`Dashboard::snapshot_json`]: the
/// keys a keyed rule holds now, and its top keys by refusals as the rules'
/// limiting path recorded them (see `RuleSet::record_top_keys`).
pub(crate) fn rule_views(rules: &RuleSet) -> Vec<RuleView> {
    rules
        .snapshot()
        .rules()
        .map(|rule| RuleView {
            name: rule.spec().name.clone(),
            limit: rule.spec().algorithm.to_string(),
            keys: rule.keys_in_use(),
            top: rule
                .top_keys(TOP_LISTED)
                .into_iter()
                .map(|t| (t.key.to_string(), t.count, t.error))
                .collect(),
        })
        .collect()
}

/// The totals per rule (`limiter` label) of the four decision counters in
/// a Prometheus text (with or without the `_total` suffix).
pub(crate) fn counts_from_prometheus(text: &str) -> BTreeMap<String, Counts> {
    let mut out = BTreeMap::<String, Counts>::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let name = name.strip_suffix("_total").unwrap_or(name);
        let field: fn(&mut Counts) -> &mut u64 = match name {
            "rate_limit_allowed" => |c| &mut c.allowed,
            "rate_limit_delayed" => |c| &mut c.delayed,
            "rate_limit_rejected" => |c| &mut c.rejected,
            "rate_limit_shadow_rejected" => |c| &mut c.shadow_rejected,
            _ => continue,
        };
        let Some(rule) = label(labels, "limiter") else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        // Counters are whole numbers; `as` saturates a stray NaN to 0.
        let slot = field(out.entry(rule).or_default());
        *slot = slot.saturating_add(value as u64);
    }
    out
}

/// The value of `name="..."` in a Prometheus label set (escapes undone).
fn label(labels: &str, name: &str) -> Option<String> {
    let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
    let mut out = String::new();
    let mut chars = labels[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

/// One sample: the totals of every rule at an instant (ms since the epoch).
#[derive(Debug, Clone)]
struct Sample {
    at_ms: u64,
    counts: BTreeMap<String, Counts>,
}

/// The dashboard's state: the sample history and the top keys by
/// rejections per rule.
#[derive(Debug, Default)]
pub(crate) struct Dashboard {
    history: Mutex<VecDeque<Sample>>,
}

impl Dashboard {
    /// An empty dashboard.
    pub(crate) fn new() -> Dashboard {
        Dashboard::default()
    }

    /// Takes a sample of the totals in `metrics` (a Prometheus text) now.
    pub(crate) fn sample(&self, metrics: &str) {
        let mut counts = counts_from_prometheus(metrics);
        while counts.len() > MAX_RULES {
            counts.pop_last();
        }
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        if history.len() == HISTORY {
            history.pop_front();
        }
        history.push_back(Sample {
            at_ms: unix_ms(),
            counts,
        });
    }

    /// Samples `metrics()` every `every` until the task is aborted.
    pub(crate) fn spawn_sampler(
        self: Arc<Self>,
        every: Duration,
        metrics: impl Fn() -> String + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = limiter_async::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                self.sample(&metrics());
            }
        })
    }

    /// The snapshot the page polls, as JSON: `rules` with their totals in
    /// `metrics` now, their samples and their top keys.
    pub(crate) fn snapshot_json(&self, rules: &[RuleView], metrics: &str) -> String {
        let now = counts_from_prometheus(metrics);
        let history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = format!(
            "{{\"at_ms\":{},\"history\":{HISTORY},\"rules\":[",
            unix_ms()
        );
        for (i, rule) in rules.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let c = now.get(&rule.name).copied().unwrap_or_default();
            let keys = rule.keys.map_or("null".to_owned(), |k| k.to_string());
            out.push_str(&format!(
                "{{\"name\":{},\"limit\":{},\"keys\":{keys},{},\"samples\":[",
                json_string(&rule.name),
                json_string(&rule.limit),
                counts_json(c),
            ));
            for (j, s) in history.iter().enumerate() {
                let c = s.counts.get(&rule.name).copied().unwrap_or_default();
                if j > 0 {
                    out.push(',');
                }
                out.push_str(&format!(
                    "[{},{},{},{},{}]",
                    s.at_ms, c.allowed, c.delayed, c.rejected, c.shadow_rejected
                ));
            }
            out.push_str("],\"top\":[");
            for (j, (key, count, error)) in rule.top.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                out.push_str(&format!(
                    "{{\"key\":{},\"count\":{count},\"error\":{error}}}",
                    json_string(key),
                ));
            }
            out.push_str("]}");
        }
        out.push_str("]}");
        out
    }

    /// Answers `GET /` (the page) and `GET /dashboard.json`; `None` for any
    /// other path.
    pub(crate) fn answer(
        &self,
        path: &str,
        rules: &[RuleView],
        metrics: &str,
    ) -> Option<Response<Full<Bytes>>> {
        let (content_type, body) = match path {
            "/" | "/dashboard" => ("text/html; charset=utf-8", DASHBOARD_HTML.to_owned()),
            "/dashboard.json" => ("application/json", self.snapshot_json(rules, metrics)),
            _ => return None,
        };
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = StatusCode::OK;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        // The page loads nothing from elsewhere; say so to the browser.
        headers.insert(
            "content-security-policy",
            HeaderValue::from_static(
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
            ),
        );
        Some(response)
    }
}

/// `s` as a JSON string literal (the workspace's one escaper).
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_json_string(&mut out, s);
    out
}

fn counts_json(c: Counts) -> String {
    format!(
        "\"allowed\":{},\"delayed\":{},\"rejected\":{},\"shadow_rejected\":{}",
        c.allowed, c.delayed, c.rejected, c.shadow_rejected
    )
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "\
# TYPE rate_limit_allowed counter
rate_limit_allowed{limiter=\"api\",route=\"/a\"} 7
rate_limit_allowed{limiter=\"api\",route=\"/b\"} 3
rate_limit_rejected{limiter=\"api\"} 5
rate_limit_delayed_total{limiter=\"slow \\\"lane\\\"\"} 2
rate_limit_shadow_rejected{limiter=\"api\"} 4
rate_limit_wait_seconds_sum{limiter=\"api\"} 0.5
gateway_requests{upstream=\"x\"} 99
";

    #[test]
    fn totals_are_summed_per_rule_over_routes() {
        let counts = counts_from_prometheus(METRICS);
        assert_eq!(
            counts["api"],
            Counts {
                allowed: 10,
                delayed: 0,
                rejected: 5,
                shadow_rejected: 4
            }
        );
        assert_eq!(counts["slow \"lane\""].delayed, 2);
        assert_eq!(counts.len(), 2);
    }

    #[test]
    fn the_snapshot_carries_totals_samples_and_top_keys() {
        let d = Dashboard::new();
        d.sample(METRICS);
        let rules = [RuleView {
            name: "api".into(),
            limit: "10/s burst 5".into(),
            keys: Some(2),
            top: vec![("10.0.0.\"9\"".into(), 3, 0), ("10.0.0.1".into(), 1, 0)],
        }];
        let json = d.snapshot_json(&rules, METRICS);
        assert!(json.contains("\"name\":\"api\",\"limit\":\"10/s burst 5\",\"keys\":2,\"allowed\":10,\"delayed\":0,\"rejected\":5,\"shadow_rejected\":4,\"samples\":[["), "{json}");
        assert!(json.contains(",10,0,5,4]],\"top\":[{\"key\":\"10.0.0.\\\"9\\\"\",\"count\":3,\"error\":0},{\"key\":\"10.0.0.1\",\"count\":1,\"error\":0}]"), "{json}");
    }

    #[test]
    fn history_and_rules_are_bounded() {
        let d = Dashboard::new();
        for _ in 0..HISTORY + 5 {
            d.sample(METRICS);
        }
        assert_eq!(d.history.lock().unwrap().len(), HISTORY);
        let many: String = (0..MAX_RULES + 10)
            .map(|i| format!("rate_limit_allowed_total{{limiter=\"r{i}\"}} 1\n"))
            .collect();
        d.sample(&many);
        assert_eq!(
            d.history.lock().unwrap().back().unwrap().counts.len(),
            MAX_RULES
        );
        assert!(d.answer("/nope", &[], "").is_none());
        let page = d.answer("/", &[], "").unwrap();
        assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    }
}
