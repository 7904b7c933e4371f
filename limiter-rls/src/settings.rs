//! The environment variables, read as envoyproxy/ratelimit reads them (the
//! same names and defaults where they have a meaning here; docs/rls.md has
//! the table of supported, ignored and not-applicable ones).
//!
//! A value that does not parse is an error naming the variable and what it
//! takes (theirs fails at start-up the same way), never a silent default.

mod redis_env;
mod trace_env;
mod xds_env;

pub use xds_env::ConfigSource;

pub use crate::tls::GrpcTls;
pub use crate::xds::{XdsSettings, XdsTls};

use core::time::Duration;
use std::path::PathBuf;

use limiter_redis::WhenDown;

use crate::backend::{Algorithm, AnyStore, BackendError, memory, redis};

/// Where the limits are kept.
#[derive(Debug, Clone)]
pub enum Store {
    /// In this process (`BACKEND_TYPE=memory`, the default).
    Memory,
    /// Redis (`BACKEND_TYPE=redis`): one server, a cluster or a Sentinel
    /// master, with TLS and credentials, from `REDIS_TYPE`, `REDIS_URL`,
    /// `REDIS_AUTH`, `REDIS_SENTINEL_AUTH` and `REDIS_TLS*` (docs/rls.md).
    Redis(Box<limiter_redis::RedisEndpoint>),
}

/// Everything the binary reads from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `HOST`:`PORT` (8080): `/healthcheck`, `POST /json`.
    pub http: (String, u16),
    /// `GRPC_HOST`:`GRPC_PORT` (8081).
    pub grpc: (String, u16),
    /// `DEBUG_HOST`:`DEBUG_PORT` (6070): `/rlconfig`, `/metrics`.
    pub debug: (String, u16),
    /// `RUNTIME_ROOT`/`RUNTIME_SUBDIRECTORY`/`RUNTIME_APPDIRECTORY`.
    pub config_dir: PathBuf,
    /// `RUNTIME_ROOT` itself (watched too, for a swap of the root, when
    /// `RUNTIME_WATCH_ROOT`).
    pub runtime_root: PathBuf,
    /// `RUNTIME_WATCH_ROOT` (default true).
    pub watch_root: bool,
    /// `RLS_RELOAD_INTERVAL` (default 100ms): how long changes under the
    /// config directory must be quiet before it is read again.
    pub reload_interval: Duration,
    /// `RLS_ALGORITHM`: `gcra` (default) or `fixed_window`.
    pub algorithm: Algorithm,
    /// `BACKEND_TYPE` and the Redis variables.
    pub store: Store,
    /// `CACHE_KEY_PREFIX`.
    pub key_prefix: String,
    /// `REDIS_TIMEOUT` (default 10ms here; theirs is 10s): the budget of
    /// all Redis calls of one request together (its deadline), and so of
    /// each.
    pub redis_timeout: Duration,
    /// `RLS_REDIS_FAILURE_POLICY`: open (default), closed, local, error.
    pub failure_policy: WhenDown,
    /// `RLS_MAX_KEYS` (default 1,000,000 per limit in memory).
    pub max_keys: usize,
    /// `SHADOW_MODE`, `QUOTA_MODE`, `RESPONSE_DYNAMIC_METADATA`,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED` and the header names, `NEAR_LIMIT_RATIO`.
    pub options: crate::service::Options,
    /// `USE_STATSD` (default false here; theirs is true) with
    /// `STATSD_HOST`:`STATSD_PORT`.
    pub statsd: Option<(String, u16)>,
    /// `STATS_FLUSH_INTERVAL` (default 10s).
    pub stats_flush: Duration,
    /// `LOG_LEVEL` (default warn).
    pub log_level: String,
    /// `RLS_DRAIN_DELAY` (default 0s): after SIGTERM, how long health
    /// answers NOT_SERVING and `/healthcheck` 500 while the listeners still
    /// accept, so balancers and Envoy's health checks move away first.
    pub drain_delay: Duration,
    /// `CONFIG_TYPE` and, for xDS, its variables.
    pub config_source: ConfigSource,
    /// `FORCE_START_WITHOUT_INITIAL_CONFIG` (default false): with xDS, serve
    /// at once with an empty config instead of waiting for the first one.
    pub force_start: bool,
    /// `GRPC_SERVER_USE_TLS` and its files.
    pub grpc_tls: Option<GrpcTls>,
    /// `TRACING_ENABLED` with the `TRACING_*` and `OTEL_*` variables
    /// (`None`: no tracing).
    pub tracing: Option<limiter_tower::otel::TraceConfig>,
}

/// A variable that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// What it takes.
    pub expected: &'static str,
}

impl core::fmt::Display for SettingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{}={:?}: expected {}",
            self.name, self.value, self.expected
        )
    }
}

impl std::error::Error for SettingError {}

/// Parses a Go duration such as `10s`, `250ms`, `1m30s`, `1.5s`.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = s.trim();
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
}

impl Settings {
    /// The backend these settings ask for (connecting to Redis lazily: a Redis
    /// that is down at start-up is answered by the failure policy, as later).
    ///
    /// # Errors
    ///
    /// A Redis URL that does not parse.
    pub async fn backend(&self) -> Result<AnyStore, BackendError> {
        let settings = self;
        let clock = crate::window::UnixClock::new();
        match (&settings.store, settings.algorithm) {
            (Store::Memory, Algorithm::Gcra) => Ok(AnyStore::MemoryGcra(memory::MemoryGcra::new(
                clock,
                settings.max_keys,
            ))),
            (Store::Memory, Algorithm::FixedWindow) => Ok(AnyStore::MemoryFixed(
                memory::MemoryFixed::new(clock, settings.max_keys),
            )),
            (Store::Redis(endpoint), algorithm) => {
                let conn = endpoint
                    .connect()
                    .await
                    .map_err(|e| BackendError(format!("REDIS_URL: {e}")))?;
                Ok(match algorithm {
                    Algorithm::Gcra => AnyStore::RedisGcra(redis::RedisGcra::new(
                        conn,
                        &settings.key_prefix,
                        settings.redis_timeout,
                        settings.failure_policy,
                    )?),
                    Algorithm::FixedWindow => AnyStore::RedisFixed(redis::RedisFixed::new(
                        conn,
                        &settings.key_prefix,
                        settings.redis_timeout,
                        settings.failure_policy,
                        settings.max_keys,
                    )?),
                })
            }
        }
    }

    /// Reads the settings through `get` (the process environment in the
    /// binary, a map in tests).
    ///
    /// # Errors
    ///
    /// The first variable that does not parse.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingError> {
        // Every name goes through the table `--help` prints (checked in tests).
        let get = |name: &str| crate::variables::read(&get, name);
        let text = |name: &str, default: &str| get(name).unwrap_or_else(|| default.to_owned());
        let bool_of = |name: &'static str, default: bool| -> Result<bool, SettingError> {
            match get(name) {
                None => Ok(default),
                Some(v) => match v.to_ascii_lowercase().as_str() {
                    "1" | "t" | "true" | "yes" | "on" => Ok(true),
                    "0" | "f" | "false" | "no" | "off" | "" => Ok(false),
                    _ => Err(SettingError {
                        name,
                        value: v,
                        expected: "true or false",
                    }),
                },
            }
        };
        let port = |name: &'static str, default: u16| -> Result<u16, SettingError> {
            get(name).map_or(Ok(default), |v| {
                v.parse().map_err(|_| SettingError {
                    name,
                    value: v,
                    expected: "a port number",
                })
            })
        };
        let duration = |name: &'static str, default: Duration| -> Result<Duration, SettingError> {
            get(name).map_or(Ok(default), |v| {
                parse_go_duration(&v).ok_or(SettingError {
                    name,
                    value: v,
                    expected: "a duration such as 10ms or 1s",
                })
            })
        };
        let root = PathBuf::from(text("RUNTIME_ROOT", "/srv/runtime_data/current"));
        let config_dir = root
            .join(text("RUNTIME_SUBDIRECTORY", ""))
            .join(text("RUNTIME_APPDIRECTORY", "config"));
        let algorithm = match get("RLS_ALGORITHM") {
            None => Algorithm::Gcra,
            Some(v) => Algorithm::parse(&v).ok_or(SettingError {
                name: "RLS_ALGORITHM",
                value: v,
                expected: "gcra or fixed_window",
            })?,
        };
        // Theirs defaults to redis; here memory, unless REDIS_URL is set.
        let default_backend = if get("REDIS_URL").is_some() {
            "redis"
        } else {
            "memory"
        };
        let store = match text("BACKEND_TYPE", default_backend)
            .to_ascii_lowercase()
            .as_str()
        {
            "memory" => Store::Memory,
            "redis" => Store::Redis(Box::new(redis_env::endpoint(&get, &bool_of)?)),
            other => {
                return Err(SettingError {
                    name: "BACKEND_TYPE",
                    value: other.into(),
                    expected: "memory or redis",
                });
            }
        };
        let redis_timeout = duration("REDIS_TIMEOUT", Duration::from_millis(10))?;
        let failure_policy = match text("RLS_REDIS_FAILURE_POLICY", "open")
            .to_ascii_lowercase()
            .as_str()
        {
            "open" => WhenDown::Open,
            "closed" => WhenDown::Closed,
            "local" => WhenDown::Local { share: 1.0 },
            "error" => WhenDown::Error,
            other => {
                return Err(SettingError {
                    name: "RLS_REDIS_FAILURE_POLICY",
                    value: other.into(),
                    expected: "open, closed, local or error",
                });
            }
        };
        let near_ratio = match get("NEAR_LIMIT_RATIO") {
            None => 0.8,
            Some(v) => v
                .parse::<f32>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or(SettingError {
                    name: "NEAR_LIMIT_RATIO",
                    value: v,
                    expected: "a number from 0 to 1",
                })?,
        };
        let headers = if bool_of("LIMIT_RESPONSE_HEADERS_ENABLED", false)? {
            Some([
                text("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
                text("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
                text("LIMIT_RESET_HEADER", "RateLimit-Reset"),
            ])
        } else {
            None
        };
        let max_keys = match get("RLS_MAX_KEYS") {
            None => 1_000_000,
            Some(v) => v.parse().ok().filter(|n| *n > 0).ok_or(SettingError {
                name: "RLS_MAX_KEYS",
                value: v,
                expected: "a positive whole number",
            })?,
        };
        Ok(Settings {
            http: (text("HOST", "0.0.0.0"), port("PORT", 8080)?),
            grpc: (text("GRPC_HOST", "0.0.0.0"), port("GRPC_PORT", 8081)?),
            debug: (text("DEBUG_HOST", "0.0.0.0"), port("DEBUG_PORT", 6070)?),
            config_dir,
            runtime_root: root,
            watch_root: bool_of("RUNTIME_WATCH_ROOT", true)?,
            reload_interval: duration("RLS_RELOAD_INTERVAL", Duration::from_millis(100))?,
            algorithm,
            store,
            key_prefix: text("CACHE_KEY_PREFIX", ""),
            redis_timeout,
            failure_policy,
            max_keys,
            options: crate::service::Options {
                global_shadow: bool_of("SHADOW_MODE", false)?,
                global_quota: bool_of("QUOTA_MODE", false)?,
                dynamic_metadata: bool_of("RESPONSE_DYNAMIC_METADATA", false)?,
                headers,
                near_ratio,
                store_budget: redis_timeout,
            },
            statsd: if bool_of("USE_STATSD", false)? {
                Some((text("STATSD_HOST", "localhost"), port("STATSD_PORT", 8125)?))
            } else {
                None
            },
            stats_flush: duration("STATS_FLUSH_INTERVAL", Duration::from_secs(10))?,
            log_level: text("LOG_LEVEL", "warn").to_ascii_lowercase(),
            drain_delay: duration("RLS_DRAIN_DELAY", Duration::ZERO)?,
            config_source: xds_env::config_source(&get, &bool_of, &duration)?,
            force_start: bool_of("FORCE_START_WITHOUT_INITIAL_CONFIG", false)?,
            grpc_tls: xds_env::grpc_tls(&get, &bool_of)?,
            tracing: trace_env::tracing(&get, &bool_of)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, SettingError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        Settings::from_env(|k| m.get(k).cloned())
    }

    #[test]
    fn their_defaults_and_layout() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.grpc.1, 8081);
        assert_eq!(s.http.1, 8080);
        assert_eq!(s.debug.1, 6070);
        assert_eq!(
            s.config_dir,
            PathBuf::from("/srv/runtime_data/current/config")
        );
        let s = settings(&[
            ("RUNTIME_ROOT", "/r"),
            ("RUNTIME_SUBDIRECTORY", "rl"),
            ("RUNTIME_APPDIRECTORY", "c"),
        ])
        .unwrap();
        assert_eq!(s.config_dir, PathBuf::from("/r/rl/c"));
    }

    #[test]
    fn the_redis_budget_defaults_to_half_of_envoys_20_ms() {
        let s = settings(&[("BACKEND_TYPE", "redis")]).unwrap();
        // Each call and the whole request: one deadline, 10 ms.
        assert_eq!(s.redis_timeout, Duration::from_millis(10));
        assert_eq!(s.options.store_budget, Duration::from_millis(10));
        assert_eq!(s.failure_policy, WhenDown::Open);
        assert_eq!(s.drain_delay, Duration::ZERO);
        let s = settings(&[("REDIS_TIMEOUT", "5ms"), ("RLS_DRAIN_DELAY", "2s")]).unwrap();
        assert_eq!(s.options.store_budget, Duration::from_millis(5));
        assert_eq!(s.drain_delay, Duration::from_secs(2));
    }

    #[test]
    fn redis_urls_and_bad_values() {
        let s = settings(&[
            ("BACKEND_TYPE", "redis"),
            ("REDIS_URL", "h:1,h:2"),
            ("REDIS_TYPE", "CLUSTER"),
            ("REDIS_AUTH", "pw"),
        ])
        .unwrap();
        let Store::Redis(endpoint) = &s.store else {
            panic!("{:?}", s.store)
        };
        assert_eq!(endpoint.to_string(), "redis cluster h:1,h:2");
        assert!(endpoint.has_auth());
        let s = settings(&[
            ("REDIS_URL", "mymaster,s1:26379, s2:26380"),
            ("REDIS_TYPE", "Sentinel"),
            ("REDIS_AUTH", "app:pw"),
            ("REDIS_SENTINEL_AUTH", "spw"),
        ])
        .unwrap();
        let Store::Redis(endpoint) = &s.store else {
            panic!("{:?}", s.store)
        };
        assert_eq!(
            endpoint.to_string(),
            r#"redis master "mymaster" via sentinels s1:26379,s2:26380 db 0 as app"#
        );
        for (name, bad) in [
            (
                "REDIS_URL",
                [("REDIS_TYPE", "sentinel"), ("REDIS_URL", "mymaster")],
            ),
            (
                "REDIS_URL",
                [("REDIS_TYPE", "sentinel"), ("REDIS_URL", "m,h:x")],
            ),
            ("REDIS_TYPE", [("REDIS_TYPE", "ring"), ("REDIS_URL", "h:1")]),
            (
                "REDIS_TLS_CACERT",
                [
                    ("REDIS_TLS", "true"),
                    ("REDIS_TLS_CACERT", "/nonexistent/ca.pem"),
                ],
            ),
        ] {
            let mut vars = vec![("BACKEND_TYPE", "redis")];
            vars.extend(bad);
            assert_eq!(settings(&vars).unwrap_err().name, name, "{bad:?}");
        }
        let e = settings(&[("REDIS_TIMEOUT", "soon")]).unwrap_err();
        assert_eq!(e.name, "REDIS_TIMEOUT");
        assert_eq!(
            settings(&[("REDIS_TIMEOUT", "1m30s")])
                .unwrap()
                .redis_timeout,
            Duration::from_secs(90)
        );
        assert_eq!(
            settings(&[("REDIS_TIMEOUT", "2.5ms")])
                .unwrap()
                .redis_timeout,
            Duration::from_micros(2500)
        );
        assert!(settings(&[("SHADOW_MODE", "maybe")]).is_err());
    }
}
