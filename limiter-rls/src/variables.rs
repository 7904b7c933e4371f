//! The environment variables `limiter-rls` reads: one table, printed by
//! `limiter-rls --help` and checked against what
//! [`Settings::from_env`](crate::settings::Settings::from_env) reads.
//!
//! The check runs both ways in this crate's unit tests: every variable
//! `from_env` asks for must be listed here (the settings tests fail with the
//! name otherwise), and every listed variable must be read by `from_env` in
//! one of the environments this module's tests try, so the list can neither
//! miss a variable nor keep one that is gone.

/// One environment variable: its name, its default and what it sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// The name, as envoyproxy/ratelimit spells it where it has one.
    pub name: &'static str,
    /// The value taken when it is unset, as text (`-` for none).
    pub default: &'static str,
    /// What it sets, in a few words.
    pub meaning: &'static str,
}

const fn var(name: &'static str, default: &'static str, meaning: &'static str) -> Variable {
    Variable {
        name,
        default,
        meaning,
    }
}

/// Every variable `limiter-rls` reads, in the order `--help` prints them.
pub const VARIABLES: &[Variable] = &[
    var(
        "GRPC_HOST",
        "0.0.0.0",
        "address of the gRPC listener (ShouldRateLimit, health)",
    ),
    var("GRPC_PORT", "8081", "port of the gRPC listener"),
    var(
        "GRPC_SERVER_USE_TLS",
        "false",
        "TLS on the gRPC listener (files reloaded on change)",
    ),
    var(
        "GRPC_SERVER_TLS_CERT",
        "-",
        "PEM certificate chain of the gRPC listener",
    ),
    var(
        "GRPC_SERVER_TLS_KEY",
        "-",
        "PEM private key of the gRPC listener",
    ),
    var(
        "GRPC_CLIENT_TLS_CACERT",
        "-",
        "PEM CAs of client certificates; when set, clients must present one (mTLS)",
    ),
    var(
        "GRPC_CLIENT_TLS_SAN",
        "-",
        "DNS name the client certificate must carry",
    ),
    var(
        "HOST",
        "0.0.0.0",
        "address of the HTTP listener (/healthcheck, POST /json)",
    ),
    var("PORT", "8080", "port of the HTTP listener"),
    var(
        "DEBUG_HOST",
        "0.0.0.0",
        "address of the debug listener (/rlconfig, /metrics)",
    ),
    var("DEBUG_PORT", "6070", "port of the debug listener"),
    var(
        "RUNTIME_ROOT",
        "/srv/runtime_data/current",
        "root of the config directory",
    ),
    var("RUNTIME_SUBDIRECTORY", "-", "directory under RUNTIME_ROOT"),
    var(
        "RUNTIME_APPDIRECTORY",
        "config",
        "directory of the YAML files under that",
    ),
    var(
        "RUNTIME_WATCH_ROOT",
        "true",
        "also watch RUNTIME_ROOT itself (a swapped root)",
    ),
    var(
        "CONFIG_TYPE",
        "FILE",
        "FILE (the YAML directory) or GRPC_XDS_SOTW (pushed by an xDS server)",
    ),
    var(
        "FORCE_START_WITHOUT_INITIAL_CONFIG",
        "false",
        "xDS: serve at once with an empty config instead of waiting for the first",
    ),
    var(
        "CONFIG_GRPC_XDS_SERVER_URL",
        "localhost:18000",
        "xDS server, host:port",
    ),
    var("CONFIG_GRPC_XDS_NODE_ID", "default", "xDS node id"),
    var(
        "CONFIG_GRPC_XDS_NODE_METADATA",
        "-",
        "xDS node metadata, key=value,...",
    ),
    var(
        "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
        "-",
        "gRPC metadata on the xDS stream, key:value,...",
    ),
    var(
        "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
        "3s",
        "pause between attempts to connect to the xDS server",
    ),
    var(
        "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
        "10s",
        "first pause before reopening a broken xDS stream (doubles, ±50%)",
    ),
    var(
        "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
        "60s",
        "longest pause before reopening a broken xDS stream",
    ),
    var(
        "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
        "-",
        "largest xDS response accepted (gRPC's 4 MiB without it)",
    ),
    var(
        "CONFIG_GRPC_XDS_SERVER_USE_TLS",
        "false",
        "TLS to the xDS server",
    ),
    var(
        "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
        "-",
        "PEM file of the xDS server's CA (the system's roots without it)",
    ),
    var(
        "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
        "-",
        "PEM client certificate for the xDS server (with the key)",
    ),
    var(
        "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
        "-",
        "PEM client key for the xDS server (with the certificate)",
    ),
    var(
        "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
        "-",
        "name the xDS server's certificate must carry (the URL's host without it)",
    ),
    var(
        "RLS_RELOAD_INTERVAL",
        "100ms",
        "quiet time before changed files (config, gRPC TLS) are read again",
    ),
    var("RLS_ALGORITHM", "gcra", "gcra or fixed_window"),
    var(
        "BACKEND_TYPE",
        "memory",
        "memory or redis (redis when REDIS_URL is set)",
    ),
    var(
        "REDIS_URL",
        "127.0.0.1:6379",
        "host:port or redis:// URL; cluster: a comma-separated list; sentinel: master,host:port,...",
    ),
    var("REDIS_TYPE", "single", "single, cluster or sentinel"),
    var(
        "REDIS_AUTH",
        "-",
        "password or user:password of the servers, added to URLs that have none",
    ),
    var(
        "REDIS_SENTINEL_AUTH",
        "-",
        "password or user:password of the sentinels",
    ),
    var("REDIS_TLS", "false", "TLS to the servers and the sentinels"),
    var(
        "REDIS_TLS_CACERT",
        "-",
        "PEM file of the CA certificates (the system's roots without it)",
    ),
    var(
        "REDIS_TLS_CLIENT_CERT",
        "-",
        "PEM file of the client certificate (with REDIS_TLS_CLIENT_KEY)",
    ),
    var(
        "REDIS_TLS_CLIENT_KEY",
        "-",
        "PEM file of the client key (with REDIS_TLS_CLIENT_CERT)",
    ),
    var(
        "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
        "false",
        "accept a certificate that does not name the host",
    ),
    var(
        "REDIS_TIMEOUT",
        "10ms",
        "budget of all Redis calls of one request",
    ),
    var(
        "RLS_REDIS_FAILURE_POLICY",
        "open",
        "when Redis fails: open, closed, local or error",
    ),
    var("CACHE_KEY_PREFIX", "-", "prefix of every Redis key"),
    var("RLS_MAX_KEYS", "1000000", "keys kept per limit in memory"),
    var(
        "SHADOW_MODE",
        "false",
        "decide and count, but answer OK to every request",
    ),
    var("QUOTA_MODE", "false", "quota_mode for every rule"),
    var(
        "RESPONSE_DYNAMIC_METADATA",
        "false",
        "return the descriptors' statuses as dynamic metadata",
    ),
    var(
        "LIMIT_RESPONSE_HEADERS_ENABLED",
        "false",
        "add rate-limit headers to the responses",
    ),
    var(
        "LIMIT_LIMIT_HEADER",
        "RateLimit-Limit",
        "name of the limit header",
    ),
    var(
        "LIMIT_REMAINING_HEADER",
        "RateLimit-Remaining",
        "name of the remaining header",
    ),
    var(
        "LIMIT_RESET_HEADER",
        "RateLimit-Reset",
        "name of the reset header",
    ),
    var(
        "NEAR_LIMIT_RATIO",
        "0.8",
        "share of a limit from which hits count as near_limit",
    ),
    var("USE_STATSD", "false", "send the statistics to statsd"),
    var("STATSD_HOST", "localhost", "statsd host"),
    var("STATSD_PORT", "8125", "statsd port"),
    var(
        "STATS_FLUSH_INTERVAL",
        "10s",
        "how often the statistics are flushed",
    ),
    var(
        "LOG_LEVEL",
        "warn",
        "log filter: error, warn, info, debug or trace",
    ),
    var(
        "TRACING_ENABLED",
        "false",
        "export a span per ShouldRateLimit call over OTLP/gRPC",
    ),
    var(
        "TRACING_SERVICE_NAME",
        "RateLimit",
        "service.name of the spans",
    ),
    var(
        "TRACING_SERVICE_NAMESPACE",
        "-",
        "service.namespace of the spans",
    ),
    var(
        "TRACING_SERVICE_INSTANCE_ID",
        "-",
        "service.instance.id of the spans",
    ),
    var(
        "TRACING_SAMPLING_RATE",
        "1",
        "fraction of new traces sampled (parent-based)",
    ),
    var(
        "TRACING_EXPORTER_PROTOCOL",
        "http",
        "http (OTLP/HTTP, protobuf) or grpc (OTLP/gRPC)",
    ),
    var(
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "-",
        "http/protobuf or grpc, over TRACING_EXPORTER_PROTOCOL",
    ),
    var(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "-",
        "as OTEL_EXPORTER_OTLP_PROTOCOL, for traces alone",
    ),
    var(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://localhost:4318",
        "the collector (http: /v1/traces appended; grpc: :4317)",
    ),
    var(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "-",
        "the traces URL as it is, over OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    var(
        "OTEL_SERVICE_NAME",
        "-",
        "service.name, over TRACING_SERVICE_NAME",
    ),
    var(
        "OTEL_TRACES_SAMPLER",
        "-",
        "OpenTelemetry sampler, over TRACING_SAMPLING_RATE",
    ),
    var(
        "OTEL_TRACES_SAMPLER_ARG",
        "1",
        "ratio of the traceidratio samplers",
    ),
    var(
        "RLS_DRAIN_DELAY",
        "0s",
        "after SIGTERM, how long health answers NOT_SERVING while still serving",
    ),
];

/// Whether `name` is in [`VARIABLES`] (checked by the unit tests' reads).
#[cfg(test)]
fn is_listed(name: &str) -> bool {
    VARIABLES.iter().any(|v| v.name == name)
}

/// Reads `name` through `get`; in this crate's unit tests, first checks that
/// it is listed, so a variable added to the settings without its line here
/// fails every test that reads it.
pub(crate) fn read(get: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    #[cfg(test)]
    assert!(
        is_listed(name),
        "{name} is read by Settings::from_env but missing from variables::VARIABLES (the --help list)"
    );
    get(name)
}

/// The text of `limiter-rls --help`: the usage, the flags, and every
/// variable of [`VARIABLES`] with its default.
pub fn help() -> String {
    let mut out = String::from(
        "Envoy's rate limit service (envoyproxy/ratelimit's gRPC API, YAML config and environment).\n\
         \n\
         Usage: limiter-rls [--help | --version]\n\
         \n\
         Without arguments it starts the service, configured by the environment below\n\
         and by the YAML files under RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY.\n\
         \n\
         Options:\n  \
         -h, --help     Print this help and exit\n  \
         -V, --version  Print the version and the commit it was built from, and exit\n\
         \n\
         Environment (default in brackets; durations such as 250ms, 10s, 1m30s):\n",
    );
    let width = VARIABLES.iter().map(|v| v.name.len()).max().unwrap_or(0);
    for v in VARIABLES {
        out += &format!("  {:width$}  {} [{}]\n", v.name, v.meaning, v.default);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;
    use std::cell::RefCell;
    use std::collections::{BTreeSet, HashMap};

    /// The names `from_env` reads under `vars`.
    fn names_read(vars: &[(&str, &str)]) -> BTreeSet<String> {
        let env: HashMap<&str, &str> = vars.iter().copied().collect();
        let read = RefCell::new(BTreeSet::new());
        Settings::from_env(|name| {
            read.borrow_mut().insert(name.to_owned());
            env.get(name).map(|v| (*v).to_owned())
        })
        .expect("the environment parses");
        read.into_inner()
    }

    #[test]
    fn every_listed_variable_is_read_by_the_settings() {
        // The defaults, then each switch that makes further variables count.
        let environments: &[&[(&str, &str)]] = &[
            &[],
            &[("BACKEND_TYPE", "redis"), ("REDIS_TLS", "true")],
            &[("LIMIT_RESPONSE_HEADERS_ENABLED", "true")],
            &[("USE_STATSD", "true")],
            &[
                ("CONFIG_TYPE", "grpc_xds_sotw"),
                ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ],
            &[
                ("GRPC_SERVER_USE_TLS", "true"),
                ("GRPC_SERVER_TLS_CERT", "c.pem"),
                ("GRPC_SERVER_TLS_KEY", "k.pem"),
            ],
            &[
                ("TRACING_ENABLED", "true"),
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ],
        ];
        let read: BTreeSet<String> = environments.iter().flat_map(|e| names_read(e)).collect();
        let listed: BTreeSet<String> = VARIABLES.iter().map(|v| v.name.to_owned()).collect();
        let stale: Vec<_> = listed.difference(&read).collect();
        assert!(
            stale.is_empty(),
            "listed but never read (remove them, or add the environment that reads them): {stale:?}"
        );
        assert_eq!(listed.len(), VARIABLES.len(), "a variable is listed twice");
    }

    #[test]
    fn help_names_every_variable_with_its_default() {
        let help = help();
        for v in VARIABLES {
            let line = help
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{} ", v.name)))
                .unwrap_or_else(|| panic!("{} has no line in:\n{help}", v.name));
            assert!(line.ends_with(&format!("[{}]", v.default)), "{line}");
        }
    }
}
