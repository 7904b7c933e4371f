//! The reader of one rule's fields: scalars, rates, durations, quotas,
//! each problem recorded at its position and the field skipped.

use super::*;
use crate::algorithm::Reader;

/// The reader of one rule's fields.
pub(super) struct Fields<'c, 'a, 'n> {
    pub(super) check: &'c mut Check<'a>,
    pub(super) name: &'c str,
    pub(super) t: &'c Table<'n>,
}

impl<'n> Fields<'_, '_, 'n> {
    pub(super) fn err(&mut self, pos: Pos, field: &str, problem: Problem) {
        self.check.push(pos, Some(self.name), Some(field), problem);
    }

    pub(super) fn string<'v>(&mut self, n: &'v Node, field: &str) -> Option<&'v str> {
        match &n.value {
            Value::Str(s) => Some(s),
            other => {
                self.err(n.pos, field, wrong("a string", other));
                None
            }
        }
    }

    /// A whole number ≥ 1.
    pub(super) fn positive(&mut self, n: &Node, field: &str) -> Option<u64> {
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

    pub(super) fn u32_field(&mut self, field: &str) -> Option<Option<u32>> {
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

    pub(super) fn required(&mut self, field: &str) -> Option<&'n Node> {
        let n = self.t.get(field);
        if n.is_none() {
            let pos = self.t.pos;
            self.err(pos, field, Problem::MissingField);
        }
        n
    }

    pub(super) fn rate(&mut self, field: &str) -> Option<Rate> {
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

    pub(super) fn duration(&mut self, field: &str) -> Option<Option<(Duration, Pos)>> {
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
    pub(super) fn quota(&mut self) -> Option<(Rate, Quota)> {
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

    pub(super) fn core_error(&mut self, field: &str, e: limiter_core::QuotaError) {
        let pos = self.t.get(field).map_or(self.t.pos, |n| n.pos);
        self.err(pos, field, Problem::Quota(e));
    }

    pub(super) fn number(&mut self, n: &Node, field: &str) -> Option<f64> {
        match n.value {
            Value::Float(f) => Some(f),
            Value::Int(i) => Some(i as f64),
            ref other => {
                self.err(n.pos, field, wrong("a number", other));
                None
            }
        }
    }
}

/// What an algorithm's definition reads of the rule's fields.
impl Reader for Fields<'_, '_, '_> {
    fn rate(&mut self, field: &str) -> Option<Rate> {
        Fields::rate(self, field)
    }

    fn quota(&mut self) -> Option<(Rate, Quota)> {
        Fields::quota(self)
    }

    fn count(&mut self, field: &str) -> Option<Option<u32>> {
        self.u32_field(field)
    }

    fn duration(&mut self, field: &str) -> Option<Option<Duration>> {
        Fields::duration(self, field).map(|d| d.map(|(d, _)| d))
    }

    fn number(&mut self, field: &str) -> Option<Option<f64>> {
        match self.t.get(field) {
            None => Some(None),
            Some(n) => Fields::number(self, n, field).map(Some),
        }
    }

    fn string(&mut self, field: &str) -> Option<Option<String>> {
        match self.t.get(field) {
            None => Some(None),
            Some(n) => Fields::string(self, n, field).map(|s| Some(s.to_owned())),
        }
    }

    fn numbers(
        &mut self,
        field: &str,
        expected: &'static str,
    ) -> Option<Option<Vec<(String, f64)>>> {
        let Some(n) = self.t.get(field) else {
            return Some(None);
        };
        let Value::Map(entries) = &n.value else {
            self.err(n.pos, field, wrong(expected, &n.value));
            return None;
        };
        let mut out = Vec::with_capacity(entries.len());
        let mut ok = true;
        for (name, _, value) in entries {
            match Fields::number(self, value, &format!("{field}.{name}")) {
                Some(v) => out.push((name.clone(), v)),
                None => ok = false,
            }
        }
        ok.then_some(Some(out))
    }

    fn missing(&mut self, field: &str) {
        let pos = self.t.pos;
        self.err(pos, field, Problem::MissingField);
    }

    fn invalid(&mut self, field: &str, reason: String, expected: String) {
        let pos = self.t.get(field).map_or(self.t.pos, |n| n.pos);
        self.err(pos, field, Problem::InvalidValue { reason, expected });
    }

    fn core_error(&mut self, field: &str, error: limiter_core::QuotaError) {
        Fields::core_error(self, field, error)
    }

    fn boolean(&mut self, field: &str) -> Option<Option<bool>> {
        match self.t.get(field) {
            None => Some(None),
            Some(n) => match n.value {
                Value::Bool(b) => Some(Some(b)),
                ref other => {
                    self.err(n.pos, field, wrong("true or false", other));
                    None
                }
            },
        }
    }

    fn present(&mut self, field: &str) -> bool {
        self.t.get(field).is_some()
    }

    fn concurrency_error(&mut self, field: &str, error: limiter_concurrency::ConfigError) {
        let pos = self.t.get(field).map_or(self.t.pos, |n| n.pos);
        self.err(pos, field, Problem::Concurrency(error));
    }
}
