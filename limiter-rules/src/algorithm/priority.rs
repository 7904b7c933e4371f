//! `priority`: one GCRA shared by `classes` (names to shares of the burst,
//! highest class first at share 1.0), a request's class named by the
//! `class_header` (a request without it, or naming no class, is of the
//! lowest class). Global only, local only; a reload moves the quota with
//! `set_quota` and replaces the limiter when the classes change.

use http::header::HeaderName;
use limiter_core::{ManualClock, PriorityLimiter};

use super::reader::required;
use super::{Algorithm, Definition, Reader};

/// `priority`.
pub(crate) const PRIORITY: Definition = Definition {
    name: "priority",
    fields: &["rate", "burst", "classes", "class_header"],
    parse,
    delay_by_default: false,
    keyed: false,
    redis: false,
    calendar: false,
    not_taken: &[],
};

fn parse(r: &mut dyn Reader) -> Option<Algorithm> {
    let quota = r.quota();
    let classes = r.numbers("classes", "a table of class names to shares");
    let classes = required(r, "classes", classes);
    let class_header = match r.string("class_header") {
        None => None,
        Some(None) => Some(None),
        Some(Some(h)) => match HeaderName::try_from(h.trim()) {
            Ok(h) => Some(Some(h)),
            Err(_) => {
                let reason = format!("`{h}` is not a valid header name");
                r.invalid(
                    "class_header",
                    reason,
                    "a header name such as x-priority".into(),
                );
                None
            }
        },
    };
    let ((rate, quota), classes, class_header) = (quota?, classes?, class_header?);
    let shares: Vec<f64> = classes.iter().map(|(_, s)| *s).collect();
    if let Err(e) = PriorityLimiter::with_clock(quota, &shares, ManualClock::new()) {
        r.core_error("classes", e);
        return None;
    }
    Some(Algorithm::Priority {
        rate,
        quota,
        classes,
        class_header,
    })
}
