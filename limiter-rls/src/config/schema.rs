//! envoyproxy/ratelimit's schema, checked on limiter-rules' position tree
//! (the one rule files are read into, so positions are computed one way
//! everywhere): the fields
//! they accept (`validKeys` in their `config_impl.go`), the same checks in
//! the same order per descriptor, every problem reported with its position.
//!
//! Semantics kept from theirs: a descriptor's map key is `key_value`, or
//! `key` without a value; a value containing `*` is a wildcard tried in
//! file order; `unlimited` takes no unit; a missing `requests_per_unit` is
//! 0 (blocks every request); the same domain in two files is an error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{ConfigError, Problem};
use limiter_rules::{Format, Node, Pos, Value, parse_tree};

use super::{Descriptor, Level, LimitSpec, Rule, RuleCounters, Wildcard};
use crate::proto::Unit;

const ROOT_FIELDS: &[&str] = &["domain", "descriptors"];
const DESCRIPTOR_FIELDS: &[&str] = &[
    "key",
    "value",
    "rate_limit",
    "descriptors",
    "shadow_mode",
    "quota_mode",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];
const RATE_LIMIT_FIELDS: &[&str] = &["unit", "requests_per_unit", "unlimited", "name", "replaces"];
const REPLACES_FIELDS: &[&str] = &["name"];

struct Checker<'a> {
    file: &'a Path,
    errors: &'a mut Vec<ConfigError>,
}

impl Checker<'_> {
    fn report(&mut self, pos: Pos, problem: Problem) {
        self.errors.push(ConfigError {
            file: self.file.to_path_buf(),
            pos,
            rule: None,
            field: None,
            problem,
        });
    }

    /// The fields of a map node, unknown ones reported; `None` if not a map.
    fn fields<'n>(
        &mut self,
        node: &'n Node,
        allowed: &'static [&'static str],
    ) -> Option<Vec<(&'n str, &'n Node)>> {
        match &node.value {
            Value::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, pos, v) in entries {
                    if allowed.contains(&k.as_str()) {
                        out.push((k.as_str(), v));
                    } else {
                        self.report(
                            *pos,
                            Problem::UnknownField {
                                found: k.clone(),
                                expected: allowed,
                            },
                        );
                    }
                }
                Some(out)
            }
            Value::Null => Some(Vec::new()),
            other => {
                self.report(
                    node.pos,
                    Problem::WrongType {
                        expected: "a map of fields",
                        found: other.kind(),
                    },
                );
                None
            }
        }
    }

    fn string(&mut self, node: &Node) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            // YAML reads `value: 200` as a number; theirs takes it as text.
            Value::Int(i) => Some(i.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Null => Some(String::new()),
            other => {
                self.report(
                    node.pos,
                    Problem::WrongType {
                        expected: "a string",
                        found: other.kind(),
                    },
                );
                None
            }
        }
    }

    fn boolean(&mut self, node: &Node) -> bool {
        match &node.value {
            Value::Bool(b) => *b,
            Value::Null => false,
            other => {
                self.report(
                    node.pos,
                    Problem::WrongType {
                        expected: "true or false",
                        found: other.kind(),
                    },
                );
                false
            }
        }
    }

    fn list<'n>(&mut self, node: &'n Node) -> &'n [Node] {
        match &node.value {
            Value::Seq(items) => items,
            Value::Null => &[],
            other => {
                self.report(
                    node.pos,
                    Problem::WrongType {
                        expected: "a list",
                        found: other.kind(),
                    },
                );
                &[]
            }
        }
    }
}

/// A value as JSON (for `metadata`, which is returned as it is).
fn to_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        // Metadata numbers become protobuf doubles anyway.
        #[allow(clippy::cast_precision_loss)]
        Value::Int(i) => serde_json::Number::from_f64(*i as f64)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Value::Str(s) => serde_json::Value::String(s.clone()),
        Value::Seq(items) => items.iter().map(|n| to_json(&n.value)).collect(),
        Value::Map(entries) => serde_json::Value::Object(
            entries
                .iter()
                .map(|(k, _, n)| (k.clone(), to_json(&n.value)))
                .collect(),
        ),
    }
}

fn get<'n>(fields: &[(&str, &'n Node)], name: &str) -> Option<&'n Node> {
    fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}

/// Checks one file and adds its domain to `domains` (when it has no
/// problem). `first_file` remembers which file declared each domain.
pub(super) fn load_file(
    path: &Path,
    text: &str,
    domains: &mut HashMap<String, Level>,
    first_file: &mut HashMap<String, PathBuf>,
    errors: &mut Vec<ConfigError>,
) {
    let before = errors.len();
    let mut c = Checker { file: path, errors };
    let root = match parse_tree(text, Format::Yaml) {
        Ok(root) => root,
        Err(e) => {
            c.report(e.pos, Problem::Syntax { message: e.message });
            return;
        }
    };
    let Some(fields) = c.fields(&root, ROOT_FIELDS) else {
        return;
    };
    let domain = get(&fields, "domain")
        .and_then(|n| c.string(n).map(|s| (s, n.pos)))
        .unwrap_or_default();
    if domain.0.is_empty() {
        c.report(root.pos, Problem::EmptyDomain);
    } else if let Some(first) = first_file.get(&domain.0) {
        c.report(
            domain.1,
            Problem::DuplicateDomain {
                domain: domain.0.clone(),
                first: first.clone(),
            },
        );
    }
    let mut level = Level::default();
    if let Some(list) = get(&fields, "descriptors") {
        let items = c.list(list);
        load_level(&mut c, &format!("{}.", domain.0), items, &mut level);
    }
    if c.errors.len() == before && !domain.0.is_empty() {
        first_file.insert(domain.0.clone(), path.to_path_buf());
        domains.insert(domain.0, level);
    }
}

fn load_level(c: &mut Checker<'_>, parent_key: &str, items: &[Node], level: &mut Level) {
    for item in items {
        let Some(fields) = c.fields(item, DESCRIPTOR_FIELDS) else {
            continue;
        };
        let key = get(&fields, "key")
            .and_then(|n| c.string(n))
            .unwrap_or_default();
        if key.is_empty() {
            c.report(item.pos, Problem::EmptyKey);
            continue;
        }
        let value = get(&fields, "value")
            .and_then(|n| c.string(n))
            .unwrap_or_default();
        let final_key = if value.is_empty() {
            key.clone()
        } else {
            format!("{key}_{value}")
        };
        let full_key = format!("{parent_key}{final_key}");
        if level.map.contains_key(&final_key) {
            c.report(
                item.pos,
                Problem::DuplicateDescriptor {
                    composite: full_key,
                },
            );
            continue;
        }
        let flag =
            |c: &mut Checker<'_>, name: &str| get(&fields, name).is_some_and(|n| c.boolean(n));
        let shadow_mode = flag(c, "shadow_mode");
        let quota_mode = flag(c, "quota_mode");
        let detailed_metric = flag(c, "detailed_metric");
        let value_to_metric = flag(c, "value_to_metric");
        let share_threshold = flag(c, "share_threshold");
        let rule = get(&fields, "rate_limit").and_then(|n| {
            rate_limit(
                c,
                n,
                full_key.clone(),
                shadow_mode,
                quota_mode,
                detailed_metric,
            )
        });
        let wildcard = final_key.contains('*');
        if share_threshold && !wildcard {
            c.report(
                item.pos,
                Problem::ShareThresholdWithoutWildcard {
                    key: final_key.clone(),
                },
            );
        }
        if wildcard {
            level.wildcards.push(Wildcard {
                key: final_key.clone(),
                parts: final_key.split('*').map(str::to_owned).collect(),
            });
        }
        let metadata = match get(&fields, "metadata").map(|n| (n, to_json(&n.value))) {
            Some((_, serde_json::Value::Object(map))) => Some(Arc::new(map)),
            Some((_, serde_json::Value::Null)) | None => None,
            Some((n, _)) => {
                c.report(
                    n.pos,
                    Problem::WrongType {
                        expected: "a map of fields",
                        found: n.value.kind(),
                    },
                );
                None
            }
        };
        let mut descriptor = Descriptor {
            rule: rule.map(Arc::new),
            children: Level::default(),
            value_to_metric,
            share_threshold,
            wildcard_pattern: if share_threshold && wildcard {
                final_key.clone()
            } else {
                String::new()
            },
            metadata,
        };
        if let Some(list) = get(&fields, "descriptors") {
            let items = c.list(list);
            load_level(c, &format!("{full_key}."), items, &mut descriptor.children);
        }
        level.map.insert(final_key, descriptor);
    }
}

fn rate_limit(
    c: &mut Checker<'_>,
    node: &Node,
    full_key: String,
    shadow_mode: bool,
    quota_mode: bool,
    detailed_metric: bool,
) -> Option<Rule> {
    let fields = c.fields(node, RATE_LIMIT_FIELDS)?;
    let unlimited = get(&fields, "unlimited").is_some_and(|n| c.boolean(n));
    let unit_node = get(&fields, "unit");
    let unit_text = unit_node.and_then(|n| c.string(n)).unwrap_or_default();
    let unit = Unit::parse(&unit_text);
    let unit_pos = unit_node.map_or(node.pos, |n| n.pos);
    if unlimited {
        if unit.is_some() {
            c.report(unit_pos, Problem::UnitWithUnlimited);
        }
    } else if unit.is_none() {
        c.report(unit_pos, Problem::InvalidUnit { found: unit_text });
    }
    let requests_per_unit = match get(&fields, "requests_per_unit").map(|n| (n, &n.value)) {
        None | Some((_, Value::Null)) => 0,
        Some((n, Value::Int(i))) => u32::try_from(*i).unwrap_or_else(|_| {
            c.report(n.pos, Problem::RequestsOutOfRange { found: *i });
            0
        }),
        Some((n, other)) => {
            c.report(
                n.pos,
                Problem::WrongType {
                    expected: "a whole number",
                    found: other.kind(),
                },
            );
            0
        }
    };
    let name = get(&fields, "name")
        .and_then(|n| c.string(n))
        .unwrap_or_default();
    let mut replaces = Vec::new();
    if let Some(list) = get(&fields, "replaces") {
        for item in c.list(list) {
            let Some(r) = c.fields(item, REPLACES_FIELDS) else {
                continue;
            };
            let replaced = get(&r, "name")
                .and_then(|n| c.string(n))
                .unwrap_or_default();
            if replaced.is_empty() {
                c.report(item.pos, Problem::EmptyReplaces);
            } else if replaced == name {
                c.report(item.pos, Problem::ReplacesItself { name: replaced });
            } else {
                replaces.push(replaced);
            }
        }
    }
    Some(Rule {
        full_key,
        limit: LimitSpec {
            requests_per_unit,
            unit: unit.unwrap_or(Unit::Unknown),
        },
        unlimited,
        shadow_mode,
        quota_mode,
        name,
        replaces,
        detailed_metric,
        counters: RuleCounters::default(),
    })
}
