//! Traces, from envoyproxy/ratelimit's `TRACING_*` variables and the
//! standard `OTEL_*` ones (read only when `TRACING_ENABLED` is true):
//!
//! * `TRACING_SERVICE_NAME` (`RateLimit`), overridden by `OTEL_SERVICE_NAME`;
//!   `TRACING_SERVICE_NAMESPACE`, `TRACING_SERVICE_INSTANCE_ID` (resource
//!   attributes when set; theirs makes up a random instance id, ours omits it).
//! * `TRACING_SAMPLING_RATE` (1): theirs, a parent-based trace-id ratio;
//!   `OTEL_TRACES_SAMPLER` with `OTEL_TRACES_SAMPLER_ARG`, when set, wins.
//! * `TRACING_EXPORTER_PROTOCOL` (`http`, as theirs): `http` (OTLP/HTTP
//!   with protobuf bodies, usually port 4318) or `grpc` (OTLP/gRPC, 4317);
//!   `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf` or `grpc`), when set, wins.
//! * `OTEL_EXPORTER_OTLP_ENDPOINT` (the base URL: OTLP/HTTP appends
//!   `/v1/traces`; default `http://localhost:4318`, or `:4317` over gRPC),
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL).

use limiter_tower::otel::{Defaults, Protocol, Sampling, TraceConfig, ratio};

use super::SettingError;

type Get<'a> = &'a dyn Fn(&str) -> Option<String>;
type BoolOf<'a> = &'a dyn Fn(&'static str, bool) -> Result<bool, SettingError>;

/// The trace export settings, `None` unless `TRACING_ENABLED` is true.
pub(super) fn tracing(
    get: Get<'_>,
    bool_of: BoolOf<'_>,
) -> Result<Option<TraceConfig>, SettingError> {
    if !bool_of("TRACING_ENABLED", false)? {
        return Ok(None);
    }
    let protocol = match get("TRACING_EXPORTER_PROTOCOL") {
        None => Protocol::HttpProtobuf,
        Some(p) if p.eq_ignore_ascii_case("http") => Protocol::HttpProtobuf,
        Some(p) if p.eq_ignore_ascii_case("grpc") => Protocol::Grpc,
        Some(p) => {
            return Err(SettingError {
                name: "TRACING_EXPORTER_PROTOCOL",
                value: p,
                expected: "http (OTLP/HTTP, usually port 4318) or grpc (OTLP/gRPC, 4317)",
            });
        }
    };
    let rate = match get("TRACING_SAMPLING_RATE") {
        None => 1.0,
        Some(v) => ratio(&v).ok_or(SettingError {
            name: "TRACING_SAMPLING_RATE",
            value: v,
            expected: "a number from 0 to 1",
        })?,
    };
    let name = get("TRACING_SERVICE_NAME").unwrap_or_else(|| "RateLimit".to_owned());
    let namespace = get("TRACING_SERVICE_NAMESPACE").filter(|s| !s.is_empty());
    let instance = get("TRACING_SERVICE_INSTANCE_ID").filter(|s| !s.is_empty());
    let defaults = Defaults {
        service_name: &name,
        service_namespace: namespace.as_deref(),
        service_instance_id: instance.as_deref(),
        sampling: Sampling::ParentBasedRatio(rate),
        protocol,
    };
    TraceConfig::from_otel_env(get, defaults)
        .map(Some)
        .map_err(|(name, expected)| SettingError {
            name,
            value: get(name).unwrap_or_default(),
            expected,
        })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use limiter_tower::otel::{Protocol, Sampling, TraceConfig};

    use crate::settings::Settings;

    fn tracing(vars: &[(&str, &str)]) -> Result<Option<TraceConfig>, String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_env(|k| m.get(k).cloned())
            .map(|s| s.tracing)
            .map_err(|e| e.name.to_owned())
    }

    #[test]
    fn off_by_default_and_theirs_when_on() {
        assert_eq!(tracing(&[]), Ok(None));
        let c = tracing(&[
            ("TRACING_ENABLED", "true"),
            ("TRACING_SAMPLING_RATE", "0.5"),
            ("TRACING_SERVICE_NAMESPACE", "edge"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.service_name, "RateLimit");
        assert_eq!(c.sampling, Sampling::ParentBasedRatio(0.5));
        assert_eq!(c.service_namespace.as_deref(), Some("edge"));
        assert_eq!(c.service_instance_id, None);
        // Theirs by default: OTLP/HTTP to the local collector.
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.endpoint, "http://localhost:4318/v1/traces");
        let grpc = tracing(&[
            ("TRACING_ENABLED", "true"),
            ("TRACING_EXPORTER_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "otel:4317"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (grpc.protocol, grpc.endpoint.as_str()),
            (Protocol::Grpc, "http://otel:4317")
        );
    }

    #[test]
    fn otel_variables_win_and_bad_values_are_named() {
        let c = tracing(&[
            ("TRACING_ENABLED", "true"),
            ("TRACING_SERVICE_NAME", "theirs"),
            ("OTEL_SERVICE_NAME", "ours"),
            ("OTEL_TRACES_SAMPLER", "always_off"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.service_name.as_str(), c.sampling),
            ("ours", Sampling::AlwaysOff)
        );
        let on = ("TRACING_ENABLED", "true");
        assert_eq!(
            tracing(&[on, ("TRACING_EXPORTER_PROTOCOL", "udp")]),
            Err("TRACING_EXPORTER_PROTOCOL".to_owned())
        );
        assert_eq!(
            tracing(&[on, ("TRACING_SAMPLING_RATE", "1.5")]),
            Err("TRACING_SAMPLING_RATE".to_owned())
        );
        assert_eq!(
            tracing(&[
                on,
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "x")
            ]),
            Err("OTEL_TRACES_SAMPLER_ARG".to_owned())
        );
    }
}
