//! An upstream's addresses and how requests reach them: the pool
//! configuration ([`PoolConfig`]), the connector of one address (module
//! `connect`: TCP, optionally TLS, HTTP/1.1 or HTTP/2), the choice of an
//! address per request with passive ejection (module `balance`) and the
//! optional active health check (module `health`); HTTP/1.1 requests go
//! in their own task on the serving thread's pool (module `local`).
//!
//! Guarantees, for every upstream:
//! * each address has its own keep-alive pool; the URI sent to it carries
//!   the upstream URL's authority, never a client-chosen one, so a client
//!   cannot make the gateway open a pool per `Host` it invents;
//! * a request is framed for the protocol of the connection it goes on:
//!   over h2 without `Host` (`:authority` names the host), also under
//!   `auto` (module `connect`);
//! * a request is sent to an address that is neither ejected nor failing
//!   its health check while one such address exists (otherwise to all
//!   of them: failing open, as Envoy's panic threshold does at 0 %);
//! * a request that was not sent (connect refused or timed out) is retried
//!   on another address when its body is empty; one that was sent and lost
//!   its connection before the response head is retried only if its method
//!   is idempotent and its body empty; every other failure is the client's
//!   `502`/`504`. At most [`MAX_ATTEMPTS`] addresses are tried per request.

mod balance;
mod connect;
pub(crate) mod health;
mod local;
mod salvage;
mod spare;

use std::time::Duration;

use serde::Deserialize;

pub(crate) use balance::Balancer;
pub(crate) use local::{serve_asks, sweep};

use crate::settings::GatewayConfigError;

/// Where requests go: an upstream and the path prefix it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// The name in metrics and logs.
    pub name: String,
    /// `http://host:port` with an optional base path prepended to every
    /// request's path.
    pub url: http::Uri,
    /// The path prefix routed here (matched at segment boundaries, the
    /// longest wins); `/` for everything.
    pub prefix: String,
    /// Send the upstream's own authority as `Host` instead of the client's.
    pub rewrite_host: bool,
    /// Its addresses, balancing, protocol and health (module `upstream`).
    pub pool: PoolConfig,
}

/// The most addresses one request is tried on.
pub const MAX_ATTEMPTS: usize = 3;

/// How an address is chosen for each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Balance {
    /// Each address in turn.
    #[default]
    RoundRobin,
    /// The address with the fewest requests waiting for their response
    /// head (ties in turn).
    LeastRequests,
}

/// The protocol spoken to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// HTTP/1.1 with keep-alive.
    #[default]
    Http1,
    /// HTTP/2: prior knowledge (h2c) over `http://`, ALPN `h2` over `https://`.
    H2,
    /// `https://` only: ALPN offers `h2` and `http/1.1`, the upstream picks.
    Auto,
}

/// The active health check of every address of an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// The path probed with `GET` (a `2xx` passes).
    pub path: String,
    /// Time between probes of one address.
    pub interval: Duration,
    /// The longest a probe may take (then it fails).
    pub timeout: Duration,
    /// Consecutive failed probes that take an address out.
    pub unhealthy: u32,
    /// Consecutive passed probes that bring it back.
    pub healthy: u32,
}

/// How an upstream's addresses are reached: the `[[upstream]]` fields
/// beside `url`, `prefix` and `rewrite_host`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// `host:port` addresses dialled instead of the URL's authority (empty:
    /// the URL's host and port, resolved at each connect).
    pub addresses: Vec<String>,
    /// How an address is chosen.
    pub balance: Balance,
    /// HTTP/1.1 or HTTP/2.
    pub protocol: Protocol,
    /// `https://` upstreams: the PEM file of the roots to trust.
    pub ca: std::path::PathBuf,
    /// Connect failures in a row that eject an address.
    pub max_fails: u32,
    /// How long an ejected address is skipped.
    pub fail_timeout: Duration,
    /// The active health check, if any.
    pub health_check: Option<HealthCheck>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            addresses: Vec::new(),
            balance: Balance::RoundRobin,
            protocol: Protocol::Http1,
            ca: "/etc/ssl/certs/ca-certificates.crt".into(),
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            health_check: None,
        }
    }
}

/// The `[[upstream]]` keys of [`PoolConfig`], as written in the file
/// (flattened into the upstream's table: `rest` collects the keys neither
/// knows, each an error).
#[derive(Debug, Deserialize, Default)]
pub(crate) struct FilePool {
    #[serde(flatten)]
    rest: std::collections::BTreeMap<String, toml::Value>,
    addresses: Option<Vec<String>>,
    balance: Option<String>,
    protocol: Option<String>,
    ca: Option<String>,
    max_fails: Option<u32>,
    fail_timeout: Option<String>,
    health_check: Option<FileHealthCheck>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHealthCheck {
    path: Option<String>,
    interval: Option<String>,
    timeout: Option<String>,
    unhealthy: Option<u32>,
    healthy: Option<u32>,
}

fn invalid(field: String, reason: impl Into<String>) -> GatewayConfigError {
    GatewayConfigError::Invalid {
        field,
        reason: reason.into(),
    }
}

fn duration(
    field: String,
    s: Option<&str>,
    default: Duration,
) -> Result<Duration, GatewayConfigError> {
    let Some(s) = s else { return Ok(default) };
    match limiter_config::parse_duration(s) {
        Ok(d) if d.is_zero() => Err(invalid(field, "must be more than 0")),
        Ok(d) => Ok(d),
        Err(e) => Err(invalid(field, e)),
    }
}

fn count(field: String, n: Option<u32>, default: u32) -> Result<u32, GatewayConfigError> {
    match n {
        Some(0) => Err(invalid(field, "must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

impl FilePool {
    /// The pool of `upstream[i]`, whose URL is `https` when `tls`.
    pub(crate) fn parse(self, i: usize, tls: bool) -> Result<PoolConfig, GatewayConfigError> {
        let d = PoolConfig::default();
        let at = |k: &str| format!("upstream[{i}].{k}");
        if let Some(key) = self.rest.keys().next() {
            return Err(invalid(
                format!("upstream[{i}]"),
                format!("unknown key `{key}`"),
            ));
        }
        let addresses = self.addresses.unwrap_or_default();
        for (n, a) in addresses.iter().enumerate() {
            let port = a
                .rsplit_once(':')
                .and_then(|(h, p)| (!h.is_empty()).then_some(p));
            if port.and_then(|p| p.parse::<u16>().ok()).is_none() {
                return Err(invalid(
                    at(&format!("addresses[{n}]")),
                    format!("`{a}` is not host:port"),
                ));
            }
        }
        let balance = match self.balance.as_deref() {
            None | Some("round_robin") => Balance::RoundRobin,
            Some("least_requests") => Balance::LeastRequests,
            Some(other) => {
                return Err(invalid(
                    at("balance"),
                    format!("`{other}`: write round_robin or least_requests"),
                ));
            }
        };
        let protocol = match self.protocol.as_deref() {
            None | Some("http1") => Protocol::Http1,
            Some("h2") => Protocol::H2,
            Some("auto") if tls => Protocol::Auto,
            Some("auto") => {
                return Err(invalid(
                    at("protocol"),
                    "`auto` needs an https:// url (ALPN)",
                ));
            }
            Some(other) => {
                return Err(invalid(
                    at("protocol"),
                    format!("`{other}`: write http1, h2 or auto"),
                ));
            }
        };
        let health_check = match self.health_check {
            None => None,
            Some(h) => {
                let path = h.path.unwrap_or_else(|| "/healthz".into());
                if !path.starts_with('/') || path.parse::<http::uri::PathAndQuery>().is_err() {
                    return Err(invalid(
                        at("health_check.path"),
                        format!("`{path}` is not a path"),
                    ));
                }
                Some(HealthCheck {
                    path,
                    interval: duration(
                        at("health_check.interval"),
                        h.interval.as_deref(),
                        Duration::from_secs(5),
                    )?,
                    timeout: duration(
                        at("health_check.timeout"),
                        h.timeout.as_deref(),
                        Duration::from_secs(1),
                    )?,
                    unhealthy: count(at("health_check.unhealthy"), h.unhealthy, 2)?,
                    healthy: count(at("health_check.healthy"), h.healthy, 1)?,
                })
            }
        };
        Ok(PoolConfig {
            addresses,
            balance,
            protocol,
            ca: self.ca.map_or(d.ca, Into::into),
            max_fails: count(at("max_fails"), self.max_fails, d.max_fails)?,
            fail_timeout: duration(
                at("fail_timeout"),
                self.fail_timeout.as_deref(),
                d.fail_timeout,
            )?,
            health_check,
        })
    }
}
