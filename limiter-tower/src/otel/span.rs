//! The span of one decision of the layer, and the attribute names and
//! decision values every span of the workspace uses (limiter-rls's too).

use std::time::{Duration, Instant};

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};

use limiter_core::Denial;

/// The attribute names of the workspace's spans.
pub mod attribute {
    /// The rule (the layer's name; limiter-rls: the rule's key path).
    pub const RULE: &str = "ratelimit.rule";
    /// The [`Decision`](super::Decision).
    pub const DECISION: &str = "ratelimit.decision";
    /// The wait in milliseconds (a float): a delayed request's hold, a
    /// rejected one's `Retry-After`.
    pub const WAIT_MS: &str = "ratelimit.wait_ms";
    /// The backend's decision, in microseconds (an integer): the store's
    /// round trip on Redis.
    pub const BACKEND_LATENCY_US: &str = "ratelimit.backend.latency_us";
}

/// What was decided, as the `ratelimit.decision` attribute says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let through at once.
    Admitted,
    /// Refused (`429`, `413`, or limiter-rls's `OVER_LIMIT`).
    Rejected,
    /// Held, then let through.
    Delayed,
    /// The backend could not decide (the store failed).
    Unavailable,
}

impl Decision {
    /// The attribute's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Admitted => "admitted",
            Decision::Rejected => "rejected",
            Decision::Delayed => "delayed",
            Decision::Unavailable => "unavailable",
        }
    }
}

/// The span of one decision of the layer, from just before the backend is
/// asked to the end of the request's hold. Boxed: a span is hundreds of
/// bytes, which the request's future would otherwise carry traced or not.
pub(crate) struct DecisionTrace(Box<Traced>);

struct Traced {
    span: Span,
    /// When the backend was asked.
    asked: Instant,
}

// Every step is cold and out of line: a layer without a tracer never runs
// them, and the request path it does run carries none of their code.
impl DecisionTrace {
    /// A span for the rule `name`, child of the request's `traceparent`.
    #[cold]
    #[inline(never)]
    pub(crate) fn start(tracer: &SdkTracer, name: &str, headers: &http::HeaderMap) -> Self {
        let parent = super::parent_context(headers);
        let mut span = tracer
            .span_builder("ratelimit.decision")
            .with_kind(SpanKind::Internal)
            .start_with_context(tracer, &parent);
        span.set_attribute(KeyValue::new(attribute::RULE, name.to_owned()));
        DecisionTrace(Box::new(Traced {
            span,
            asked: Instant::now(),
        }))
    }

    /// The backend is asked now (the asynchronous path, after the box).
    #[cold]
    #[inline(never)]
    pub(crate) fn asking(&mut self) {
        self.0.asked = Instant::now();
    }

    /// The backend answered: its latency.
    #[cold]
    #[inline(never)]
    pub(crate) fn answered(&mut self) {
        let micros = self.0.asked.elapsed().as_micros();
        self.0.span.set_attribute(KeyValue::new(
            attribute::BACKEND_LATENCY_US,
            i64::try_from(micros).unwrap_or(i64::MAX),
        ));
    }

    /// Let through after `wait`: ends the span, and `headers`' trace
    /// context becomes the span's, so what follows is its child.
    #[cold]
    #[inline(never)]
    pub(crate) fn admitted(mut self, wait: Duration, headers: &mut http::HeaderMap) {
        let decision = if wait.is_zero() {
            Decision::Admitted
        } else {
            Decision::Delayed
        };
        self.decision(decision, wait);
        let Traced { mut span, .. } = *self.0;
        span.end();
        super::inject(
            &Context::new().with_remote_span_context(span.span_context().clone()),
            headers,
        );
    }

    /// Refused or failed: ends the span.
    #[cold]
    #[inline(never)]
    pub(crate) fn denied(mut self, denial: &Denial) {
        match denial {
            Denial::RateLimited { retry_after, .. } => {
                self.decision(Decision::Rejected, *retry_after);
            }
            Denial::OverBurst { .. } => self.decision(Decision::Rejected, Duration::ZERO),
            other => {
                self.decision(Decision::Unavailable, Duration::ZERO);
                self.0.span.set_status(Status::error(other.to_string()));
            }
        }
    }

    fn decision(&mut self, decision: Decision, wait: Duration) {
        let span = &mut self.0.span;
        span.set_attribute(KeyValue::new(attribute::DECISION, decision.as_str()));
        span.set_attribute(KeyValue::new(attribute::WAIT_MS, wait.as_secs_f64() * 1e3));
    }
}
