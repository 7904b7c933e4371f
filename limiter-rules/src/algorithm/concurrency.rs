//! `concurrency` and `adaptive_concurrency`: how many requests at once, not
//! how often (`limiter-concurrency`).
//!
//! * `concurrency`: a fixed `limit`.
//! * `adaptive_concurrency`: a limit an `estimator` (`gradient2`, the
//!   default, `vegas` or `aimd`) moves within `min_limit` (default 1) and
//!   `max_limit` (default 1000), starting at `initial_limit` (default 20,
//!   or the nearest bound); the estimator's own numbers (`tolerance`,
//!   `smoothing` for gradient2; `decay` for vegas; `backoff`, `timeout` for
//!   aimd) default to the estimator's.
//!
//! Both: `queue` (the most requests waiting, default the limit, or
//! `max_limit`) and `queue_order` (`fifo`, the default, or `lifo`) for
//! `mode: delay`, whose `max_delay` bounds each wait. Global, local only.
//! A reload that changes only numbers moves the live limiter (limit, queue,
//! estimator) and keeps the permits held.
//!
//! The numbers are checked by building the limiter and the estimator, so
//! what `limiter-concurrency` refuses is refused here, with its text.

use std::time::Duration;

use limiter_concurrency::{
    Aimd, Bounds, ConcurrencyLimiter, ConfigError, DriftGuard, Estimator, Gradient2, QueueOrder,
    Vegas,
};

use super::reader::required;
use super::{Algorithm, Definition, Reader};

/// `concurrency`.
pub(crate) const CONCURRENCY: Definition = Definition {
    name: "concurrency",
    fields: &["limit", "queue", "queue_order"],
    parse: parse_fixed,
    delay_by_default: false,
    keyed: false,
    redis: false,
    not_taken: NOT_FOR_CONCURRENCY,
};

/// `adaptive_concurrency`.
pub(crate) const ADAPTIVE_CONCURRENCY: Definition = Definition {
    name: "adaptive_concurrency",
    fields: &[
        "estimator",
        "initial_limit",
        "min_limit",
        "max_limit",
        "queue",
        "queue_order",
        "drift_guard",
        "tolerance",
        "smoothing",
        "decay",
        "backoff",
        "timeout",
    ],
    parse: parse_adaptive,
    delay_by_default: false,
    keyed: false,
    redis: false,
    not_taken: NOT_FOR_CONCURRENCY,
};

/// The common fields a concurrency rule does not take: it sends no
/// `RateLimit` headers (it has no quota), holds no keys and counts every
/// request it routes.
pub(crate) const NOT_FOR_CONCURRENCY: &[&str] = &[
    "headers",
    "max_keys",
    "allowlist",
    "trusted_proxies",
    "cost",
];

/// The wait queue of a concurrency rule (used in `mode: delay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSpec {
    /// The most requests waiting at once.
    pub capacity: u32,
    /// Which waiter a freed permit goes to.
    pub order: QueueOrder,
}

/// The estimator of an `adaptive_concurrency` rule and its numbers (`None`:
/// the estimator's default).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EstimatorSpec {
    /// `gradient2`: the ratio of a long-term RTT to the current one.
    Gradient2 {
        /// `tolerance`.
        tolerance: Option<f64>,
        /// `smoothing`.
        smoothing: Option<f64>,
    },
    /// `vegas`: queueing delay against a no-load RTT that decays.
    Vegas {
        /// `decay`.
        decay: Option<f64>,
    },
    /// `aimd`: additive increase, multiplicative decrease on loss.
    Aimd {
        /// `backoff`.
        backoff: Option<f64>,
        /// `timeout`: a success slower than this counts as a loss.
        timeout: Option<Duration>,
    },
}

impl EstimatorSpec {
    /// The name as written in a file.
    pub fn name(&self) -> &'static str {
        match self {
            EstimatorSpec::Gradient2 { .. } => "gradient2",
            EstimatorSpec::Vegas { .. } => "vegas",
            EstimatorSpec::Aimd { .. } => "aimd",
        }
    }

    /// The estimator within `bounds`, behind a [`DriftGuard`] when
    /// `drift_guard`: the one place a rule's estimator is made (validation
    /// and `limiter-config` both call it).
    ///
    /// # Errors
    ///
    /// The estimator's [`ConfigError`] for a number it refuses.
    pub fn build(
        &self,
        bounds: Bounds,
        drift_guard: bool,
    ) -> Result<Box<dyn Estimator>, ConfigError> {
        fn guarded<E: Estimator + 'static>(e: E, guard: bool) -> Box<dyn Estimator> {
            if guard {
                Box::new(DriftGuard::new(e))
            } else {
                Box::new(e)
            }
        }
        Ok(match *self {
            EstimatorSpec::Gradient2 {
                tolerance,
                smoothing,
            } => {
                let mut g = Gradient2::new(bounds);
                if let Some(t) = tolerance {
                    g = g.tolerance(t)?;
                }
                if let Some(s) = smoothing {
                    g = g.smoothing(s)?;
                }
                guarded(g, drift_guard)
            }
            EstimatorSpec::Vegas { decay } => {
                let mut v = Vegas::new(bounds);
                if let Some(d) = decay {
                    v = v.decay(d)?;
                }
                guarded(v, drift_guard)
            }
            EstimatorSpec::Aimd { backoff, timeout } => {
                let mut a = Aimd::new(bounds);
                if let Some(b) = backoff {
                    a = a.backoff(b)?;
                }
                if let Some(t) = timeout {
                    a = a.timeout(t);
                }
                guarded(a, drift_guard)
            }
        })
    }
}

/// The estimator fields and the estimators that take them.
const ESTIMATOR_FIELDS: &[(&str, &str)] = &[
    ("tolerance", "gradient2"),
    ("smoothing", "gradient2"),
    ("decay", "vegas"),
    ("backoff", "aimd"),
    ("timeout", "aimd"),
];

/// The default `initial_limit`, `min_limit` and `max_limit`.
const DEFAULT_INITIAL: u32 = 20;
const DEFAULT_MIN: u32 = 1;
const DEFAULT_MAX: u32 = 1000;

fn queue(r: &mut dyn Reader, default_capacity: u32) -> Option<QueueSpec> {
    let capacity = r.count("queue");
    let order = match r.string("queue_order") {
        None => None,
        Some(None) => Some(QueueOrder::Fifo),
        Some(Some(o)) => match o.as_str() {
            "fifo" => Some(QueueOrder::Fifo),
            "lifo" => Some(QueueOrder::Lifo),
            other => {
                let reason = format!("unknown queue order `{other}`");
                r.invalid("queue_order", reason, "fifo or lifo".into());
                None
            }
        },
    };
    Some(QueueSpec {
        capacity: capacity?.unwrap_or(default_capacity),
        order: order?,
    })
}

fn parse_fixed(r: &mut dyn Reader) -> Option<Algorithm> {
    let limit = r.count("limit");
    let limit = required(r, "limit", limit);
    let queue = queue(r, limit.unwrap_or(1));
    let (limit, queue) = (limit?, queue?);
    if let Err(e) = ConcurrencyLimiter::new(limit) {
        r.concurrency_error("limit", e);
        return None;
    }
    Some(Algorithm::Concurrency { limit, queue })
}

fn parse_adaptive(r: &mut dyn Reader) -> Option<Algorithm> {
    let estimator = match r.string("estimator") {
        None => None,
        Some(None) => Some("gradient2".to_owned()),
        Some(Some(e)) if matches!(e.as_str(), "gradient2" | "vegas" | "aimd") => Some(e),
        Some(Some(other)) => {
            let reason = format!("unknown estimator `{other}`");
            r.invalid("estimator", reason, "gradient2, vegas or aimd".into());
            None
        }
    };
    let min = r.count("min_limit");
    let max = r.count("max_limit");
    let initial = r.count("initial_limit");
    let queue_fields = queue(r, 0);
    let drift_guard = r.boolean("drift_guard");
    let tolerance = r.number("tolerance");
    let smoothing = r.number("smoothing");
    let decay = r.number("decay");
    let backoff = r.number("backoff");
    let timeout = r.duration("timeout");
    let estimator = estimator?;
    // A number for another estimator is a mistake, not something to ignore.
    let mut misplaced = false;
    for &(field, owner) in ESTIMATOR_FIELDS {
        if owner != estimator && r.present(field) {
            let reason = format!("`{field}` is a number of estimator {owner}, not of {estimator}");
            r.invalid(
                field,
                reason,
                format!("`estimator: {owner}`, or remove `{field}`"),
            );
            misplaced = true;
        }
    }
    let (min, max, initial, queue_fields, drift_guard) =
        (min?, max?, initial?, queue_fields?, drift_guard?);
    let (tolerance, smoothing, decay, backoff, timeout) =
        (tolerance?, smoothing?, decay?, backoff?, timeout?);
    if misplaced {
        return None;
    }
    let min_limit = min.unwrap_or(DEFAULT_MIN);
    let max_limit = max.unwrap_or(DEFAULT_MAX);
    let initial_limit =
        initial.unwrap_or_else(|| DEFAULT_INITIAL.clamp(min_limit, max_limit.max(min_limit)));
    let spec = match estimator.as_str() {
        "vegas" => EstimatorSpec::Vegas { decay },
        "aimd" => EstimatorSpec::Aimd { backoff, timeout },
        _ => EstimatorSpec::Gradient2 {
            tolerance,
            smoothing,
        },
    };
    let bounds = match Bounds::new(initial_limit, min_limit, max_limit) {
        Ok(b) => b,
        Err(e) => {
            let field = match e {
                ConfigError::ZeroLimit { name } | ConfigError::LimitTooLarge { name, .. } => name,
                ConfigError::InitialOutOfBounds { .. } if initial.is_some() => "initial_limit",
                _ if min.is_some() => "min_limit",
                _ => "max_limit",
            };
            r.concurrency_error(field, e);
            return None;
        }
    };
    let built = spec
        .build(bounds, drift_guard.unwrap_or(false))
        .and_then(|e| {
            ConcurrencyLimiter::adaptive(e).build()?;
            Ok(())
        });
    if let Err(e) = built {
        let field = match e {
            ConfigError::OutOfRange { name, .. } => name,
            _ => "estimator",
        };
        r.concurrency_error(field, e);
        return None;
    }
    let queue = QueueSpec {
        capacity: if queue_fields.capacity == 0 {
            max_limit
        } else {
            queue_fields.capacity
        },
        order: queue_fields.order,
    };
    Some(Algorithm::AdaptiveConcurrency {
        estimator: spec,
        bounds,
        drift_guard: drift_guard.unwrap_or(false),
        queue,
    })
}
