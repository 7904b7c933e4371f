//! The rule lookup against a plain model, and envoyproxy/ratelimit's
//! matching examples: most specific first, wildcards in file order, the
//! depth rule, overrides.

use limiter_rls::RuleSet;
use limiter_rls::proto::{Entry, RateLimitOverride, Unit};
use proptest::prelude::*;

fn rules(yaml: &str) -> RuleSet {
    RuleSet::from_files(vec![("t.yaml".into(), yaml.into())]).unwrap()
}

fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
    pairs
        .iter()
        .map(|(k, v)| Entry {
            key: (*k).into(),
            value: (*v).into(),
        })
        .collect()
}

fn limit_of(r: &RuleSet, pairs: &[(&str, &str)]) -> Option<u32> {
    r.find("d", &entries(pairs), None)
        .map(|m| m.rule.limit.requests_per_unit)
}

const CONFIG: &str = "
domain: d
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /api/v2*
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: path
    value: /files/*/raw
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: user
    descriptors:
      - key: op
        value: write
        rate_limit: {unit: hour, requests_per_unit: 6}
  - key: block
    rate_limit: {unit: second, requests_per_unit: 0}
";

#[test]
fn most_specific_then_wildcards_in_file_order_then_default() {
    let r = rules(CONFIG);
    assert_eq!(limit_of(&r, &[("remote_address", "10.0.0.1")]), Some(2));
    assert_eq!(limit_of(&r, &[("remote_address", "10.0.0.2")]), Some(1));
    // `/api/*` comes first in the file, so it wins over `/api/v2*`.
    assert_eq!(limit_of(&r, &[("path", "/api/v2/x")]), Some(3));
    assert_eq!(limit_of(&r, &[("path", "/files/a/b/raw")]), Some(5));
    assert_eq!(limit_of(&r, &[("path", "/files/raw")]), None);
    assert_eq!(limit_of(&r, &[("block", "x")]), Some(0));
}

#[test]
fn the_depth_rule() {
    let r = rules(CONFIG);
    assert_eq!(limit_of(&r, &[("user", "u1"), ("op", "write")]), Some(6));
    // Fewer entries than the rule's depth: `user` alone has no limit.
    assert_eq!(limit_of(&r, &[("user", "u1")]), None);
    // More entries than the branch: no limit (not the parent's).
    assert_eq!(
        limit_of(&r, &[("remote_address", "10.0.0.1"), ("x", "y")]),
        None
    );
    assert_eq!(limit_of(&r, &[("user", "u1"), ("op", "read")]), None);
}

#[test]
fn an_override_applies_in_a_known_domain_only() {
    let r = rules(CONFIG);
    let o = RateLimitOverride {
        requests_per_unit: 42,
        unit: Unit::Hour as i32,
    };
    let m = r
        .find("d", &entries(&[("anything", "v")]), Some(&o))
        .unwrap();
    assert_eq!(m.rule.limit.requests_per_unit, 42);
    assert_eq!(m.rule.limit.unit, Unit::Hour);
    assert_eq!(m.stats_key, "d.anything_v");
    // The Prometheus label is one fixed name, whatever the request's values.
    assert_eq!(m.rule.full_key, limiter_rls::OVERRIDE_RULE);
    let other = r
        .find("d", &entries(&[("remote_address", "10.1.2.3")]), Some(&o))
        .unwrap();
    assert_eq!(other.rule.full_key, limiter_rls::OVERRIDE_RULE);
    assert_eq!(other.stats_key, "d.remote_address_10.1.2.3");
    assert!(
        r.find("other", &entries(&[("anything", "v")]), Some(&o))
            .is_none()
    );
}

#[test]
fn stats_keys_follow_detailed_metric_and_value_to_metric() {
    let r = rules(
        "domain: d
descriptors:
  - key: ip
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: route
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: tenant
    value: acme*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
",
    );
    let key = |k: &str, v: &str| r.find("d", &entries(&[(k, v)]), None).unwrap();
    assert_eq!(key("ip", "10.1.2.3").stats_key, "d.ip_10.1.2.3");
    assert_eq!(key("route", "/a").stats_key, "d.route_/a");
    let shared = key("tenant", "acme-eu");
    assert_eq!(shared.stats_key, "d.tenant_acme*");
    assert_eq!(shared.share_patterns, vec!["acme*".to_owned()]);
}

// ---- the model ----------------------------------------------------------

/// A config descriptor as generated: key, value ("" = none), limit, children.
#[derive(Debug, Clone)]
struct Node {
    key: String,
    value: String,
    limit: Option<u32>,
    children: Vec<Node>,
}

fn node(depth: u32) -> BoxedStrategy<Node> {
    let leaf = (
        prop::sample::select(vec!["a", "b"]),
        prop::sample::select(vec!["", "x", "y", "x*", "*y", "x*y"]),
        prop::option::of(0u32..5),
    );
    if depth == 0 {
        leaf.prop_map(|(k, v, l)| Node {
            key: k.into(),
            value: v.into(),
            limit: l,
            children: vec![],
        })
        .boxed()
    } else {
        (leaf, prop::collection::vec(node(depth - 1), 0..3))
            .prop_map(|((k, v, l), children)| Node {
                key: k.into(),
                value: v.into(),
                limit: l,
                children,
            })
            .boxed()
    }
}

/// Siblings with the same key and value are a config error: keep the first.
fn dedup(nodes: Vec<Node>) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    for mut n in nodes {
        if out.iter().any(|o| o.key == n.key && o.value == n.value) {
            continue;
        }
        n.children = dedup(n.children);
        out.push(n);
    }
    out
}

fn yaml(nodes: &[Node], indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    for n in nodes {
        out.push_str(&format!("{pad}- key: {}\n", n.key));
        if !n.value.is_empty() {
            out.push_str(&format!("{pad}  value: \"{}\"\n", n.value));
        }
        if let Some(l) = n.limit {
            out.push_str(&format!(
                "{pad}  rate_limit: {{unit: second, requests_per_unit: {l}}}\n"
            ));
        }
        if !n.children.is_empty() {
            out.push_str(&format!("{pad}  descriptors:\n"));
            yaml(&n.children, indent + 4, out);
        }
    }
}

/// Plain glob: `*` matches any run.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// The lookup as their documentation states it, on the plain list: per
/// entry the exact value, else the first wildcard sibling in file order,
/// else the key's default; a limit only at the last entry.
fn model(nodes: &[Node], entries: &[(String, String)]) -> Option<u32> {
    let mut level = nodes;
    for (i, (k, v)) in entries.iter().enumerate() {
        let full = format!("{k}_{v}");
        let exact = level
            .iter()
            .find(|n| n.key == *k && n.value == *v && !v.is_empty());
        let wild = || {
            level.iter().find(|n| {
                let pattern = if n.value.is_empty() {
                    n.key.clone()
                } else {
                    format!("{}_{}", n.key, n.value)
                };
                pattern.contains('*') && glob(pattern.as_bytes(), full.as_bytes())
            })
        };
        let default = || level.iter().find(|n| n.key == *k && n.value.is_empty());
        let next = exact.or_else(wild).or_else(default)?;
        if i == entries.len() - 1 {
            return next.limit;
        }
        if next.children.is_empty() {
            return None;
        }
        level = &next.children;
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn lookup_matches_the_model(
        tree in prop::collection::vec(node(2), 1..5),
        request in prop::collection::vec((prop::sample::select(vec!["a", "b"]), prop::sample::select(vec!["x", "y", "xy", "xzy", "z", "*"])), 1..4),
    ) {
        let tree = dedup(tree);
        let mut text = String::from("domain: d\ndescriptors:\n");
        yaml(&tree, 2, &mut text);
        let set = RuleSet::from_files(vec![("p.yaml".into(), text.clone())]).unwrap();
        let request: Vec<(String, String)> = request.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        let e: Vec<Entry> = request.iter().map(|(k, v)| Entry { key: k.clone(), value: v.clone() }).collect();
        let got = set.find("d", &e, None).map(|m| m.rule.limit.requests_per_unit);
        prop_assert_eq!(got, model(&tree, &request), "config:\n{}", text);
    }
}
