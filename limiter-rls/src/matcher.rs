//! Which rule a request descriptor gets: envoyproxy/ratelimit's lookup
//! (`GetLimit` in their `config_impl.go`), as a pure function of the rule
//! set and the descriptor.
//!
//! At each level, for entry `(key, value)`: the exact `key_value` first,
//! then the level's wildcard patterns in file order (`*` matches any run of
//! characters, trailing or in the middle), then `key` alone (the default for
//! any value). The walk stops where the tree does. A rule applies only if it
//! sits at the descriptor's **last** entry (the depth rule: a request with
//! more entries than the matched branch gets no limit, one with fewer gets
//! the limit of the level it ends on only if that level has one). A
//! descriptor carrying a `limit` override gets that limit (no shadow, no
//! quota mode, no metadata) if its domain exists. The stats key follows
//! their rules for `detailed_metric` (every `key_value` of the request),
//! `value_to_metric` (the request's value where the config matched by
//! default or wildcard) and `share_threshold` (the wildcard pattern, also
//! in the cache key, so all matching values share one counter).

use std::sync::Arc;

use crate::config::{Descriptor, LimitSpec, Rule, RuleCounters, RuleSet};
use crate::proto::{Entry, RateLimitOverride, Unit};

/// The `full_key` of the rule made for a request's `limit` override, and so
/// its Prometheus `rule` label: one fixed name, because the override's own
/// key is made of request values (an address, a user) and a label made of
/// them would grow without bound. Configured keys always start with
/// `domain.`, so this name (without a dot) never equals one. statsd keeps
/// their per-value name (`domain.key_value…`, [`Matched::stats_key`]).
pub const OVERRIDE_RULE: &str = "override";

/// What a descriptor matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// The rule (shared with the rule set, or made for an override).
    pub rule: Arc<Rule>,
    /// The stats name base (`domain.key_value…`) after `detailed_metric` and
    /// `value_to_metric`.
    pub stats_key: String,
    /// Per entry, the wildcard pattern standing in for the value in the
    /// cache key (`share_threshold`); empty when none applies.
    pub share_patterns: Vec<String>,
    /// The matched descriptor's `metadata`.
    pub metadata: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

/// Whether `value` matches the pattern split on `*` (each `*` any run of
/// characters, possibly empty).
pub(crate) fn wildcard_match(parts: &[String], value: &str) -> bool {
    let [first, middle @ .., last] = parts else {
        return parts.first().is_some_and(|p| p == value);
    };
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in middle {
        match rest.find(part.as_str()) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

impl RuleSet {
    /// The rule for `entries` in `domain`, or `None` (no domain, no match,
    /// or a depth mismatch). `limit` is the descriptor's override.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_rls::RuleSet;
    /// use limiter_rls::proto::Entry;
    ///
    /// let yaml = "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n  - key: user\n    value: admin\n    rate_limit: {unlimited: true}\n";
    /// let rules = RuleSet::from_files(vec![("a.yaml".into(), yaml.into())])?;
    /// let e = |v: &str| vec![Entry { key: "user".into(), value: v.into() }];
    /// assert_eq!(rules.find("d", &e("bob"), None).unwrap().rule.limit.requests_per_unit, 10);
    /// assert!(rules.find("d", &e("admin"), None).unwrap().rule.unlimited);
    /// assert!(rules.find("other", &e("bob"), None).is_none());
    /// # Ok::<(), limiter_rls::ConfigErrors>(())
    /// ```
    pub fn find(
        &self,
        domain: &str,
        entries: &[Entry],
        limit: Option<&RateLimitOverride>,
    ) -> Option<Matched> {
        let top = self.domains.get(domain)?;
        if let Some(o) = limit {
            return Some(Matched {
                rule: Arc::new(Rule {
                    full_key: OVERRIDE_RULE.to_owned(),
                    limit: LimitSpec {
                        requests_per_unit: o.requests_per_unit,
                        unit: Unit::try_from(o.unit).unwrap_or(Unit::Unknown),
                    },
                    unlimited: false,
                    shadow_mode: false,
                    quota_mode: false,
                    name: String::new(),
                    replaces: Vec::new(),
                    detailed_metric: false,
                    counters: RuleCounters::default(),
                }),
                stats_key: override_key(domain, entries),
                share_patterns: Vec::new(),
                metadata: None,
            });
        }
        let mut level = top;
        let mut found: Option<&Descriptor> = None;
        let mut detailed = String::from(domain);
        let mut by_value = String::from(domain);
        let mut share: Vec<String> = Vec::new();
        let mut final_key = String::new();
        for (i, entry) in entries.iter().enumerate() {
            final_key.clear();
            final_key.push_str(&entry.key);
            final_key.push('_');
            final_key.push_str(&entry.value);
            detailed.push('.');
            detailed.push_str(&final_key);
            let mut next = level.map.get(&final_key);
            let mut wildcard_key: Option<&str> = None;
            if next.is_none()
                && let Some(w) = level
                    .wildcards
                    .iter()
                    .find(|w| wildcard_match(&w.parts, &final_key))
            {
                next = level.map.get(&w.key);
                wildcard_key = Some(&w.key);
            }
            let by_exact_value = next.is_some();
            if next.is_none() {
                next = level.map.get(&entry.key);
            }
            by_value.push('.');
            match next {
                Some(d) => {
                    let strip = |k: &str| {
                        k.strip_prefix(&entry.key)
                            .and_then(|r| r.strip_prefix('_'))
                            .unwrap_or(k)
                            .to_owned()
                    };
                    let shared = wildcard_key.is_some() && d.share_threshold;
                    if shared {
                        share.resize(entries.len(), String::new());
                        share[i] = strip(&d.wildcard_pattern);
                    }
                    let value = match wildcard_key {
                        Some(_) if shared => share[i].clone(),
                        Some(_) if d.value_to_metric => entry.value.clone(),
                        Some(k) => strip(k),
                        None if by_exact_value || d.value_to_metric => entry.value.clone(),
                        None => String::new(),
                    };
                    by_value.push_str(&entry.key);
                    if !value.is_empty() {
                        by_value.push('_');
                        by_value.push_str(&value);
                    }
                }
                None => by_value.push_str(&entry.key),
            }
            found = match next {
                Some(d) if d.rule.is_some() && i == entries.len() - 1 => Some(d),
                _ => None,
            };
            match next {
                Some(d) if !d.children.map.is_empty() => level = &d.children,
                _ => break,
            }
        }
        let d = found?;
        let rule = Arc::clone(d.rule.as_ref()?);
        let stats_key = if rule.detailed_metric {
            if share.iter().any(|p| !p.is_empty()) {
                let mut key = String::from(domain);
                for (e, p) in entries.iter().zip(&share) {
                    key.push('.');
                    key.push_str(&e.key);
                    let v = if p.is_empty() { &e.value } else { p };
                    if !v.is_empty() {
                        key.push('_');
                        key.push_str(v);
                    }
                }
                key
            } else {
                detailed
            }
        } else {
            by_value
        };
        Some(Matched {
            rule,
            stats_key,
            share_patterns: share,
            metadata: d.metadata.clone(),
        })
    }
}

/// `domain.key_value.key2`: the stats key of an override (their
/// `descriptorKey`).
fn override_key(domain: &str, entries: &[Entry]) -> String {
    let mut key = format!("{domain}.");
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            key.push('.');
        }
        key.push_str(&e.key);
        if !e.value.is_empty() {
            key.push('_');
            key.push_str(&e.value);
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &str) -> Vec<String> {
        p.split('*').map(str::to_owned).collect()
    }

    #[test]
    fn wildcards_match_trailing_middle_and_several_stars() {
        assert!(wildcard_match(&parts("path_/api*"), "path_/api/v1"));
        assert!(wildcard_match(&parts("path_/api*"), "path_/api"));
        assert!(!wildcard_match(&parts("path_/api*"), "path_/ap"));
        assert!(wildcard_match(&parts("p_a*b*c"), "p_aXXbYYc"));
        assert!(wildcard_match(&parts("p_a*b*c"), "p_abc"));
        assert!(!wildcard_match(&parts("p_a*b*c"), "p_acb"));
        // The fixed parts may not overlap: "aba" is not "ab" then "ba".
        assert!(!wildcard_match(&parts("ab*ba"), "aba"));
        assert!(wildcard_match(&parts("exact"), "exact"));
        assert!(!wildcard_match(&parts("exact"), "exact!"));
    }
}
