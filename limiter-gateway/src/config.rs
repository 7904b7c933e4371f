//! The gateway's own configuration: listeners, the admin listener,
//! upstreams and timeouts, from a small TOML file (`--gateway FILE`) or
//! from flags (`--listen`, `--upstream`, `--admin`).
//!
//! The rules live in their own file (`--config rules.yaml`, the
//! `limiter-config` schema): that schema is closed (an unknown top-level
//! key is an error), so the gateway's section cannot sit beside
//! `rate_limits`, and one rules file serves a library user, `limiter check`
//! and the gateway alike.
//!
//! Invariants once [`GatewayConfig::validate`] has passed: at least one
//! listener and one upstream; every upstream URL is `http://host[:port][/base]`
//! without query; prefixes start with `/` and are unique; every timeout is
//! non-zero.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Uri;
use limiter_config::{MatchSpec, Matcher, PathMatch, RouteTable};
use serde::Deserialize;

use crate::conn::ConnectionLimits;
use crate::paths::PathMode;
use crate::settings::invalid;
pub use crate::settings::{GatewayConfigError, Timeouts, parse_addr, parse_upstream_url};
pub use crate::upstream::Upstream;

/// Everything the gateway needs besides the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    /// The proxy's listeners.
    pub listen: Vec<SocketAddr>,
    /// The admin listener (`/metrics`, `/healthz`, `/rules`, the dashboard,
    /// `/explain` and the mutating admin calls), if any.
    pub admin: Option<SocketAddr>,
    /// The file holding the admin bearer token (`admin.token_file`,
    /// `--admin-token-file`): every mutating admin call must present it,
    /// and without it the admin listener must be on loopback (see
    /// [`check_admin_bind`](crate::check_admin_bind)).
    pub admin_token_file: Option<PathBuf>,
    /// The upstreams, by prefix.
    pub upstreams: Vec<Upstream>,
    /// The timeouts.
    pub timeouts: Timeouts,
    /// TLS listeners and their certificate, if any.
    pub tls: Option<crate::tls::TlsConfig>,
    /// The limits of client connections and request heads.
    pub connections: ConnectionLimits,
    /// What to do with a path not in normal form.
    pub paths: PathMode,
    /// Logging.
    pub log: LogConfig,
    /// The serving threads, each a single-threaded runtime with its own
    /// listener sockets (`SO_REUSEPORT`) and upstream connections; `None`
    /// for one per CPU core.
    pub workers: Option<std::num::NonZeroUsize>,
}

/// How the gateway logs (the gateway file's `[log]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogConfig {
    /// One JSON object per line instead of text.
    pub json: bool,
    /// One line per request (target `access`).
    pub access: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    listen: Vec<String>,
    /// `"127.0.0.1:9090"`, or a table `{ listen, token_file }`.
    admin: Option<toml::Value>,
    #[serde(default)]
    upstream: Vec<FileUpstream>,
    #[serde(default)]
    timeouts: FileTimeouts,
    tls: Option<crate::tls::FileTls>,
    #[serde(default)]
    connections: FileConnections,
    paths: Option<String>,
    #[serde(default)]
    log: FileLog,
    workers: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConnections {
    head_timeout: Option<String>,
    idle_timeout: Option<String>,
    h2_ping_interval: Option<String>,
    h2_ping_timeout: Option<String>,
    max_per_listener: Option<usize>,
    max_per_client: Option<usize>,
    max_headers: Option<usize>,
    max_head_bytes: Option<usize>,
    max_field_bytes: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileLog {
    format: Option<String>,
    #[serde(default)]
    access: bool,
}

// Unknown keys: caught by `FilePool` (flatten and deny_unknown_fields do
// not combine).
#[derive(Deserialize)]
struct FileUpstream {
    name: Option<String>,
    url: String,
    prefix: Option<String>,
    #[serde(default)]
    rewrite_host: bool,
    #[serde(flatten)]
    pool: crate::upstream::FilePool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileTimeouts {
    connect: Option<String>,
    request: Option<String>,
    idle: Option<String>,
    shutdown: Option<String>,
    drain: Option<String>,
}

/// The gateway file's `admin`: an address, or a table with `listen` and
/// `token_file` (relative to the gateway file's directory).
fn admin(
    file: &Path,
    value: Option<toml::Value>,
) -> Result<(Option<SocketAddr>, Option<PathBuf>), GatewayConfigError> {
    let table = match value {
        None => return Ok((None, None)),
        Some(toml::Value::String(s)) => return Ok((Some(parse_addr("admin", &s)?), None)),
        Some(toml::Value::Table(t)) => t,
        Some(other) => {
            return Err(invalid(
                "admin",
                format!(
                    "a {}: write an address (admin = \"127.0.0.1:9090\") or a table ([admin] listen = \"127.0.0.1:9090\", token_file = \"admin.token\")",
                    other.type_str()
                ),
            ));
        }
    };
    let mut listen = None;
    let mut token_file = None;
    for (key, value) in table {
        let field = format!("admin.{key}");
        let text = match (&*key, value) {
            ("listen" | "token_file", toml::Value::String(s)) => s,
            ("listen" | "token_file", other) => {
                return Err(invalid(
                    field,
                    format!("a {}: write a string", other.type_str()),
                ));
            }
            _ => {
                return Err(invalid(
                    field,
                    "unknown field; `admin` takes `listen` and `token_file`",
                ));
            }
        };
        if key == "listen" {
            listen = Some(parse_addr(&field, &text)?);
        } else if text.is_empty() {
            return Err(invalid(field, "empty: name the file holding the token"));
        } else {
            let dir = file.parent().unwrap_or(Path::new("."));
            token_file = Some(dir.join(text));
        }
    }
    Ok((listen, token_file))
}

fn duration(
    field: &str,
    s: Option<&str>,
    default: Duration,
) -> Result<Duration, GatewayConfigError> {
    let Some(s) = s else { return Ok(default) };
    let d = limiter_config::parse_duration(s).map_err(|e| invalid(field, e))?;
    if d.is_zero() {
        return Err(invalid(field, "must be more than 0"));
    }
    Ok(d)
}

/// A duration that may be 0 (the drain delay: none).
fn zero_or_duration(
    field: &str,
    s: Option<&str>,
    default: Duration,
) -> Result<Duration, GatewayConfigError> {
    let Some(s) = s else { return Ok(default) };
    limiter_config::parse_duration(s).map_err(|e| invalid(field, e))
}

fn connections(c: &FileConnections) -> Result<ConnectionLimits, GatewayConfigError> {
    let d = ConnectionLimits::default();
    let at_least = |field: &str, v: Option<usize>, min: usize, default: usize| match v {
        None => Ok(default),
        Some(v) if v >= min => Ok(v),
        Some(_) => Err(invalid(
            format!("connections.{field}"),
            format!("must be at least {min}"),
        )),
    };
    Ok(ConnectionLimits {
        head_timeout: duration(
            "connections.head_timeout",
            c.head_timeout.as_deref(),
            d.head_timeout,
        )?,
        idle_timeout: duration(
            "connections.idle_timeout",
            c.idle_timeout.as_deref(),
            d.idle_timeout,
        )?,
        h2_ping_interval: duration(
            "connections.h2_ping_interval",
            c.h2_ping_interval.as_deref(),
            d.h2_ping_interval,
        )?,
        h2_ping_timeout: duration(
            "connections.h2_ping_timeout",
            c.h2_ping_timeout.as_deref(),
            d.h2_ping_timeout,
        )?,
        max_per_listener: at_least(
            "max_per_listener",
            c.max_per_listener,
            1,
            d.max_per_listener,
        )?,
        max_per_client: at_least("max_per_client", c.max_per_client, 0, d.max_per_client)?,
        max_headers: at_least("max_headers", c.max_headers, 1, d.max_headers)?,
        // hyper's smallest HTTP/1 buffer.
        max_head_bytes: at_least("max_head_bytes", c.max_head_bytes, 8192, d.max_head_bytes)?,
        max_field_bytes: at_least("max_field_bytes", c.max_field_bytes, 64, d.max_field_bytes)?,
    })
}

impl GatewayConfig {
    /// An upstream for every path with the default timeouts.
    pub fn single(listen: SocketAddr, upstream: Uri) -> GatewayConfig {
        GatewayConfig {
            listen: vec![listen],
            admin: None,
            admin_token_file: None,
            upstreams: vec![Upstream {
                name: "default".into(),
                url: upstream,
                prefix: "/".into(),
                rewrite_host: false,
                pool: crate::upstream::PoolConfig::default(),
            }],
            timeouts: Timeouts::default(),
            connections: ConnectionLimits::default(),
            paths: PathMode::default(),
            log: LogConfig::default(),
            tls: None,
            workers: None,
        }
    }

    /// Reads a gateway file (TOML).
    ///
    /// # Errors
    ///
    /// The file cannot be read, is not the schema, or a value is wrong.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_gateway::GatewayConfig;
    ///
    /// let config = GatewayConfig::from_toml("gw.toml".as_ref(), r#"
    /// listen = ["127.0.0.1:8080"]
    /// admin = "127.0.0.1:9090"
    /// [timeouts]
    /// request = "5s"
    /// [[upstream]]
    /// url = "http://127.0.0.1:3000"
    /// "#)?;
    /// assert_eq!(config.upstreams[0].prefix, "/");
    /// assert_eq!(config.timeouts.request, std::time::Duration::from_secs(5));
    /// # Ok::<(), limiter_gateway::GatewayConfigError>(())
    /// ```
    pub fn from_toml(file: &Path, text: &str) -> Result<GatewayConfig, GatewayConfigError> {
        let raw: FileConfig = toml::from_str(text).map_err(|e| GatewayConfigError::Syntax {
            file: file.display().to_string(),
            message: e.to_string(),
        })?;
        let listen = raw
            .listen
            .iter()
            .enumerate()
            .map(|(i, s)| parse_addr(&format!("listen[{i}]"), s))
            .collect::<Result<Vec<_>, _>>()?;
        let (admin, admin_token_file) = admin(file, raw.admin)?;
        let upstreams = raw
            .upstream
            .into_iter()
            .enumerate()
            .map(|(i, u)| {
                let url = parse_upstream_url(&format!("upstream[{i}].url"), &u.url)?;
                let https = url.scheme_str() == Some("https");
                Ok(Upstream {
                    name: u.name.unwrap_or_else(|| format!("upstream{i}")),
                    url,
                    prefix: u.prefix.unwrap_or_else(|| "/".into()),
                    rewrite_host: u.rewrite_host,
                    pool: u.pool.parse(i, https)?,
                })
            })
            .collect::<Result<Vec<_>, GatewayConfigError>>()?;
        let d = Timeouts::default();
        let t = &raw.timeouts;
        let timeouts = Timeouts {
            connect: duration("timeouts.connect", t.connect.as_deref(), d.connect)?,
            request: duration("timeouts.request", t.request.as_deref(), d.request)?,
            idle: duration("timeouts.idle", t.idle.as_deref(), d.idle)?,
            shutdown: duration("timeouts.shutdown", t.shutdown.as_deref(), d.shutdown)?,
            drain: zero_or_duration("timeouts.drain", t.drain.as_deref(), d.drain)?,
        };
        let connections = connections(&raw.connections)?;
        let paths = match raw.paths.as_deref() {
            None | Some("rewrite") => PathMode::Rewrite,
            Some("reject") => PathMode::Reject,
            Some(other) => {
                return Err(invalid(
                    "paths",
                    format!("`{other}`: write \"rewrite\" or \"reject\""),
                ));
            }
        };
        let log = LogConfig {
            json: match raw.log.format.as_deref() {
                None | Some("text") => false,
                Some("json") => true,
                Some(other) => {
                    return Err(invalid(
                        "log.format",
                        format!("`{other}`: write \"text\" or \"json\""),
                    ));
                }
            },
            access: raw.log.access,
        };
        let tls = raw.tls.map(|t| t.parse(file)).transpose()?;
        let workers = match raw.workers {
            None => None,
            Some(n) => Some(std::num::NonZeroUsize::new(n).ok_or_else(|| {
                invalid(
                    "workers",
                    "must be at least 1 (leave it out for one per core)",
                )
            })?),
        };
        Ok(GatewayConfig {
            listen,
            admin,
            admin_token_file,
            upstreams,
            timeouts,
            connections,
            paths,
            log,
            tls,
            workers,
        })
    }

    /// Reads the gateway file at `path`.
    ///
    /// # Errors
    ///
    /// As [`from_toml`](GatewayConfig::from_toml).
    pub fn load(path: &Path) -> Result<GatewayConfig, GatewayConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| GatewayConfigError::Io {
            file: path.display().to_string(),
            message: e.to_string(),
        })?;
        GatewayConfig::from_toml(path, &text)
    }

    /// Checks the invariants of the module doc.
    ///
    /// # Errors
    ///
    /// The first broken one.
    pub fn validate(&self) -> Result<(), GatewayConfigError> {
        if self.listen.is_empty() && self.tls.as_ref().is_none_or(|t| t.listen.is_empty()) {
            return Err(invalid(
                "listen",
                "give at least one listener (or --listen)",
            ));
        }
        if self.upstreams.is_empty() {
            return Err(invalid(
                "upstream",
                "give at least one upstream (or --upstream)",
            ));
        }
        for (i, u) in self.upstreams.iter().enumerate() {
            if !u.prefix.starts_with('/') {
                return Err(invalid(
                    format!("upstream[{i}].prefix"),
                    format!("`{}` must start with /", u.prefix),
                ));
            }
            if self.upstreams[..i]
                .iter()
                .any(|v| trim(&v.prefix) == trim(&u.prefix))
            {
                return Err(invalid(
                    format!("upstream[{i}].prefix"),
                    format!("`{}` is routed twice", u.prefix),
                ));
            }
        }
        if let Some(addr) = self.admin
            && !addr.ip().is_loopback()
            && self.admin_token_file.is_none()
        {
            return Err(invalid(
                "admin",
                crate::PublicAdminWithoutToken { addr }.to_string(),
            ));
        }
        Ok(())
    }

    /// The upstreams by prefix, in the workspace's one route matcher
    /// (segment boundaries, the longest prefix wins).
    pub(crate) fn routes(&self) -> RouteTable<usize> {
        let mut table = RouteTable::new();
        for (i, u) in self.upstreams.iter().enumerate() {
            let spec = MatchSpec {
                path: PathMatch::Prefix(trim(&u.prefix).to_owned()),
                methods: Vec::new(),
            };
            // A prefix always compiles (only templates can fail).
            if let Some(matcher) = Matcher::new(&spec) {
                table.insert(matcher, i);
            }
        }
        table
    }
}

fn trim(prefix: &str) -> &str {
    match prefix.trim_end_matches('/') {
        "" => "/",
        p => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_at_segment_boundaries() {
        let text = r#"
listen = ["127.0.0.1:0"]
[[upstream]]
url = "http://127.0.0.1:1"
[[upstream]]
name = "api"
url = "http://127.0.0.1:2/base"
prefix = "/api/"
"#;
        let c = GatewayConfig::from_toml("g.toml".as_ref(), text).unwrap();
        c.validate().unwrap();
        let routes = c.routes();
        let up = |path: &str| routes.get(&http::Method::GET, path).copied();
        assert_eq!(up("/api/x"), Some(1));
        assert_eq!(up("/api"), Some(1));
        assert_eq!(up("/apix"), Some(0));
        assert_eq!(up("/"), Some(0));
        assert_eq!(c.upstreams[1].name, "api");
        assert_eq!(c.upstreams[0].name, "upstream0");
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |text: &str| GatewayConfig::from_toml("g.toml".as_ref(), text).unwrap_err();
        assert!(matches!(
            bad("lisen = []"),
            GatewayConfigError::Syntax { .. }
        ));
        assert_eq!(
            bad("[[upstream]]\nurl = \"ftp://x\"").to_string(),
            "`upstream[0].url`: `ftp://x`: write an http:// or https:// URL"
        );
        assert!(
            bad("listen = [\"nope\"]")
                .to_string()
                .starts_with("`listen[0]`")
        );
        assert_eq!(
            bad("[timeouts]\nrequest = \"0\"").to_string(),
            "`timeouts.request`: must be more than 0"
        );
        let dup = GatewayConfig::from_toml(
            "g.toml".as_ref(),
            "listen = [\"127.0.0.1:0\"]\n[[upstream]]\nurl = \"http://a\"\n[[upstream]]\nurl = \"http://b\"\nprefix = \"/\"",
        )
        .unwrap();
        assert!(
            dup.validate()
                .unwrap_err()
                .to_string()
                .contains("routed twice")
        );
        assert_eq!(
            bad("workers = 0").to_string(),
            "`workers`: must be at least 1 (leave it out for one per core)"
        );
        assert_eq!(
            GatewayConfig::from_toml("g.toml".as_ref(), "workers = 3")
                .unwrap()
                .workers
                .map(std::num::NonZeroUsize::get),
            Some(3)
        );
        assert_eq!(
            bad("admin = 9090").to_string(),
            "`admin`: a integer: write an address (admin = \"127.0.0.1:9090\") or a table ([admin] listen = \"127.0.0.1:9090\", token_file = \"admin.token\")"
        );
        assert_eq!(
            bad("[admin]\nlisten = \"127.0.0.1:1\"\ntoken = \"x\"").to_string(),
            "`admin.token`: unknown field; `admin` takes `listen` and `token_file`"
        );
        assert_eq!(
            bad("[admin]\ntoken_file = 3").to_string(),
            "`admin.token_file`: a integer: write a string"
        );
        let table = GatewayConfig::from_toml(
            "/etc/limiter/g.toml".as_ref(),
            "[admin]\nlisten = \"0.0.0.0:9090\"\ntoken_file = \"admin.token\"",
        )
        .unwrap();
        assert_eq!(table.admin, Some("0.0.0.0:9090".parse().unwrap()));
        assert_eq!(
            table.admin_token_file.as_deref(),
            Some(Path::new("/etc/limiter/admin.token"))
        );
        let plain = GatewayConfig::from_toml("g.toml".as_ref(), "admin = \"127.0.0.1:9\"").unwrap();
        assert_eq!(
            (plain.admin.unwrap().port(), plain.admin_token_file),
            (9, None)
        );
        let none = GatewayConfig::from_toml("g.toml".as_ref(), "").unwrap();
        assert!(
            none.validate()
                .unwrap_err()
                .to_string()
                .starts_with("`listen`")
        );
    }
}
