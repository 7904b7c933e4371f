//! The per-rule counters envoyproxy/ratelimit keeps (`total_hits`,
//! `over_limit`, `near_limit`, `within_limit`, `shadow_mode`), computed as
//! theirs are from the count before and after a request's hits
//! ([`Delta::of`], a pure function), and sent to two sinks:
//!
//! * Prometheus through the `metrics` facade:
//!   `ratelimit_rate_limit_<stat>_total{domain, rule}`, where `rule` is the
//!   rule's configured key (`domain.key_value.key2`, or `override` for a
//!   request's `limit` override): bounded by the
//!   config, never a request value (a `detailed_metric` or `value_to_metric`
//!   name goes to statsd only), so no IP address reaches a label set.
//! * statsd (`USE_STATSD=true`), under their exact names:
//!   `ratelimit.service.rate_limit.<stats key>.<stat>` with the key
//!   sanitized as theirs (`:` and `|` to `_`, the dots of IPv4 addresses to
//!   `_`), aggregated and flushed every `STATS_FLUSH_INTERVAL` as
//!   `name:value|c` lines (see `statsd`).

use crate::config::Rule;
pub use crate::statsd::Statsd;

/// The counter increments of one descriptor decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delta {
    /// Hits asked for.
    pub total_hits: u64,
    /// Hits over the limit.
    pub over_limit: u64,
    /// Hits within the limit but past `NEAR_LIMIT_RATIO` of it.
    pub near_limit: u64,
    /// Hits within the limit.
    pub within_limit: u64,
    /// Hits over the limit that shadow mode let through.
    pub shadow_mode: u64,
}

impl Delta {
    /// Their accounting (`base_limiter.go`) for `hits` on a limit of
    /// `limit` that held `before` (so `before + hits` after), `over` as
    /// decided, with `near_ratio` (default 0.8).
    pub fn of(
        before: u64,
        hits: u64,
        limit: u32,
        over: bool,
        shadow: bool,
        near_ratio: f32,
    ) -> Delta {
        let limit = u64::from(limit);
        let after = before.saturating_add(hits);
        // Their float32 arithmetic, floored.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let near = (f64::from(limit as f32 * near_ratio)).floor().max(0.0) as u64;
        let mut d = Delta {
            total_hits: hits,
            ..Delta::default()
        };
        if over {
            let over_hits = if before >= limit {
                hits
            } else {
                after.saturating_sub(limit)
            };
            d.over_limit = over_hits;
            if before < limit {
                d.near_limit = limit.saturating_sub(near.max(before));
            }
            if shadow {
                d.shadow_mode = over_hits;
            }
        } else {
            if after > near {
                d.near_limit = if before >= near { hits } else { after - near };
            }
            d.within_limit = hits;
        }
        d
    }
}

/// Their stat-name sanitizer: `:` and `|` become `_`, and so do the dots of
/// anything shaped like an IPv4 address.
pub fn sanitize(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| if c == ':' || c == '|' { '_' } else { c })
        .collect();
    let b = replaced.as_bytes();
    let mut out = replaced.clone().into_bytes();
    let mut i = 0;
    while i < b.len() {
        if let Some(len) = ipv4_at(&b[i..]) {
            for byte in &mut out[i..i + len] {
                if *byte == b'.' {
                    *byte = b'_';
                }
            }
            i += len;
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or(replaced)
}

/// The length of a `\d{1,3}(\.\d{1,3}){3}` match at the start of `b`
/// (leftmost-first, greedy, as Go's regexp finds it).
fn ipv4_at(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    for group in 0..4 {
        if group > 0 {
            if b.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
        let start = i;
        while i < b.len() && i - start < 3 && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    Some(i)
}

/// The Prometheus names of [`Delta`]'s fields, in its order.
const COUNTERS: [&str; 5] = [
    "ratelimit_rate_limit_total_hits_total",
    "ratelimit_rate_limit_over_limit_total",
    "ratelimit_rate_limit_near_limit_total",
    "ratelimit_rate_limit_within_limit_total",
    "ratelimit_rate_limit_shadow_mode_total",
];

/// Their statsd names of [`Delta`]'s fields, in its order.
const STATSD_STATS: [&str; 5] = [
    "total_hits",
    "over_limit",
    "near_limit",
    "within_limit",
    "shadow_mode",
];

/// Where decisions are counted.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    statsd: Option<Statsd>,
}

impl Recorder {
    /// A recorder for Prometheus, and statsd when given.
    pub fn new(statsd: Option<Statsd>) -> Recorder {
        Recorder { statsd }
    }

    /// Counts one descriptor decision of `rule` in `domain` (the rule's own
    /// domain).
    pub fn record(&self, domain: &str, rule: &Rule, stats_key: &str, d: Delta) {
        let counters = rule.counters.0.get_or_init(|| {
            let labels = [
                ("domain", domain.to_owned()),
                ("rule", rule.full_key.clone()),
            ];
            COUNTERS.map(|name| metrics::counter!(name, &labels))
        });
        let values = [
            d.total_hits,
            d.over_limit,
            d.near_limit,
            d.within_limit,
            d.shadow_mode,
        ];
        for (counter, v) in counters.iter().zip(values) {
            if v > 0 {
                counter.increment(v);
            }
        }
        if let Some(s) = &self.statsd {
            let base = format!("ratelimit.service.rate_limit.{}", sanitize(stats_key));
            for (stat, v) in STATSD_STATS.iter().zip(values) {
                s.add(&format!("{base}.{stat}"), v);
            }
        }
    }

    /// Counts a service-level event (`config_load_success`,
    /// `global_shadow_mode`, `call.should_rate_limit.redis_error`…), under
    /// `ratelimit.service.<name>` in statsd and `ratelimit_service_<name>_total`
    /// in Prometheus (dots as `_`).
    pub fn service(&self, name: &str) {
        let prom = format!("ratelimit_service_{}_total", name.replace('.', "_"));
        metrics::counter!(prom).increment(1);
        if let Some(s) = &self.statsd {
            s.add(&format!("ratelimit.service.{name}"), 1);
        }
    }

    /// Counts a request for an unknown domain
    /// (`ratelimit.service.rate_limit.<domain>.domain_not_found`).
    pub fn domain_not_found(&self, domain: &str) {
        metrics::counter!("ratelimit_domain_not_found_total").increment(1);
        if let Some(s) = &self.statsd {
            s.add(
                &format!(
                    "ratelimit.service.rate_limit.{}.domain_not_found",
                    sanitize(domain)
                ),
                1,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn their_accounting() {
        // limit 10, near at 8: a hit taking the count from 8 to 9 is near.
        assert_eq!(
            Delta::of(8, 1, 10, false, false, 0.8),
            Delta {
                total_hits: 1,
                near_limit: 1,
                within_limit: 1,
                ..Delta::default()
            }
        );
        // 3 hits from 6: 9 > 8, one of them near (9 - 8).
        assert_eq!(Delta::of(6, 3, 10, false, false, 0.8).near_limit, 1);
        // Over from 9 by 3: 2 over (12 - 10), near 10 - max(8, 9) = 1.
        assert_eq!(
            Delta::of(9, 3, 10, true, true, 0.8),
            Delta {
                total_hits: 3,
                over_limit: 2,
                near_limit: 1,
                shadow_mode: 2,
                ..Delta::default()
            }
        );
        // Already full: every hit is over.
        assert_eq!(Delta::of(10, 2, 10, true, false, 0.8).over_limit, 2);
    }

    #[test]
    fn a_rule_counts_into_its_series_and_shows_zeros() {
        use crate::proto::Entry;
        let rules = crate::RuleSet::from_files(vec![(
            "d.yaml".into(),
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10}\n"
                .into(),
        )])
        .unwrap();
        let entry = Entry {
            key: "k".into(),
            value: "v".into(),
        };
        let m = rules.find("d", &[entry], None).unwrap();
        let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = prometheus.handle();
        metrics::with_local_recorder(&prometheus, || {
            let r = Recorder::new(None);
            r.record(
                "d",
                &m.rule,
                &m.stats_key,
                Delta::of(0, 2, 10, false, false, 0.8),
            );
            r.record(
                "d",
                &m.rule,
                &m.stats_key,
                Delta::of(9, 3, 10, true, false, 0.8),
            );
        });
        let scrape = handle.render();
        for line in [
            r#"ratelimit_rate_limit_total_hits_total{domain="d",rule="d.k"} 5"#,
            r#"ratelimit_rate_limit_within_limit_total{domain="d",rule="d.k"} 2"#,
            r#"ratelimit_rate_limit_over_limit_total{domain="d",rule="d.k"} 2"#,
            r#"ratelimit_rate_limit_near_limit_total{domain="d",rule="d.k"} 1"#,
            r#"ratelimit_rate_limit_shadow_mode_total{domain="d",rule="d.k"} 0"#,
        ] {
            assert!(scrape.contains(line), "{line} not in {scrape}");
        }
    }

    #[test]
    fn sanitizes_as_theirs() {
        assert_eq!(
            sanitize("d.remote_address_10.0.0.1"),
            "d.remote_address_10_0_0_1"
        );
        assert_eq!(sanitize("d.k_a:b|c"), "d.k_a_b_c");
        assert_eq!(sanitize("d.version_1.2.3"), "d.version_1.2.3");
        assert_eq!(sanitize("x1234.5.6.7"), "x1234_5_6_7");
    }
}
