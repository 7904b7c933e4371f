//! `overrides:` on a keyed `token_bucket` or `leaky_bucket` rule: a table
//! from a key's text to its own `{rate, burst}`, each checked as the rule's
//! own quota is (every problem at its position, named
//! `overrides.KEY.rate`), at most [`MAX_OVERRIDES`] of them.

use super::*;
use crate::schema::{KeyOverride, MAX_OVERRIDES};

impl Fields<'_, '_, '_> {
    /// The rule's overrides (empty when absent), or `None` after a problem.
    pub(super) fn overrides(
        &mut self,
        algorithm: Option<&Algorithm>,
        key: Option<&KeySpec>,
        backend: Option<&BackendSpec>,
    ) -> Option<Vec<KeyOverride>> {
        let Some(n) = self.t.get("overrides") else {
            return Some(Vec::new());
        };
        let Value::Map(entries) = &n.value else {
            let problem = wrong("a table from a key to its {rate, burst}", &n.value);
            self.err(n.pos, "overrides", problem);
            return None;
        };
        let mut ok = true;
        let gcra = matches!(
            algorithm,
            Some(Algorithm::TokenBucket { .. } | Algorithm::LeakyBucket { .. })
        );
        if algorithm.is_some() && !gcra {
            let problem = Problem::InvalidValue {
                reason: "per-key overrides need a GCRA rule".into(),
                expected: "algorithm token_bucket or leaky_bucket, or no `overrides`".into(),
            };
            self.err(n.pos, "overrides", problem);
            ok = false;
        }
        if key.is_some_and(KeySpec::is_global) {
            let problem = Problem::InvalidValue {
                reason: "a rule with `key: global` has one bucket, not one per key".into(),
                expected: "a `key` such as `ip` or `header:x-tenant`, or no `overrides`".into(),
            };
            self.err(n.pos, "overrides", problem);
            ok = false;
        }
        if matches!(backend, Some(BackendSpec::Redis(_))) {
            let problem = Problem::InvalidValue {
                reason: "per-key overrides are kept in this process".into(),
                expected: "`backend: local` (the default), or no `overrides`".into(),
            };
            self.err(n.pos, "overrides", problem);
            ok = false;
        }
        if entries.len() > MAX_OVERRIDES {
            let problem = Problem::InvalidValue {
                reason: format!("{} overrides", entries.len()),
                expected: format!("at most {MAX_OVERRIDES} keys with their own quota"),
            };
            self.err(n.pos, "overrides", problem);
            ok = false;
        }
        let mut out = Vec::with_capacity(entries.len());
        for (text, pos, value) in entries {
            let field = format!("overrides.{text}");
            if text.is_empty() {
                let problem = Problem::InvalidValue {
                    reason: "an empty key".into(),
                    expected: "the key's text, as `explain` shows it".into(),
                };
                self.err(*pos, &field, problem);
                ok = false;
                continue;
            }
            let Value::Map(fields) = &value.value else {
                self.err(
                    value.pos,
                    &field,
                    wrong("a table with `rate` and `burst`", &value.value),
                );
                ok = false;
                continue;
            };
            for (name, fpos, _) in fields {
                if name != "rate" && name != "burst" {
                    let problem = Problem::UnknownField {
                        found: name.clone(),
                        expected: vec!["rate", "burst"],
                    };
                    self.err(*fpos, &format!("{field}.{name}"), problem);
                    ok = false;
                }
            }
            let table = Table {
                entries: fields,
                pos: value.pos,
            };
            let before = self.check.errors.len();
            let mut inner = Fields {
                check: &mut *self.check,
                name: self.name,
                t: &table,
            };
            let quota = inner.quota();
            // The inner reader names `rate` and `burst`: name them in full.
            for e in &mut self.check.errors[before..] {
                if let Some(f) = &mut e.field {
                    *f = format!("{field}.{f}");
                }
            }
            match quota {
                Some((rate, quota)) => out.push(KeyOverride {
                    key: text.clone(),
                    pos: *pos,
                    rate,
                    quota,
                }),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

/// One quota table on its own (`{rate, burst}`, the admin API's body):
/// the same checks as an override in the file, named by `field`.
pub(crate) fn quota_table(file: &Path, root: &Node) -> Result<(Rate, Quota), Vec<ConfigError>> {
    let mut check = Check {
        file,
        errors: Vec::new(),
    };
    let Value::Map(fields) = &root.value else {
        let problem = wrong("a table with `rate` and `burst`", &root.value);
        check.push(root.pos, None, None, problem);
        return Err(check.errors);
    };
    for (name, pos, _) in fields {
        if name != "rate" && name != "burst" {
            let problem = Problem::UnknownField {
                found: name.clone(),
                expected: vec!["rate", "burst"],
            };
            check.push(*pos, None, Some(name), problem);
        }
    }
    let table = Table {
        entries: fields,
        pos: root.pos,
    };
    let mut f = Fields {
        check: &mut check,
        name: "",
        t: &table,
    };
    let quota = f.quota();
    for e in &mut check.errors {
        e.rule = None;
    }
    match quota {
        Some(q) if check.errors.is_empty() => Ok(q),
        _ => Err(check.errors),
    }
}
