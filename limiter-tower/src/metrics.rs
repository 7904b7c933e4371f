//! The layer's metrics, through the `metrics` facade (no exporter here).
//!
//! | name | kind | meaning |
//! |---|---|---|
//! | `rate_limit_allowed_total` | counter | requests passed to the inner service after a grant |
//! | `rate_limit_rejected_total` | counter | requests answered 429 or 413 |
//! | `rate_limit_delayed_total` | counter | requests that waited for their slot (also counted as allowed once through) |
//! | `rate_limit_bypassed_total` | counter | requests passed uncounted (bypass predicate, allowlist) |
//! | `rate_limit_backend_errors_total` | counter | decisions the backend could not make (passed or 503 by `fail_open`) |
//! | `rate_limit_queue_size` | gauge | requests waiting for their slot right now |
//! | `rate_limit_wait_seconds` | histogram | the wait of each delayed request |
//! | `rate_limit_cost_invalid_total` | counter | responses whose cost after the response was missing or malformed (nothing charged) |
//! | `rate_limit_cost_charged_total` | counter | permits charged as debt after responses |
//! | `rate_limit_cost_dropped_total` | counter | permits of costs after the response above the debt cap, not charged |
//!
//! Every series has the label `limiter` (the layer's name) and, when the
//! layer labels routes, `route` (the route template, which is bounded);
//! never the key: keys are unbounded. Without route labels the handles are
//! registered when the layer is built, with the recorder installed then;
//! with them, per request.

use std::sync::Once;

use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};

/// The HELP text of every family, given to the recorder once.
fn describe() {
    static DESCRIBED: Once = Once::new();
    DESCRIBED.call_once(|| {
        describe_counter!(
            "rate_limit_allowed_total",
            "Requests passed to the inner service after a grant."
        );
        describe_counter!(
            "rate_limit_rejected_total",
            "Requests answered 429 or 413 by the limiter."
        );
        describe_counter!(
            "rate_limit_delayed_total",
            "Requests that waited for their slot (also counted as allowed)."
        );
        describe_counter!(
            "rate_limit_bypassed_total",
            "Requests passed uncounted (bypass predicate, allowlist)."
        );
        describe_counter!(
            "rate_limit_backend_errors_total",
            "Decisions the backend could not make (passed or 503 by fail_open)."
        );
        describe_counter!(
            "rate_limit_cost_invalid_total",
            "Responses whose cost was missing or malformed (nothing charged)."
        );
        describe_counter!(
            "rate_limit_cost_charged_total",
            "Permits charged as debt after responses."
        );
        describe_counter!(
            "rate_limit_cost_dropped_total",
            "Permits of costs after the response above the debt cap, not charged."
        );
        describe_gauge!(
            "rate_limit_queue_size",
            "Requests waiting for their slot right now."
        );
        describe_histogram!(
            "rate_limit_wait_seconds",
            Unit::Seconds,
            "The wait of each delayed request."
        );
    });
}

/// The handles of one layer.
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    pub(crate) allowed: Counter,
    pub(crate) rejected: Counter,
    pub(crate) delayed: Counter,
    pub(crate) bypassed: Counter,
    pub(crate) backend_errors: Counter,
    pub(crate) queue_size: Gauge,
    pub(crate) wait_seconds: Histogram,
    pub(crate) cost_invalid: Counter,
    pub(crate) cost_charged: Counter,
    pub(crate) cost_dropped: Counter,
}

impl Metrics {
    pub(crate) fn new(name: &str) -> Metrics {
        describe();
        let label = name.to_owned();
        Metrics {
            allowed: counter!("rate_limit_allowed_total", "limiter" => label.clone()),
            rejected: counter!("rate_limit_rejected_total", "limiter" => label.clone()),
            delayed: counter!("rate_limit_delayed_total", "limiter" => label.clone()),
            bypassed: counter!("rate_limit_bypassed_total", "limiter" => label.clone()),
            backend_errors: counter!("rate_limit_backend_errors_total", "limiter" => label.clone()),
            queue_size: gauge!("rate_limit_queue_size", "limiter" => label.clone()),
            cost_invalid: counter!("rate_limit_cost_invalid_total", "limiter" => label.clone()),
            cost_charged: counter!("rate_limit_cost_charged_total", "limiter" => label.clone()),
            cost_dropped: counter!("rate_limit_cost_dropped_total", "limiter" => label.clone()),
            wait_seconds: histogram!("rate_limit_wait_seconds", "limiter" => label),
        }
    }

    pub(crate) fn with_route(name: &str, route: &str) -> Metrics {
        describe();
        let labels = [("limiter", name.to_owned()), ("route", route.to_owned())];
        Metrics {
            allowed: counter!("rate_limit_allowed_total", &labels),
            rejected: counter!("rate_limit_rejected_total", &labels),
            delayed: counter!("rate_limit_delayed_total", &labels),
            bypassed: counter!("rate_limit_bypassed_total", &labels),
            backend_errors: counter!("rate_limit_backend_errors_total", &labels),
            queue_size: gauge!("rate_limit_queue_size", &labels),
            wait_seconds: histogram!("rate_limit_wait_seconds", &labels),
            cost_invalid: counter!("rate_limit_cost_invalid_total", &labels),
            cost_charged: counter!("rate_limit_cost_charged_total", &labels),
            cost_dropped: counter!("rate_limit_cost_dropped_total", &labels),
        }
    }
}
