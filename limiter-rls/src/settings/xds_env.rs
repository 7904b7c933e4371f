//! Where the config comes from and how the gRPC listener is secured, from
//! envoyproxy/ratelimit's variables (`settings.go`), with their defaults:
//!
//! * `CONFIG_TYPE`: `FILE` (default, the YAML directory) or
//!   `GRPC_XDS_SOTW` (an xDS server, see `xds`), any case.
//! * `CONFIG_GRPC_XDS_SERVER_URL` (`localhost:18000`),
//!   `CONFIG_GRPC_XDS_NODE_ID` (`default`), `CONFIG_GRPC_XDS_NODE_METADATA`
//!   (`key=value,...`), `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS`
//!   (`key:value,...`), `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` (3s),
//!   `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL` (10s),
//!   `XDS_CLIENT_BACKOFF_MAX_INTERVAL` (60s),
//!   `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES`.
//! * `CONFIG_GRPC_XDS_SERVER_USE_TLS` with `CONFIG_GRPC_XDS_SERVER_TLS_CACERT`,
//!   `CONFIG_GRPC_XDS_CLIENT_TLS_CERT`/`_KEY` (used when both are set) and
//!   `CONFIG_GRPC_XDS_SERVER_TLS_SAN`.
//! * `GRPC_SERVER_USE_TLS` with `GRPC_SERVER_TLS_CERT`, `GRPC_SERVER_TLS_KEY`
//!   (both required), `GRPC_CLIENT_TLS_CACERT` and `GRPC_CLIENT_TLS_SAN`.
//!
//! Paths are checked when the files are first read (at start), not here.

use std::path::PathBuf;
use std::time::Duration;

use super::SettingError;
use crate::tls::GrpcTls;
use crate::xds::{XdsSettings, XdsTls};

/// Where the rate-limit config comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `CONFIG_TYPE=FILE`: the YAML directory, reloaded on change.
    File,
    /// `CONFIG_TYPE=GRPC_XDS_SOTW`: pushed by an xDS server.
    Xds(Box<XdsSettings>),
}

type Get<'a> = &'a dyn Fn(&str) -> Option<String>;
type BoolOf<'a> = &'a dyn Fn(&'static str, bool) -> Result<bool, SettingError>;
type DurationOf<'a> = &'a dyn Fn(&'static str, Duration) -> Result<Duration, SettingError>;

fn path(get: Get<'_>, name: &str) -> Option<PathBuf> {
    get(name).filter(|p| !p.is_empty()).map(PathBuf::from)
}

/// `a<sep>b,c<sep>d` as pairs; entries without `sep` are skipped, as theirs.
fn pairs(text: &str, sep: char) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|e| e.split_once(sep))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// `CONFIG_TYPE` and the xDS variables.
pub(crate) fn config_source(
    get: Get<'_>,
    bool_of: BoolOf<'_>,
    duration: DurationOf<'_>,
) -> Result<ConfigSource, SettingError> {
    let kind = get("CONFIG_TYPE").unwrap_or_else(|| "FILE".into());
    match kind.to_ascii_uppercase().as_str() {
        "FILE" => return Ok(ConfigSource::File),
        "GRPC_XDS_SOTW" => {}
        _ => {
            return Err(SettingError {
                name: "CONFIG_TYPE",
                value: kind,
                expected: "FILE or GRPC_XDS_SOTW",
            });
        }
    }
    let tls = if bool_of("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)? {
        Some(XdsTls {
            ca: path(get, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT"),
            client: path(get, "CONFIG_GRPC_XDS_CLIENT_TLS_CERT")
                .zip(path(get, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY")),
            san: get("CONFIG_GRPC_XDS_SERVER_TLS_SAN").filter(|s| !s.is_empty()),
        })
    } else {
        None
    };
    let max_message_size = match get("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES").filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => match v.parse::<usize>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => {
                return Err(SettingError {
                    name: "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
                    value: v,
                    expected: "a number of bytes",
                });
            }
        },
    };
    Ok(ConfigSource::Xds(Box::new(XdsSettings {
        server_url: get("CONFIG_GRPC_XDS_SERVER_URL").unwrap_or_else(|| "localhost:18000".into()),
        node_id: get("CONFIG_GRPC_XDS_NODE_ID").unwrap_or_else(|| "default".into()),
        node_metadata: pairs(
            &get("CONFIG_GRPC_XDS_NODE_METADATA").unwrap_or_default(),
            '=',
        ),
        headers: pairs(
            &get("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS").unwrap_or_default(),
            ':',
        ),
        tls,
        connect_retry: duration(
            "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
            Duration::from_secs(3),
        )?,
        backoff_initial: duration(
            "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
            Duration::from_secs(10),
        )?,
        backoff_max: duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL", Duration::from_secs(60))?,
        max_message_size,
    })))
}

/// `GRPC_SERVER_USE_TLS` and its files.
pub(crate) fn grpc_tls(get: Get<'_>, bool_of: BoolOf<'_>) -> Result<Option<GrpcTls>, SettingError> {
    if !bool_of("GRPC_SERVER_USE_TLS", false)? {
        return Ok(None);
    }
    let required = |name: &'static str| {
        path(get, name).ok_or(SettingError {
            name,
            value: String::new(),
            expected: "a PEM file (GRPC_SERVER_USE_TLS is set)",
        })
    };
    Ok(Some(GrpcTls {
        cert: required("GRPC_SERVER_TLS_CERT")?,
        key: required("GRPC_SERVER_TLS_KEY")?,
        client_ca: path(get, "GRPC_CLIENT_TLS_CACERT"),
        client_san: get("GRPC_CLIENT_TLS_SAN").filter(|s| !s.is_empty()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_split_as_theirs() {
        assert_eq!(
            pairs("a=1, b=2=3,junk", '='),
            [("a".into(), "1".into()), ("b".into(), "2=3".into())]
        );
        assert!(pairs("", ':').is_empty());
    }
}
