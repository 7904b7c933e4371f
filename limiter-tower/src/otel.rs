//! OpenTelemetry traces, one mechanism for the layer, the gateway and
//! limiter-rls: what to export, how and how to sample ([`TraceConfig`],
//! plain data read from the standard `OTEL_*` variables by
//! [`TraceConfig::from_otel_env`]) and, with the cargo feature `otel`:
//!
//! * the exporter ([`tracer_provider`]: OTLP over gRPC or over HTTP with
//!   protobuf bodies, batched on the provider's own thread);
//! * the W3C trace context of a request ([`parent_context`] reads its
//!   `traceparent`, [`inject`] writes one);
//! * the span of each decision of a [`RateLimitLayer`](crate::RateLimitLayer)
//!   (the layer's [`tracer`](crate::RateLimitBuilder::tracer), else
//!   [`set_default_tracer`]'s), and the [attribute names](attribute) and
//!   [`Decision`] values every span of the workspace uses.
//!
//! # The decision span
//!
//! One span per decision, named `ratelimit.decision`, a child of the
//! request's `traceparent` (a new trace without one). Attributes:
//! `ratelimit.rule` (the layer's name: the rule's), `ratelimit.decision`
//! (`admitted`, `rejected`, `delayed`, `unavailable`), `ratelimit.wait_ms`
//! (the hold of a delayed request, the `Retry-After` of a rejected one) and
//! `ratelimit.backend.latency_us` (the backend's decision: Redis' round
//! trip). The client's key is never recorded, not even hashed: keys are
//! IP addresses and user ids whose hashes are reversed by enumeration. A
//! delayed request's span ends when its hold does. An admitted request
//! goes on with its `traceparent` naming the decision span, so the inner
//! service (the gateway's upstream) continues the same trace below it.
//!
//! Without a tracer the layer starts no span and reads no header: one test
//! of a field per request, which callgrind does not see
//! (docs/benchmarks.md). Without the feature only the configuration is
//! compiled, so a build that does not trace compiles no OpenTelemetry
//! crate.

#[cfg(feature = "otel")]
mod export;
#[cfg(feature = "otel")]
mod http_client;
#[cfg(feature = "otel")]
pub(crate) mod span;

/// Without the feature: no span type at all, so `Option<DecisionTrace>` is
/// empty and every use of it compiles away.
#[cfg(not(feature = "otel"))]
pub(crate) mod span {
    /// No span: tracing is not compiled in.
    pub(crate) enum DecisionTrace {}

    impl DecisionTrace {
        pub(crate) fn asking(&mut self) {
            match *self {}
        }
        pub(crate) fn answered(&mut self) {
            match *self {}
        }
        pub(crate) fn admitted(self, _: std::time::Duration, _: &mut http::HeaderMap) {
            match self {}
        }
        pub(crate) fn denied(self, _: &limiter_core::Denial) {
            match self {}
        }
    }
}

#[cfg(feature = "otel")]
pub use export::{
    ExportError, default_tracer, inject, install, parent_context, set_default_tracer,
    tracer_provider,
};
/// The tracer and its provider (opentelemetry_sdk's), for users who need
/// not name that crate.
#[cfg(feature = "otel")]
pub use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
#[cfg(feature = "otel")]
pub use span::{Decision, attribute};

/// How spans travel to the collector: `OTEL_EXPORTER_OTLP_PROTOCOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `grpc`: OTLP/gRPC, usually port 4317.
    Grpc,
    /// `http/protobuf`: OTLP/HTTP, protobuf bodies POSTed to `/v1/traces`,
    /// usually port 4318.
    HttpProtobuf,
}

impl Protocol {
    /// Parses `grpc` or `http/protobuf` (`http` too: envoyproxy/ratelimit's
    /// `TRACING_EXPORTER_PROTOCOL` spelling).
    ///
    /// # Errors
    ///
    /// What to write instead (`http/json` is not supported).
    pub fn parse(s: &str) -> Result<Protocol, &'static str> {
        match s.trim().to_ascii_lowercase().as_str() {
            "grpc" => Ok(Protocol::Grpc),
            "http" | "http/protobuf" => Ok(Protocol::HttpProtobuf),
            _ => Err("grpc or http/protobuf (http/json is not supported)"),
        }
    }

    /// The collector's default endpoint over this protocol.
    fn default_endpoint(self) -> &'static str {
        match self {
            Protocol::Grpc => "http://localhost:4317",
            Protocol::HttpProtobuf => "http://localhost:4318",
        }
    }
}

/// How traces are sampled: OpenTelemetry's `OTEL_TRACES_SAMPLER` values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// `always_on`.
    AlwaysOn,
    /// `always_off`.
    AlwaysOff,
    /// `traceidratio`: this fraction of root traces (0 to 1).
    Ratio(f64),
    /// `parentbased_always_on`: the caller's decision, else sampled.
    ParentBasedOn,
    /// `parentbased_always_off`: the caller's decision, else not sampled.
    ParentBasedOff,
    /// `parentbased_traceidratio`: the caller's decision, else this
    /// fraction (envoyproxy/ratelimit's sampler, with `TRACING_SAMPLING_RATE`).
    ParentBasedRatio(f64),
}

impl Sampling {
    /// Parses `OTEL_TRACES_SAMPLER` with its `OTEL_TRACES_SAMPLER_ARG` (the
    /// ratio of the two ratio samplers, 1 when unset).
    ///
    /// # Errors
    ///
    /// What is wrong, for the caller to name the variable: an unknown
    /// sampler, or a ratio that is not a number from 0 to 1.
    pub fn parse(name: &str, arg: Option<&str>) -> Result<Sampling, &'static str> {
        let ratio = || match arg {
            None => Ok(1.0),
            Some(a) => ratio(a).ok_or("OTEL_TRACES_SAMPLER_ARG: a number from 0 to 1"),
        };
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "always_on" => Sampling::AlwaysOn,
            "always_off" => Sampling::AlwaysOff,
            "traceidratio" => Sampling::Ratio(ratio()?),
            "parentbased_always_on" => Sampling::ParentBasedOn,
            "parentbased_always_off" => Sampling::ParentBasedOff,
            "parentbased_traceidratio" => Sampling::ParentBasedRatio(ratio()?),
            _ => {
                return Err("OTEL_TRACES_SAMPLER: always_on, always_off, traceidratio, \
                     parentbased_always_on, parentbased_always_off or parentbased_traceidratio");
            }
        })
    }
}

/// A sampling ratio: a number from 0 to 1.
pub fn ratio(s: &str) -> Option<f64> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
}

/// What a process exports its spans as, and to where.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceConfig {
    /// The protocol.
    pub protocol: Protocol,
    /// The URL spans are sent to: over gRPC the collector's, over HTTP the
    /// full URL of the traces resource (`…/v1/traces`).
    pub endpoint: String,
    /// `service.name` of the resource.
    pub service_name: String,
    /// `service.namespace`, when set.
    pub service_namespace: Option<String>,
    /// `service.instance.id`, when set.
    pub service_instance_id: Option<String>,
    /// The sampler.
    pub sampling: Sampling,
}

impl TraceConfig {
    /// The standard variables through `get`:
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`
    /// (else `defaults.protocol`), `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the
    /// URL as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (the base, to which
    /// OTLP/HTTP appends `/v1/traces`), `http://` prefixed when it has no
    /// scheme (Envoy Gateway passes `host:port`), else the protocol's
    /// default port on localhost; `OTEL_SERVICE_NAME` (else
    /// `defaults.service_name`), `OTEL_TRACES_SAMPLER` and
    /// `OTEL_TRACES_SAMPLER_ARG` (else `defaults.sampling`). The service's
    /// namespace and instance id are `defaults`'.
    ///
    /// # Errors
    ///
    /// The variable that does not parse, and what it takes.
    pub fn from_otel_env(
        get: &dyn Fn(&str) -> Option<String>,
        defaults: Defaults<'_>,
    ) -> Result<TraceConfig, (&'static str, &'static str)> {
        let sampling = match get("OTEL_TRACES_SAMPLER") {
            Some(s) => Sampling::parse(&s, get("OTEL_TRACES_SAMPLER_ARG").as_deref())
                .map_err(|e| e.split_once(": ").unwrap_or(("OTEL_TRACES_SAMPLER", e)))?,
            None => defaults.sampling,
        };
        let set = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let protocol = match [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]
        .into_iter()
        .find_map(|name| Some((name, set(name)?)))
        {
            Some((name, p)) => Protocol::parse(&p).map_err(|e| (name, e))?,
            None => defaults.protocol,
        };
        let with_scheme = |e: String| {
            let e = e.trim().to_owned();
            if e.contains("://") {
                e
            } else {
                format!("http://{e}")
            }
        };
        let endpoint = match set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some(url) => with_scheme(url),
            None => {
                let base = set("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .map_or_else(|| protocol.default_endpoint().to_owned(), with_scheme);
                match protocol {
                    Protocol::Grpc => base,
                    Protocol::HttpProtobuf => format!("{}/v1/traces", base.trim_end_matches('/')),
                }
            }
        };
        Ok(TraceConfig {
            protocol,
            endpoint,
            service_name: get("OTEL_SERVICE_NAME")
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| defaults.service_name.to_owned()),
            service_namespace: defaults.service_namespace.map(str::to_owned),
            service_instance_id: defaults.service_instance_id.map(str::to_owned),
            sampling,
        })
    }

    /// The gateway's and an embedding service's switch: a config when
    /// `OTEL_TRACES_EXPORTER` is `otlp` or an OTLP endpoint variable is set,
    /// `None` when none is, when `OTEL_TRACES_EXPORTER` is `none` or
    /// `OTEL_SDK_DISABLED` is `true` (tracing is opt-in: a process that was
    /// not told where to send spans sends none).
    ///
    /// # Errors
    ///
    /// As [`TraceConfig::from_otel_env`], and an exporter other than `otlp`
    /// or `none`.
    pub fn if_enabled(
        get: &dyn Fn(&str) -> Option<String>,
        defaults: Defaults<'_>,
    ) -> Result<Option<TraceConfig>, (&'static str, &'static str)> {
        let set = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let asked = match set("OTEL_TRACES_EXPORTER") {
            Some(e) if e.trim().eq_ignore_ascii_case("none") => return Ok(None),
            Some(e) if e.trim().eq_ignore_ascii_case("otlp") => true,
            Some(_) => return Err(("OTEL_TRACES_EXPORTER", "otlp or none")),
            None => false,
        };
        let endpoint = set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
        if !(asked || endpoint) {
            return Ok(None);
        }
        TraceConfig::from_otel_env(get, defaults).map(Some)
    }
}

/// What [`TraceConfig::from_otel_env`] falls back on where no `OTEL_*`
/// variable says.
#[derive(Debug, Clone, Copy)]
pub struct Defaults<'a> {
    /// `service.name`.
    pub service_name: &'a str,
    /// `service.namespace`, when there is one.
    pub service_namespace: Option<&'a str>,
    /// `service.instance.id`, when there is one.
    pub service_instance_id: Option<&'a str>,
    /// The sampler.
    pub sampling: Sampling,
    /// The protocol.
    pub protocol: Protocol,
}

impl Default for Defaults<'_> {
    /// OpenTelemetry's own: OTLP/gRPC, `parentbased_always_on`, the service
    /// named `unknown_service`.
    fn default() -> Self {
        Defaults {
            service_name: "unknown_service",
            service_namespace: None,
            service_instance_id: None,
            sampling: Sampling::ParentBasedOn,
            protocol: Protocol::Grpc,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samplers_parse_as_opentelemetry_names_them() {
        assert_eq!(Sampling::parse("always_off", None), Ok(Sampling::AlwaysOff));
        assert_eq!(
            Sampling::parse("ParentBased_TraceIdRatio", Some("0.25")),
            Ok(Sampling::ParentBasedRatio(0.25))
        );
        assert_eq!(
            Sampling::parse("traceidratio", None),
            Ok(Sampling::Ratio(1.0))
        );
        assert!(Sampling::parse("traceidratio", Some("2")).is_err());
        assert!(Sampling::parse("sometimes", None).is_err());
    }

    fn env(vars: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        let vars = vars.to_vec();
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn rls() -> Defaults<'static> {
        Defaults {
            service_name: "RateLimit",
            sampling: Sampling::AlwaysOn,
            ..Defaults::default()
        }
    }

    #[test]
    fn the_standard_variables_win_over_the_defaults() {
        let get = env(&[
            ("OTEL_SERVICE_NAME", "rls-a"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
        ]);
        let c = TraceConfig::from_otel_env(&get, rls()).unwrap();
        assert_eq!(c.service_name, "rls-a");
        assert_eq!(c.endpoint, "http://collector:4317");
        assert_eq!(
            (c.sampling, c.protocol),
            (Sampling::AlwaysOn, Protocol::Grpc)
        );
        let bare = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "otel:4317")]);
        let c = TraceConfig::from_otel_env(&bare, rls()).unwrap();
        assert_eq!(c.endpoint, "http://otel:4317");
        assert_eq!(c.service_name, "RateLimit");
        let none = env(&[]);
        let c = TraceConfig::from_otel_env(&none, rls()).unwrap();
        assert_eq!(c.endpoint, "http://localhost:4317");
    }

    #[test]
    fn http_appends_the_traces_path_to_the_base_only() {
        let get = env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318/"),
        ]);
        let c = TraceConfig::from_otel_env(&get, rls()).unwrap();
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.endpoint, "http://collector:4318/v1/traces");
        let get = env(&[
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:9/custom"),
        ]);
        let c = TraceConfig::from_otel_env(&get, rls()).unwrap();
        assert_eq!(
            (c.protocol, c.endpoint.as_str()),
            (Protocol::HttpProtobuf, "http://c:9/custom")
        );
        let c = TraceConfig::from_otel_env(
            &env(&[]),
            Defaults {
                protocol: Protocol::HttpProtobuf,
                ..rls()
            },
        )
        .unwrap();
        assert_eq!(c.endpoint, "http://localhost:4318/v1/traces");
        let bad = env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]);
        assert_eq!(
            TraceConfig::from_otel_env(&bad, rls()).unwrap_err().0,
            "OTEL_EXPORTER_OTLP_PROTOCOL"
        );
    }

    #[test]
    fn tracing_is_on_only_when_asked() {
        let d = Defaults::default();
        assert_eq!(TraceConfig::if_enabled(&env(&[]), d), Ok(None));
        let on = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4317")]);
        assert!(TraceConfig::if_enabled(&on, d).unwrap().is_some());
        let otlp = env(&[("OTEL_TRACES_EXPORTER", "otlp")]);
        let c = TraceConfig::if_enabled(&otlp, d).unwrap().unwrap();
        assert_eq!(
            (c.service_name.as_str(), c.sampling),
            ("unknown_service", Sampling::ParentBasedOn)
        );
        for off in [
            [
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4317"),
                ("OTEL_SDK_DISABLED", "true"),
            ],
            [
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4317"),
                ("OTEL_TRACES_EXPORTER", "none"),
            ],
        ] {
            assert_eq!(TraceConfig::if_enabled(&env(&off), d), Ok(None));
        }
        let zipkin = env(&[("OTEL_TRACES_EXPORTER", "zipkin")]);
        assert_eq!(
            TraceConfig::if_enabled(&zipkin, d).unwrap_err().0,
            "OTEL_TRACES_EXPORTER"
        );
        let sampler = env(&[
            ("OTEL_TRACES_EXPORTER", "otlp"),
            ("OTEL_TRACES_SAMPLER", "x"),
        ]);
        assert_eq!(
            TraceConfig::if_enabled(&sampler, d).unwrap_err().0,
            "OTEL_TRACES_SAMPLER"
        );
    }
}
