//! The algorithms of a rule file: for each, one [`Definition`] (its name,
//! its fields, how they are read and checked, its defaults and what it
//! supports) in a file of its own, and the [`Algorithm`] variant that holds
//! its numbers once checked.
//!
//! The schema walk (`validate`) knows no algorithm by name: it finds the
//! definition of the rule's `algorithm` in [`DEFINITIONS`], lists unknown
//! fields against the common fields and the definition's `fields`, lets the
//! definition read its fields through a [`Reader`], and checks a key, a
//! Redis backend and the default mode against the definition's flags.
//!
//! # Adding an algorithm
//!
//! 1. A file here, `my_algorithm.rs`, with `pub(crate) const MY_ALGORITHM:
//!    Definition` (name as written in files, the fields it takes beyond the
//!    common ones, `delay_by_default`, `keyed`, `redis`, `calendar`, the common fields
//!    it does not take) and its `parse`
//!    function: read the fields through the [`Reader`] (each problem is
//!    recorded by the reader at its position), then build the core limiter
//!    on a `ManualClock` so that numbers the core refuses are refused here,
//!    with the core's text ([`Reader::core_error`]).
//! 2. Its entry in [`DEFINITIONS`] (which makes [`ALGORITHMS`], the list
//!    the unknown-algorithm fix prints) and its variant in [`Algorithm`];
//!    the compiler then asks for its arm in the three matches of this file
//!    (`definition`, `quota`, `fixed`) and in `Display`.
//! 3. In `limiter-config`, the arm of `live::build` that makes its limiter.
//!
//! Nothing else names an algorithm: not the walk, not the error texts, not
//! the HTTP layer.

use std::fmt;
use std::time::Duration;

use http::header::HeaderName;
use limiter_core::Quota;

use crate::units::{DisplayDuration, Rate};

mod adaptive;
mod concurrency;
mod gcra;
mod priority;
mod reader;
mod sliding_window;
mod warm_up;

pub use concurrency::{EstimatorSpec, QueueSpec};
pub(crate) use reader::Reader;

/// What the checks need to know about one algorithm.
#[derive(Debug)]
pub(crate) struct Definition {
    /// The name as written in a file.
    pub(crate) name: &'static str,
    /// The fields it takes beyond the common ones, in the order the
    /// unknown-field fix lists them.
    pub(crate) fields: &'static [&'static str],
    /// Reads and checks its fields; `None` after any problem (recorded by
    /// the reader).
    pub(crate) parse: fn(&mut dyn Reader) -> Option<Algorithm>,
    /// Whether a rule holds requests (`mode: delay`) unless it says
    /// otherwise.
    pub(crate) delay_by_default: bool,
    /// Whether a rule can have a key other than `global`.
    pub(crate) keyed: bool,
    /// Whether a rule can run on `backend: redis`.
    pub(crate) redis: bool,
    /// Whether a rule can carry a calendar `quota` beside its rate (a
    /// composite both must admit).
    pub(crate) calendar: bool,
    /// The common fields this algorithm does not take (unknown fields in
    /// its rules).
    pub(crate) not_taken: &'static [&'static str],
}

/// Every algorithm, in the order the unknown-algorithm fix lists them.
pub(crate) const DEFINITIONS: &[&Definition] = &[
    &gcra::TOKEN_BUCKET,
    &gcra::LEAKY_BUCKET,
    &sliding_window::SLIDING_WINDOW,
    &warm_up::WARM_UP,
    &adaptive::ADAPTIVE,
    &priority::PRIORITY,
    &concurrency::CONCURRENCY,
    &concurrency::ADAPTIVE_CONCURRENCY,
];

/// The algorithms, as they are spelled in a file.
pub const ALGORITHMS: &[&str] = &{
    let mut names = [""; DEFINITIONS.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = DEFINITIONS[i].name;
        i += 1;
    }
    names
};

/// The definition of the algorithm named `name` in a file.
pub(crate) fn definition(name: &str) -> Option<&'static Definition> {
    DEFINITIONS.iter().copied().find(|d| d.name == name)
}

/// The names of the algorithms for which `flag` holds, as "a or b", "a, b
/// or c" (for fixes).
pub(crate) fn names_where(flag: impl Fn(&Definition) -> bool) -> String {
    let names: Vec<&str> = DEFINITIONS
        .iter()
        .filter(|d| flag(d))
        .map(|d| d.name)
        .collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// The numbers of an algorithm that `set_quota` cannot change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fixed<'a> {
    /// None: the whole quota moves through `set_quota`.
    Nothing,
    /// The priority classes (the quota moves).
    Classes(&'a [(String, f64)]),
    /// Everything (no `set_quota`).
    All(&'a Algorithm),
}

/// An algorithm with its numbers, all valid.
#[derive(Debug, Clone, PartialEq)]
pub enum Algorithm {
    /// GCRA at `rate` with `burst`: reject mode by default.
    TokenBucket {
        /// The rate as written.
        rate: Rate,
        /// The quota (`rate` with `burst`).
        quota: Quota,
    },
    /// GCRA pacing at `rate` (burst 1 unless given): delay mode by default.
    LeakyBucket {
        /// The rate as written.
        rate: Rate,
        /// The quota.
        quota: Quota,
    },
    /// At most `limit` per `window`, the previous window weighted in.
    SlidingWindow {
        /// Permits per window.
        limit: u32,
        /// The window.
        window: Duration,
    },
    /// GCRA whose rate ramps up over `warm_up` after idle time.
    WarmUp {
        /// The rate when warm.
        rate: Rate,
        /// The warm quota.
        quota: Quota,
        /// How long a cold limiter takes to reach `rate`.
        warm_up: Duration,
        /// How much slower than `rate` a cold limiter starts.
        cold_factor: f64,
    },
    /// A rate moved between bounds by observed latency.
    Adaptive {
        /// The controller moving the rate (the file's `policy` key).
        controller: ControllerSpec,
        /// The lowest rate, per second.
        min_rate: f64,
        /// The highest (and starting) rate, per second.
        max_rate: f64,
        /// The burst.
        burst: u32,
    },
    /// One GCRA shared by classes, each limited to its share of the burst.
    Priority {
        /// The rate as written.
        rate: Rate,
        /// The quota.
        quota: Quota,
        /// Class names and shares, highest class first (share 1.0).
        classes: Vec<(String, f64)>,
        /// The request header naming a request's class (HTTP); a request
        /// without it, or naming no class, is of the lowest class.
        class_header: Option<HeaderName>,
    },
    /// At most `limit` requests in progress at once.
    Concurrency {
        /// The limit.
        limit: u32,
        /// The wait queue (`mode: delay`).
        queue: QueueSpec,
    },
    /// A concurrency limit an estimator moves within bounds, learned from
    /// the latency and status of the requests it admits.
    AdaptiveConcurrency {
        /// The estimator and its numbers.
        estimator: EstimatorSpec,
        /// Initial, lowest and highest limit.
        bounds: limiter_concurrency::Bounds,
        /// Whether a `DriftGuard` wraps the estimator.
        drift_guard: bool,
        /// The wait queue (`mode: delay`).
        queue: QueueSpec,
    },
}

/// Which rate controller an adaptive rule follows (limiter-core's
/// `adaptive::RateController`), written as its `policy` key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ControllerSpec {
    /// `EwmaAimd`: hold the latency average at `target`.
    EwmaAimd {
        /// The target latency.
        target: Duration,
    },
    /// `PercentileWindow`: hold the p99 (per window) under `target`.
    Percentile {
        /// The latency threshold.
        target: Duration,
    },
}

impl Algorithm {
    /// The name as written in a file.
    pub fn name(&self) -> &'static str {
        self.definition().name
    }

    /// The definition of this algorithm: the one match on its kind that
    /// the checks need.
    pub(crate) fn definition(&self) -> &'static Definition {
        match self {
            Algorithm::TokenBucket { .. } => &gcra::TOKEN_BUCKET,
            Algorithm::LeakyBucket { .. } => &gcra::LEAKY_BUCKET,
            Algorithm::SlidingWindow { .. } => &sliding_window::SLIDING_WINDOW,
            Algorithm::WarmUp { .. } => &warm_up::WARM_UP,
            Algorithm::Adaptive { .. } => &adaptive::ADAPTIVE,
            Algorithm::Priority { .. } => &priority::PRIORITY,
            Algorithm::Concurrency { .. } => &concurrency::CONCURRENCY,
            Algorithm::AdaptiveConcurrency { .. } => &concurrency::ADAPTIVE_CONCURRENCY,
        }
    }

    /// The GCRA quota of the algorithms that have one.
    pub fn quota(&self) -> Option<Quota> {
        match *self {
            Algorithm::TokenBucket { quota, .. }
            | Algorithm::LeakyBucket { quota, .. }
            | Algorithm::WarmUp { quota, .. }
            | Algorithm::Priority { quota, .. } => Some(quota),
            Algorithm::SlidingWindow { .. }
            | Algorithm::Adaptive { .. }
            | Algorithm::Concurrency { .. }
            | Algorithm::AdaptiveConcurrency { .. } => None,
        }
    }

    /// The numbers a live limiter cannot take through `set_quota`: a reload
    /// that changes them replaces the limiter.
    pub(crate) fn fixed(&self) -> Fixed<'_> {
        match self {
            // A concurrency limiter takes a new limit, queue and estimator
            // in place (limiter-config's reload).
            Algorithm::TokenBucket { .. }
            | Algorithm::LeakyBucket { .. }
            | Algorithm::Concurrency { .. }
            | Algorithm::AdaptiveConcurrency { .. } => Fixed::Nothing,
            Algorithm::Priority { classes, .. } => Fixed::Classes(classes),
            other @ (Algorithm::SlidingWindow { .. }
            | Algorithm::WarmUp { .. }
            | Algorithm::Adaptive { .. }) => Fixed::All(other),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = |f: &mut fmt::Formatter<'_>, rate: &Rate, quota: &Quota| {
            write!(
                f,
                "rate {rate} (one permit every {}), burst {}",
                DisplayDuration(quota.period()),
                quota.burst()
            )
        };
        write!(f, "{}: ", self.name())?;
        match self {
            Algorithm::TokenBucket { rate, quota } | Algorithm::LeakyBucket { rate, quota } => {
                q(f, rate, quota)
            }
            Algorithm::SlidingWindow { limit, window } => {
                write!(f, "limit {limit} per {}", DisplayDuration(*window))
            }
            Algorithm::WarmUp {
                rate,
                quota,
                warm_up,
                cold_factor,
            } => {
                q(f, rate, quota)?;
                write!(
                    f,
                    ", warm-up {}, cold factor {cold_factor}",
                    DisplayDuration(*warm_up)
                )
            }
            Algorithm::Adaptive {
                controller,
                min_rate,
                max_rate,
                burst,
            } => {
                let (name, target) = match controller {
                    ControllerSpec::EwmaAimd { target } => ("ewma_aimd", target),
                    ControllerSpec::Percentile { target } => ("percentile", target),
                };
                write!(
                    f,
                    "policy {name} (target {}), rate {min_rate}/s to {max_rate}/s, burst {burst}",
                    DisplayDuration(*target)
                )
            }
            Algorithm::Priority {
                rate,
                quota,
                classes,
                class_header,
            } => {
                q(f, rate, quota)?;
                f.write_str(", classes")?;
                for (name, share) in classes {
                    write!(f, " {name}={share}")?;
                }
                match class_header {
                    Some(h) => write!(f, ", class from header {h}"),
                    None => Ok(()),
                }
            }
            Algorithm::Concurrency { limit, queue } => {
                write!(
                    f,
                    "limit {limit} at once, queue {} {:?}",
                    queue.capacity, queue.order
                )
            }
            Algorithm::AdaptiveConcurrency {
                estimator,
                bounds,
                drift_guard,
                queue,
            } => {
                write!(
                    f,
                    "estimator {}{}, limit {} in [{}, {}], queue {} {:?}",
                    estimator.name(),
                    if *drift_guard {
                        " with drift guard"
                    } else {
                        ""
                    },
                    bounds.initial,
                    bounds.min,
                    bounds.max,
                    queue.capacity,
                    queue.order
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_definition_is_found_by_its_name_and_names_are_unique() {
        for (i, d) in DEFINITIONS.iter().enumerate() {
            assert_eq!(definition(d.name).map(|f| f.name), Some(d.name));
            assert!(
                !DEFINITIONS[..i].iter().any(|e| e.name == d.name),
                "{}",
                d.name
            );
        }
        assert_eq!(ALGORITHMS.len(), DEFINITIONS.len());
        assert_eq!(names_where(|d| d.keyed), "token_bucket or leaky_bucket");
        assert_eq!(definition("token-bucket").map(|d| d.name), None);
    }
}
