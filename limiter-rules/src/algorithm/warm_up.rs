//! `warm_up`: GCRA at `rate` whose rate ramps up over `warm_up` after idle
//! time, starting `cold_factor` (default 3) times slower. Global only,
//! local only; a reload with other numbers replaces the limiter.

use limiter_core::{ManualClock, QuotaError, WarmUpBuilder};

use super::reader::required;
use super::{Algorithm, Definition, Reader};

/// `warm_up`.
pub(crate) const WARM_UP: Definition = Definition {
    name: "warm_up",
    fields: &["rate", "warm_up", "cold_factor"],
    parse,
    delay_by_default: false,
    keyed: false,
    redis: false,
    calendar: false,
    not_taken: &[],
};

fn parse(r: &mut dyn Reader) -> Option<Algorithm> {
    let quota = r.quota();
    let warm_up = r.duration("warm_up");
    let warm_up = required(r, "warm_up", warm_up);
    let cold_factor = r.number("cold_factor").map(|f| f.unwrap_or(3.0));
    let ((rate, quota), warm_up, cold_factor) = (quota?, warm_up?, cold_factor?);
    let built = WarmUpBuilder::with_clock(quota, warm_up, ManualClock::new())
        .cold_factor(cold_factor)
        .build();
    if let Err(e) = built {
        let field = match e {
            QuotaError::InvalidParameter { name, .. } if name.contains("cold") => "cold_factor",
            _ => "warm_up",
        };
        r.core_error(field, e);
        return None;
    }
    Some(Algorithm::WarmUp {
        rate,
        quota,
        warm_up,
        cold_factor,
    })
}
