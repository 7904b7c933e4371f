//! `cost:` on a rule: what a request costs up front (`cost: 3`, or
//! `request:` in the table form) and after its response
//! (`response_header:`, capped by `max_debt:`). Every mistake is reported
//! at its position, named `cost.FIELD`.

use super::*;
use crate::schema::CostSpec;
use crate::units::DisplayDuration;
use limiter_core::{debt::DEFAULT_MAX_DEBT, debt::MAX_DEBT_LIMIT};

const FIELDS: &[&str] = &["request", "response_header", "max_debt"];

impl Fields<'_, '_, '_> {
    /// The rule's cost (the default when absent), or `None` after a
    /// problem.
    pub(super) fn cost(&mut self, algorithm: Option<&Algorithm>) -> Option<CostSpec> {
        let Some(n) = self.t.get("cost") else {
            return Some(CostSpec::default());
        };
        let quota = algorithm.and_then(Algorithm::quota);
        let entries: &[(String, Pos, Node)] = match &n.value {
            // `cost: 3`: the up-front cost alone.
            Value::Int(_) => {
                let request = self.request_cost(n, "cost", quota)?;
                return Some(CostSpec {
                    request,
                    ..CostSpec::default()
                });
            }
            Value::Map(entries) => entries,
            other => {
                let problem = wrong(
                    "a whole number, or a table with `request`, `response_header` and `max_debt`",
                    other,
                );
                self.err(n.pos, "cost", problem);
                return None;
            }
        };
        let c = Table {
            entries,
            pos: n.pos,
        };
        let mut ok = true;
        for (key, kpos, _) in entries {
            if !FIELDS.contains(&key.as_str()) {
                let problem = Problem::UnknownField {
                    found: key.clone(),
                    expected: FIELDS.to_vec(),
                };
                self.err(*kpos, &format!("cost.{key}"), problem);
                ok = false;
            }
        }
        let request = match c.get("request") {
            None => Some(1),
            Some(r) => self.request_cost(r, "cost.request", quota),
        };
        let response_header = match c.get("response_header") {
            None => Some(None),
            Some(h) => self.response_header(h, algorithm),
        };
        let max_debt = match c.get("max_debt") {
            None => Some(DEFAULT_MAX_DEBT),
            Some(d) => self.max_debt(d, quota),
        };
        if let (Some(d), Some(None)) = (c.get("max_debt"), &response_header) {
            let problem = Problem::InvalidValue {
                reason: "`max_debt` caps the cost after the response, and there is none".into(),
                expected: "`response_header` with it, or no `max_debt`".into(),
            };
            self.err(d.pos, "cost.max_debt", problem);
            ok = false;
        }
        let spec = CostSpec {
            request: request?,
            response_header: response_header?,
            max_debt: max_debt?,
        };
        ok.then_some(spec)
    }

    /// An up-front cost: 1 to the rule's burst.
    fn request_cost(&mut self, n: &Node, field: &str, quota: Option<Quota>) -> Option<u32> {
        match n.value {
            Value::Int(0) => {
                let problem = Problem::InvalidValue {
                    reason: "a request cost of 0 would count nothing".into(),
                    expected: "a whole number of at least 1".into(),
                };
                self.err(n.pos, field, problem);
                return None;
            }
            Value::Int(i) if i < 0 => {
                let problem = Problem::InvalidValue {
                    reason: format!("a request cost of {i} is negative"),
                    expected: "a whole number of at least 1".into(),
                };
                self.err(n.pos, field, problem);
                return None;
            }
            _ => {}
        }
        let v = self.positive(n, field)?;
        let burst = quota.map_or(u32::MAX, |q| q.burst());
        match u32::try_from(v).ok().filter(|&v| v <= burst) {
            Some(v) => Some(v),
            None => {
                let problem = Problem::InvalidValue {
                    reason: format!(
                        "a request cost of {v} is above the rule's burst of {burst}: every request would be refused"
                    ),
                    expected: format!("a cost of at most {burst}, or a larger `burst`"),
                };
                self.err(n.pos, field, problem);
                None
            }
        }
    }

    fn response_header(
        &mut self,
        n: &Node,
        algorithm: Option<&Algorithm>,
    ) -> Option<Option<HeaderName>> {
        let s = self.string(n, "cost.response_header")?;
        let name = match HeaderName::from_bytes(s.as_bytes()) {
            Ok(name) => name,
            Err(_) => {
                let problem = Problem::InvalidValue {
                    reason: format!("`{s}` is not an HTTP header name"),
                    expected: "a header name such as x-tokens-used (letters, digits and -)".into(),
                };
                self.err(n.pos, "cost.response_header", problem);
                return None;
            }
        };
        match algorithm {
            Some(Algorithm::TokenBucket { .. } | Algorithm::LeakyBucket { .. }) | None => {
                Some(Some(name))
            }
            Some(other) => {
                let problem = Problem::DebtUnsupported {
                    algorithm: other.name(),
                };
                self.err(n.pos, "cost.response_header", problem);
                None
            }
        }
    }

    /// A cap from the rule's `t` to a day.
    fn max_debt(&mut self, n: &Node, quota: Option<Quota>) -> Option<Duration> {
        let s = self.string(n, "cost.max_debt")?;
        let d = match parse_duration(s) {
            Ok(d) => d,
            Err(reason) => {
                self.err(n.pos, "cost.max_debt", Problem::InvalidDuration { reason });
                return None;
            }
        };
        let t = quota.map_or(Duration::from_nanos(1), |q| q.period());
        if d < t || d > MAX_DEBT_LIMIT {
            let problem = Problem::InvalidValue {
                reason: format!("`{s}` is out of range"),
                expected: format!(
                    "a cap from the rule's emission interval ({}) to 1d",
                    DisplayDuration(t)
                ),
            };
            self.err(n.pos, "cost.max_debt", problem);
            return None;
        }
        Some(d)
    }
}
