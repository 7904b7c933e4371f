//! Traces, from envoyproxy/ratelimit's `TRACING_*` variables and the
//! standard `OTEL_*` ones (read only when `TRACING_ENABLED` is true):
//!
//! * `TRACING_SERVICE_NAME` (`RateLimit`), overridden by `OTEL_SERVICE_NAME`;
//!   `TRACING_SERVICE_NAMESPACE`, `TRACING_SERVICE_INSTANCE_ID` (resource
//!   attributes when set; theirs makes up a random instance id, ours omits it).
//! * `TRACING_SAMPLING_RATE` (1): theirs, a parent-based trace-id ratio;
//!   `OTEL_TRACES_SAMPLER` with `OTEL_TRACES_SAMPLER_ARG`, when set, wins.
//! * `TRACING_EXPORTER_PROTOCOL`: `grpc` only (OTLP/gRPC; theirs defaults
//!   to `http`, which is refused here with the fix rather than ignored).
//! * `OTEL_EXPORTER_OTLP_ENDPOINT` (`http://localhost:4317`).

use super::SettingError;
use crate::otel::{Sampling, TraceConfig, ratio};

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
    if let Some(p) = get("TRACING_EXPORTER_PROTOCOL")
        && !p.eq_ignore_ascii_case("grpc")
    {
        return Err(SettingError {
            name: "TRACING_EXPORTER_PROTOCOL",
            value: p,
            expected: "grpc (OTLP over gRPC, usually port 4317; http is not supported)",
        });
    }
    let rate = match get("TRACING_SAMPLING_RATE") {
        None => 1.0,
        Some(v) => ratio(&v).ok_or(SettingError {
            name: "TRACING_SAMPLING_RATE",
            value: v,
            expected: "a number from 0 to 1",
        })?,
    };
    let name = get("TRACING_SERVICE_NAME").unwrap_or_else(|| "RateLimit".to_owned());
    let mut config = TraceConfig::from_otel_env(get, &name, Sampling::ParentBasedRatio(rate))
        .map_err(|e| {
            let name = if e.starts_with("OTEL_TRACES_SAMPLER_ARG") {
                "OTEL_TRACES_SAMPLER_ARG"
            } else {
                "OTEL_TRACES_SAMPLER"
            };
            SettingError {
                name,
                value: get(name).unwrap_or_default(),
                expected: e,
            }
        })?;
    config.service_namespace = get("TRACING_SERVICE_NAMESPACE").filter(|s| !s.is_empty());
    config.service_instance_id = get("TRACING_SERVICE_INSTANCE_ID").filter(|s| !s.is_empty());
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::otel::Sampling;
    use crate::settings::Settings;

    fn tracing(vars: &[(&str, &str)]) -> Result<Option<crate::otel::TraceConfig>, String> {
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
            tracing(&[on, ("TRACING_EXPORTER_PROTOCOL", "http")]),
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
