//! The parts of the gateway's configuration that its sections share, below
//! `config` (which reads the file): the error type with the field parsers
//! every section uses, and the proxy's timeouts. The sections (`tls`,
//! `upstream`) parse their own tables with these, and `config` puts them
//! together, so the dependencies go one way.

use std::net::SocketAddr;
use std::time::Duration;

use http::Uri;

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
    /// How long SIGTERM waits for in-flight and delayed requests (after
    /// the drain delay).
    pub shutdown: Duration,
    /// How long after SIGTERM `/healthz` answers `503` while the listeners
    /// still accept, so a load balancer stops sending first.
    pub drain: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(2),
            request: Duration::from_secs(30),
            idle: Duration::from_secs(90),
            shutdown: Duration::from_secs(10),
            drain: Duration::from_secs(5),
        }
    }
}

pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> GatewayConfigError {
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
