//! `quota: { limit, per, timezone, reset_day }`: a calendar quota beside a
//! rule's rate, checked by building the `limiter-calendar` quota itself, so
//! a zone the time-zone database does not know, a reset day outside its
//! period or a limit of 0 fails here, at its own line and column, with the
//! calendar crate's text as the fix.

use limiter_calendar::{CalendarError, CalendarQuota, Period};

use super::*;

/// The fields of `quota`, in the order the unknown-field fix lists them.
const QUOTA_FIELDS: &[&str] = &["limit", "per", "timezone", "reset_day"];

impl Fields<'_, '_, '_> {
    /// `quota: { limit, per, timezone, reset_day }`, on a rule whose
    /// algorithm takes one (`takes` is `None` when the algorithm is
    /// unknown: the quota is still checked).
    pub(super) fn calendar(&mut self, takes: Option<bool>) -> Option<Option<CalendarQuota>> {
        let Some(n) = self.t.get("quota") else {
            return Some(None);
        };
        let Value::Map(entries) = &n.value else {
            let problem = wrong(
                "a table with `limit`, `per`, `timezone` and `reset_day`",
                &n.value,
            );
            self.err(n.pos, "quota", problem);
            return None;
        };
        let q = Table {
            entries,
            pos: n.pos,
        };
        let mut ok = true;
        if takes == Some(false) {
            let problem = Problem::InvalidValue {
                reason:
                    "a calendar quota goes beside a rate, and this algorithm has none it can share"
                        .into(),
                expected: format!(
                    "algorithm {} with `quota`",
                    algorithm::names_where(|d| d.calendar)
                ),
            };
            self.err(n.pos, "quota", problem);
            ok = false;
        }
        for (key, kpos, _) in entries {
            if !QUOTA_FIELDS.contains(&key.as_str()) {
                let problem = Problem::UnknownField {
                    found: key.clone(),
                    expected: QUOTA_FIELDS.to_vec(),
                };
                self.err(*kpos, &format!("quota.{key}"), problem);
                ok = false;
            }
        }
        let limit = match q.get("limit") {
            None => {
                self.err(n.pos, "quota.limit", Problem::MissingField);
                None
            }
            Some(l) => self
                .positive(l, "quota.limit")
                .and_then(|v| match u32::try_from(v) {
                    Ok(v) => Some(v),
                    Err(_) => {
                        self.err(l.pos, "quota.limit", too_large());
                        None
                    }
                }),
        };
        let period = match q.get("per") {
            None => {
                self.err(n.pos, "quota.per", Problem::MissingField);
                None
            }
            Some(p) => match self.string(p, "quota.per") {
                Some("day") => Some(Period::Day),
                Some("week") => Some(Period::Week),
                Some("month") => Some(Period::Month),
                Some(other) => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown calendar period `{other}`"),
                        expected: "day, week or month".into(),
                    };
                    self.err(p.pos, "quota.per", problem);
                    None
                }
                None => None,
            },
        };
        let zone = match q.get("timezone") {
            None => Some(None),
            Some(z) => self.string(z, "quota.timezone").map(|s| Some((s, z.pos))),
        };
        let reset_day = match q.get("reset_day") {
            None => Some(None),
            Some(d) => match d.value {
                Value::Int(i) => Some(Some((i, d.pos))),
                ref other => {
                    self.err(d.pos, "quota.reset_day", wrong("a whole number", other));
                    None
                }
            },
        };
        // The quota itself, each refusal at the field that caused it; the
        // reset day and the zone are checked even when the limit is wrong,
        // so that every problem is reported at once.
        let mut built = period.and_then(|p| CalendarQuota::new(limit.unwrap_or(1), p).ok());
        if let (Some(q), Some(Some((written, pos)))) = (built.clone(), reset_day) {
            // 0 for a number no `u8` holds: out of range for every period.
            match q.with_reset_day(u8::try_from(written).unwrap_or(0)) {
                Ok(q) => built = Some(q),
                Err(e) => {
                    self.calendar_error(pos, "quota.reset_day", written, e);
                    built = None;
                }
            }
        }
        if let Some(Some((name, pos))) = zone {
            let in_zone = built
                .clone()
                .map_or_else(|| CalendarQuota::new(1, Period::Day), Ok)
                .and_then(|q| q.in_zone(name));
            match in_zone {
                Ok(q) => built = built.map(|_| q),
                Err(e) => {
                    self.calendar_error(pos, "quota.timezone", 0, e);
                    built = None;
                }
            }
        }
        let (_, _, _) = (limit?, reset_day?, zone?);
        let built = built?;
        ok.then_some(Some(built))
    }

    /// Records `limiter-calendar`'s refusal; `written` is the reset day as
    /// the file has it (the error's `u8` cannot hold every number).
    fn calendar_error(&mut self, pos: Pos, field: &str, written: i128, e: CalendarError) {
        let problem = match e {
            CalendarError::ResetDayOutOfRange { period, max, .. } => Problem::InvalidValue {
                reason: format!("`reset_day: {written}` is not a day of a {period}"),
                expected: if period == Period::Week {
                    format!("1 to {max} (1 = Monday, 7 = Sunday)")
                } else {
                    format!("1 to {max} (a shorter month resets on its last day)")
                },
            },
            CalendarError::ResetDayForDaily => Problem::InvalidValue {
                reason:
                    "`reset_day` does not apply to `per: day`, which resets at every local midnight"
                        .into(),
                expected: "no `reset_day` with `per: day`, or `per: week` or `per: month`".into(),
            },
            CalendarError::UnknownZone { name } => Problem::InvalidValue {
                reason: format!("unknown time zone `{name}`"),
                expected: "`UTC` or an IANA zone name such as `Europe/Paris` or `America/New_York`"
                    .into(),
            },
            other => Problem::InvalidValue {
                reason: other.to_string(),
                expected: "a valid calendar quota".into(),
            },
        };
        self.err(pos, field, problem);
    }
}
