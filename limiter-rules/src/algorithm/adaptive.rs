//! `adaptive`: a rate between `min_rate` and `max_rate` (where it starts),
//! moved by the downstream's latency against `target_latency` under a
//! `policy` (`ewma_aimd`, the default, or `percentile`). Global only, local
//! only; a reload with other numbers replaces the limiter.

use limiter_core::{AdaptiveLimiter, ManualClock, adaptive::EwmaAimd, adaptive::PercentileWindow};

use super::reader::required;
use super::{Algorithm, ControllerSpec, Definition, Reader};

/// `adaptive`.
pub(crate) const ADAPTIVE: Definition = Definition {
    name: "adaptive",
    fields: &["policy", "target_latency", "min_rate", "max_rate", "burst"],
    parse,
    delay_by_default: false,
    keyed: false,
    redis: false,
    calendar: false,
    not_taken: &[],
};

fn parse(r: &mut dyn Reader) -> Option<Algorithm> {
    let target = r.duration("target_latency");
    let target = required(r, "target_latency", target);
    let policy = match r.string("policy") {
        None => None,
        Some(None) => Some(false),
        Some(Some(p)) => match p.as_str() {
            "ewma_aimd" => Some(false),
            "percentile" => Some(true),
            other => {
                let reason = format!("unknown adaptive policy `{other}`");
                r.invalid("policy", reason, "ewma_aimd or percentile".into());
                None
            }
        },
    };
    let min = r.rate("min_rate");
    let max = r.rate("max_rate");
    let burst = r.count("burst");
    let (target, percentile, min, max, burst) = (target?, policy?, min?, max?, burst?);
    let burst = burst.unwrap_or(1);
    let (min_rate, max_rate) = (min.per_second(), max.per_second());
    let clock = ManualClock::new();
    let built = if percentile {
        AdaptiveLimiter::builder(PercentileWindow::with_threshold(target))
            .clock(clock)
            .min_rate(min_rate)
            .max_rate(max_rate)
            .burst(burst)
            .build()
            .map(|_| ())
    } else {
        AdaptiveLimiter::builder(EwmaAimd::new(target))
            .clock(clock)
            .min_rate(min_rate)
            .max_rate(max_rate)
            .burst(burst)
            .build()
            .map(|_| ())
    };
    if let Err(e) = built {
        r.core_error("min_rate", e);
        return None;
    }
    let controller = if percentile {
        ControllerSpec::Percentile { target }
    } else {
        ControllerSpec::EwmaAimd { target }
    };
    Some(Algorithm::Adaptive {
        controller,
        min_rate,
        max_rate,
        burst,
    })
}
