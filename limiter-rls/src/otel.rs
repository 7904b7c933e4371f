//! OpenTelemetry traces, the part a gateway or a tower layer can reuse: what
//! to export and how to sample ([`TraceConfig`], plain data read from the
//! standard `OTEL_*` variables by [`TraceConfig::from_otel_env`]), and,
//! with the cargo feature `otel`, the exporter itself
//! (`tracer_provider`: OTLP over gRPC, batched) and the W3C
//! `traceparent` of an incoming request (`parent_context`, from HTTP
//! headers, which is what gRPC metadata is on the wire).
//!
//! Nothing here knows limiter-rls: the module is meant to move to a lower
//! crate (behind its own `otel` feature) once the gateway and limiter-tower
//! trace too. Without the feature only the configuration is compiled, so a
//! build that does not trace compiles no OpenTelemetry crate.

#[cfg(feature = "otel")]
mod export;

#[cfg(feature = "otel")]
pub use export::{ExportError, parent_context, tracer_provider};

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
    /// The OTLP/gRPC collector (`OTEL_EXPORTER_OTLP_ENDPOINT`), `http://`
    /// prefixed when it has no scheme (Envoy Gateway passes `host:port`);
    /// `None`: the exporter's default, `http://localhost:4317`.
    pub endpoint: Option<String>,
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
    /// The standard variables through `get`: `OTEL_EXPORTER_OTLP_ENDPOINT`,
    /// `OTEL_SERVICE_NAME` (else `default_name`), `OTEL_TRACES_SAMPLER` and
    /// `OTEL_TRACES_SAMPLER_ARG` (else `default_sampling`).
    ///
    /// # Errors
    ///
    /// A sampler or ratio that does not parse ([`Sampling::parse`]).
    pub fn from_otel_env(
        get: &dyn Fn(&str) -> Option<String>,
        default_name: &str,
        default_sampling: Sampling,
    ) -> Result<TraceConfig, &'static str> {
        let sampling = match get("OTEL_TRACES_SAMPLER") {
            Some(s) => Sampling::parse(&s, get("OTEL_TRACES_SAMPLER_ARG").as_deref())?,
            None => default_sampling,
        };
        Ok(TraceConfig {
            endpoint: get("OTEL_EXPORTER_OTLP_ENDPOINT")
                .filter(|e| !e.is_empty())
                .map(|e| {
                    if e.contains("://") {
                        e
                    } else {
                        format!("http://{e}")
                    }
                }),
            service_name: get("OTEL_SERVICE_NAME")
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| default_name.to_owned()),
            service_namespace: None,
            service_instance_id: None,
            sampling,
        })
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

    #[test]
    fn the_standard_variables_win_over_the_defaults() {
        let env = |k: &str| match k {
            "OTEL_SERVICE_NAME" => Some("rls-a".to_owned()),
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://collector:4317".to_owned()),
            _ => None,
        };
        let c = TraceConfig::from_otel_env(&env, "RateLimit", Sampling::AlwaysOn).unwrap();
        assert_eq!(c.service_name, "rls-a");
        assert_eq!(c.endpoint.as_deref(), Some("http://collector:4317"));
        assert_eq!(c.sampling, Sampling::AlwaysOn);
        let bare = |k: &str| (k == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "otel:4317".to_owned());
        let c = TraceConfig::from_otel_env(&bare, "RateLimit", Sampling::AlwaysOn).unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("http://otel:4317"));
        assert_eq!(c.service_name, "RateLimit");
    }
}
