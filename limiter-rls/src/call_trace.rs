//! The span of one `ShouldRateLimit` call (feature `otel`; without it
//! [`CallTrace`] is uninhabited and every use of it compiles away).
//!
//! One span per call, named `ShouldRateLimit`, a server span continuing the
//! caller's `traceparent`: Envoy's rate-limit filter makes one client call
//! per request, so a trace shows one RLS bar under Envoy's, as with
//! envoyproxy/ratelimit (`ShouldRateLimit Execution`). Its descriptors are
//! decided together in the same backend calls, so they have no duration of
//! their own: each is an event (`ratelimit.descriptor`) on the span, not a
//! child span.
//!
//! Attributes (limiter-tower's `otel::attribute` names and
//! `otel::Decision` values, as the HTTP layer's spans): `ratelimit.domain`,
//! `ratelimit.decision` (`admitted` or `rejected`: Envoy's `OK` or
//! `OVER_LIMIT`), `ratelimit.backend` (`memory` or `redis`) and
//! `ratelimit.backend.latency_us` (every store call of the decision
//! together) on the span; per descriptor with a limit, `ratelimit.rule`
//! (the rule's key path from the config), `ratelimit.decision` and
//! `ratelimit.wait_ms` (the `duration_until_reset` answered). Descriptor
//! values are never recorded, not even hashed: they hold client keys (IP
//! addresses, user ids) whose hashes are reversed by enumeration.

#[cfg(feature = "otel")]
mod span {
    use core::time::Duration;

    use limiter_tower::otel::attribute;
    use opentelemetry::KeyValue;
    use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
    use opentelemetry_sdk::trace::{SdkTracer, Span};

    /// The span of one call; ended when dropped.
    #[derive(Debug)]
    pub(crate) struct CallTrace(Span);

    impl CallTrace {
        /// A span continuing the `traceparent` of `headers`.
        pub(crate) fn start(tracer: &SdkTracer, headers: &http::HeaderMap) -> CallTrace {
            let parent = limiter_tower::otel::parent_context(headers);
            let span = tracer
                .span_builder("ShouldRateLimit")
                .with_kind(SpanKind::Server)
                .start_with_context(tracer, &parent);
            CallTrace(span)
        }

        pub(crate) fn domain(&mut self, domain: &str) {
            self.0
                .set_attribute(KeyValue::new("ratelimit.domain", domain.to_owned()));
        }

        pub(crate) fn backend(&mut self, store: &'static str, latency: Duration) {
            self.0
                .set_attribute(KeyValue::new("ratelimit.backend", store));
            self.0.set_attribute(KeyValue::new(
                attribute::BACKEND_LATENCY_US,
                i64::try_from(latency.as_micros()).unwrap_or(i64::MAX),
            ));
        }

        pub(crate) fn descriptor(&mut self, rule: &str, over: bool, wait: Duration) {
            self.0.add_event(
                "ratelimit.descriptor",
                vec![
                    KeyValue::new(attribute::RULE, rule.to_owned()),
                    KeyValue::new(attribute::DECISION, decision(over)),
                    KeyValue::new(attribute::WAIT_MS, wait.as_secs_f64() * 1e3),
                ],
            );
        }

        pub(crate) fn decided(&mut self, over: bool) {
            self.0
                .set_attribute(KeyValue::new(attribute::DECISION, decision(over)));
        }

        pub(crate) fn failed(&mut self, error: &str) {
            self.0.set_status(Status::error(error.to_owned()));
        }
    }

    fn decision(over: bool) -> &'static str {
        use limiter_tower::otel::Decision;
        if over {
            Decision::Rejected.as_str()
        } else {
            Decision::Admitted.as_str()
        }
    }
}

#[cfg(not(feature = "otel"))]
mod span {
    use core::time::Duration;

    /// No span: tracing is not compiled in.
    #[derive(Debug)]
    pub(crate) enum CallTrace {}

    impl CallTrace {
        pub(crate) fn domain(&mut self, _: &str) {
            match *self {}
        }
        pub(crate) fn backend(&mut self, _: &'static str, _: Duration) {
            match *self {}
        }
        pub(crate) fn descriptor(&mut self, _: &str, _: bool, _: Duration) {
            match *self {}
        }
        pub(crate) fn decided(&mut self, _: bool) {
            match *self {}
        }
        pub(crate) fn failed(&mut self, _: &str) {
            match *self {}
        }
    }
}

pub(crate) use span::CallTrace;
