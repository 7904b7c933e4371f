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
use std::path::Path;
use std::time::Duration;

use http::Uri;
use serde::Deserialize;

/// Where requests go: an upstream and the path prefix it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// The name in metrics and logs.
    pub name: String,
    /// `http://host:port` with an optional base path prepended to every
    /// request's path.
    pub url: Uri,
    /// The path prefix routed here (matched at segment boundaries, the
    /// longest wins); `/` for everything.
    pub prefix: String,
    /// Send the upstream's own authority as `Host` instead of the client's.
    pub rewrite_host: bool,
    /// Its addresses, balancing, protocol and health (module `upstream`).
    pub pool: crate::upstream::PoolConfig,
}

/// The timeouts of the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The longest a TCP connect to an upstream may take (then `504`).
    pub connect: Duration,
    /// The longest from sending a request to the upstream's response head
    /// (then `504`). Bodies stream afterwards without this bound.
    pub request: Duration,
    /// How long a pooled upstream connection may stay idle.
    pub idle: Duration,
    /// How long SIGTERM waits for in-flight and delayed requests.
    pub shutdown: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(2),
            request: Duration::from_secs(30),
            idle: Duration::from_secs(90),
            shutdown: Duration::from_secs(10),
        }
    }
}

/// Everything the gateway needs besides the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    /// The proxy's listeners.
    pub listen: Vec<SocketAddr>,
    /// The admin listener (`/metrics`, `/healthz`, `/rules`), if any.
    pub admin: Option<SocketAddr>,
    /// The upstreams, by prefix.
    pub upstreams: Vec<Upstream>,
    /// The timeouts.
    pub timeouts: Timeouts,
    /// TLS listeners and their certificate, if any.
    pub tls: Option<crate::tls::TlsConfig>,
}

/// A gateway configuration that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayConfigError {
    /// The file could not be read.
    Io {
        /// The file.
        file: String,
        /// The OS error.
        message: String,
    },
    /// The file is not valid TOML for this schema (unknown keys included).
    Syntax {
        /// The file.
        file: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value is wrong.
    Invalid {
        /// The field, e.g. `upstream[1].url`.
        field: String,
        /// What is wrong and what to write instead.
        reason: String,
    },
}

impl std::fmt::Display for GatewayConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayConfigError::Io { file, message } => write!(f, "{file}: {message}"),
            GatewayConfigError::Syntax { file, message } => write!(f, "{file}: {message}"),
            GatewayConfigError::Invalid { field, reason } => write!(f, "`{field}`: {reason}"),
        }
    }
}

impl std::error::Error for GatewayConfigError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    listen: Vec<String>,
    admin: Option<String>,
    #[serde(default)]
    upstream: Vec<FileUpstream>,
    #[serde(default)]
    timeouts: FileTimeouts,
    tls: Option<crate::tls::FileTls>,
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
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> GatewayConfigError {
    GatewayConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Parses a listener address (`127.0.0.1:8080`, `[::1]:8080`).
///
/// # Errors
///
/// [`GatewayConfigError::Invalid`] naming `field`.
pub fn parse_addr(field: &str, s: &str) -> Result<SocketAddr, GatewayConfigError> {
    s.parse().map_err(|_| {
        invalid(
            field,
            format!("`{s}` is not an address like 127.0.0.1:8080"),
        )
    })
}

/// Parses an upstream URL (`http://127.0.0.1:3000`, `https://app/base`).
///
/// # Errors
///
/// [`GatewayConfigError::Invalid`] naming `field`.
pub fn parse_upstream_url(field: &str, s: &str) -> Result<Uri, GatewayConfigError> {
    let uri: Uri = s
        .parse()
        .map_err(|e| invalid(field, format!("`{s}` is not a URL: {e}")))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(invalid(
            field,
            format!("`{s}`: write an http:// or https:// URL"),
        ));
    }
    if uri.authority().is_none() {
        return Err(invalid(field, format!("`{s}` has no host")));
    }
    if uri.query().is_some() {
        return Err(invalid(field, format!("`{s}`: a query is not allowed")));
    }
    Ok(uri)
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

impl GatewayConfig {
    /// An upstream for every path with the default timeouts.
    pub fn single(listen: SocketAddr, upstream: Uri) -> GatewayConfig {
        GatewayConfig {
            listen: vec![listen],
            admin: None,
            upstreams: vec![Upstream {
                name: "default".into(),
                url: upstream,
                prefix: "/".into(),
                rewrite_host: false,
                pool: crate::upstream::PoolConfig::default(),
            }],
            timeouts: Timeouts::default(),
            tls: None,
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
        let admin = raw
            .admin
            .as_deref()
            .map(|s| parse_addr("admin", s))
            .transpose()?;
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
        };
        let tls = raw.tls.map(|t| t.parse(file)).transpose()?;
        Ok(GatewayConfig {
            listen,
            admin,
            upstreams,
            timeouts,
            tls,
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
        Ok(())
    }

    /// The upstream serving `path`: the longest prefix matching it at a
    /// segment boundary.
    pub fn upstream_for(&self, path: &str) -> Option<usize> {
        self.upstreams
            .iter()
            .enumerate()
            .filter(|(_, u)| prefix_matches(trim(&u.prefix), path))
            .max_by_key(|(_, u)| trim(&u.prefix).len())
            .map(|(i, _)| i)
    }
}

fn trim(prefix: &str) -> &str {
    match prefix.trim_end_matches('/') {
        "" => "/",
        p => p,
    }
}

fn prefix_matches(prefix: &str, path: &str) -> bool {
    prefix == "/"
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
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
        assert_eq!(c.upstream_for("/api/x"), Some(1));
        assert_eq!(c.upstream_for("/api"), Some(1));
        assert_eq!(c.upstream_for("/apix"), Some(0));
        assert_eq!(c.upstream_for("/"), Some(0));
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
        let none = GatewayConfig::from_toml("g.toml".as_ref(), "").unwrap();
        assert!(
            none.validate()
                .unwrap_err()
                .to_string()
                .starts_with("`listen`")
        );
    }
}
