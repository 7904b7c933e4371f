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
use limiter_core::Quota;

use crate::algorithm::{self, Algorithm, Definition, names_where};
use crate::error::{ConfigError, Problem};
use crate::routes::{Matcher, ambiguous, template_of};
use crate::schema::{
    BackendSpec, DEFAULT_MAX_DELAY, DEFAULT_MAX_KEYS, HeaderSpec, KeyPart, KeySpec,
    MAX_PENALTY_AFTER, MatchSpec, Mode, PathMatch, PenaltySpec, RedisSpec, RedisTlsSpec, RuleSpec,
    WhenRedisDown,
};
use crate::source::{Node, Pos, Value};
use crate::units::{Rate, parse_duration};

mod cost;
mod fields;
mod overrides;
mod quota;
mod redis;
mod request;

use fields::Fields;
pub(crate) use overrides::quota_table;

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
    "overrides",
    "shadow",
    "shadow_headers",
    "penalty",
    "cost",
    "quota",
];

/// The settings at the top of a file, beside `rate_limits`.
const TOP: &[&str] = &["rate_limits", "shadow"];

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
                if !TOP.contains(&key.as_str()) {
                    let problem = Problem::UnknownField {
                        found: key.clone(),
                        expected: TOP.to_vec(),
                    };
                    check.push(*pos, None, Some(key), problem);
                }
            }
            let shadow_all = match entries.iter().find(|(k, _, _)| k == "shadow") {
                None => false,
                Some((_, _, n)) => match n.value {
                    Value::Bool(b) => b,
                    ref other => {
                        check.push(n.pos, None, Some("shadow"), wrong("true or false", other));
                        false
                    }
                },
            };
            match entries.iter().find(|(k, _, _)| k == "rate_limits") {
                None => check.push(root.pos, None, Some("rate_limits"), Problem::MissingField),
                Some((_, _, limits)) => match &limits.value {
                    Value::Map(rule_entries) => {
                        for (name, pos, node) in rule_entries {
                            if let Some((rule, mpos)) =
                                rule(&mut check, name, *pos, node, shadow_all)
                            {
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
    // Compiled once; only rules of equal precedence can be ambiguous.
    let compiled: Vec<Option<Matcher>> = rules
        .iter()
        .map(|r| r.matcher.as_ref().and_then(Matcher::new))
        .collect();
    for (j, later) in compiled.iter().enumerate() {
        let Some(b) = later else { continue };
        for (i, earlier) in compiled[..j].iter().enumerate() {
            if let Some(a) = earlier
                && let Some(overlap) = ambiguous(a, b)
            {
                let problem = Problem::AmbiguousMatch {
                    other: rules[i].name.clone(),
                    overlap,
                };
                check.push(match_pos[j], Some(&rules[j].name), Some("match"), problem);
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
fn rule(
    check: &mut Check<'_>,
    name: &str,
    pos: Pos,
    node: &Node,
    shadow_all: bool,
) -> Option<(RuleSpec, Pos)> {
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

    let definition: Option<&'static Definition> = match t.get("algorithm") {
        None => {
            f.err(pos, "algorithm", Problem::MissingField);
            None
        }
        Some(n) => match f.string(n, "algorithm") {
            Some(a) => match algorithm::definition(a) {
                Some(d) => Some(d),
                None => {
                    let found = a.to_owned();
                    f.err(n.pos, "algorithm", Problem::UnknownAlgorithm { found });
                    None
                }
            },
            None => None,
        },
    };
    // Unknown fields: against this algorithm's list when it is known.
    let allowed: Vec<&'static str> = match definition {
        Some(d) => COMMON
            .iter()
            .filter(|f| !d.not_taken.contains(f))
            .filter(|f| d.calendar || **f != "quota")
            .chain(d.fields)
            .copied()
            .collect(),
        None => {
            let mut all: Vec<&'static str> = COMMON.to_vec();
            for d in algorithm::DEFINITIONS {
                for field in d.fields {
                    if !all.contains(field) {
                        all.push(field);
                    }
                }
            }
            all
        }
    };
    for (key, kpos, _) in entries {
        // `quota` on an algorithm without one has its own problem (below).
        if !allowed.contains(&key.as_str()) && key != "quota" {
            let problem = Problem::UnknownField {
                found: key.clone(),
                expected: allowed.clone(),
            };
            f.err(*kpos, key, problem);
        }
    }

    let algorithm = definition.and_then(|d| (d.parse)(&mut f));
    let key = f.key();
    let (matcher, match_pos) = f.matcher();
    let mode = f.mode(definition.is_some_and(|d| d.delay_by_default));
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
    let overrides = f.overrides(algorithm.as_ref(), key.as_ref(), backend.as_ref());
    if let (Some(a), Some(k)) = (&algorithm, &key)
        && !k.is_global()
        && !a.definition().keyed
    {
        let problem = Problem::InvalidValue {
            reason: format!("a keyed `{}` rule is not supported", a.name()),
            expected: format!(
                "`key: global` here, or algorithm {} for a key per client",
                names_where(|d| d.keyed)
            ),
        };
        let at = t.get("key").or(t.get("per_ip")).map_or(pos, |n| n.pos);
        f.err(at, "key", problem);
    }
    let own_shadow = f.flag("shadow");
    let shadow_headers = f.flag("shadow_headers");
    if let (Some(Some(false)), Some(Some(true))) = (own_shadow, shadow_headers) {
        let problem = Problem::InvalidValue {
            reason: "`shadow_headers` has no effect on a rule with `shadow: false`".into(),
            expected: "`shadow: true` with it, or no `shadow_headers`".into(),
        };
        let at = t.get("shadow_headers").map_or(pos, |n| n.pos);
        f.err(at, "shadow_headers", problem);
    }
    let shadow = own_shadow.map(|own| own.unwrap_or(shadow_all));
    let penalty = f.penalty(key.as_ref());
    let cost = f.cost(algorithm.as_ref());
    let quota = f.calendar(definition.map(|d| d.calendar));
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
        overrides: overrides?,
        shadow: shadow?,
        shadow_headers: shadow_headers?.unwrap_or(false),
        penalty: penalty?,
        cost: cost?,
        quota: quota?,
    };
    Some((spec, match_pos))
}

fn too_large() -> Problem {
    Problem::InvalidValue {
        reason: "too large".into(),
        expected: "at most 4294967295".into(),
    }
}
