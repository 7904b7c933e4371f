//! The Redis endpoint from envoyproxy/ratelimit's variables, with their
//! meanings:
//!
//! * `REDIS_TYPE`: `single` (default), `cluster` or `sentinel`, any case.
//! * `REDIS_URL`: `host:port` (or a full `redis://`/`rediss://` URL) for
//!   `single`; a comma-separated list of them for `cluster`; for
//!   `sentinel`, the master's name then the sentinels:
//!   `mymaster,host1:26379,host2:26379`.
//! * `REDIS_AUTH`: `password`, or `user:password` (split at the first `:`)
//!   for an ACL user; for the servers, never the sentinels. A URL's own
//!   credentials win.
//! * `REDIS_SENTINEL_AUTH`: the same, for the sentinels.
//! * `REDIS_TLS`: TLS to the servers and the sentinels, checked against
//!   `REDIS_TLS_CACERT` (a PEM file; the system's roots without it), with
//!   `REDIS_TLS_CLIENT_CERT` and `REDIS_TLS_CLIENT_KEY` as the client
//!   certificate when both are set, and `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`
//!   to accept a certificate that does not name the host (its chain is
//!   still checked).

use std::path::Path;

use limiter_redis::{RedisEndpoint, RedisTls};

use super::SettingError;

/// The endpoint the variables read through `get` describe.
pub(crate) fn endpoint(
    get: &impl Fn(&str) -> Option<String>,
    bool_of: &impl Fn(&'static str, bool) -> Result<bool, SettingError>,
) -> Result<RedisEndpoint, SettingError> {
    let url = get("REDIS_URL").unwrap_or_else(|| "127.0.0.1:6379".to_owned());
    let bad_url = |expected| SettingError {
        name: "REDIS_URL",
        value: url.clone(),
        expected,
    };
    let kind = get("REDIS_TYPE").unwrap_or_else(|| "single".into());
    let entries: Vec<&str> = url.split(',').map(str::trim).collect();
    let node = |entry: &str| {
        let full = if entry.contains("://") {
            entry.to_owned()
        } else {
            format!("redis://{entry}")
        };
        RedisEndpoint::parse(&full).ok()
    };
    let mut endpoint = match kind.to_ascii_lowercase().as_str() {
        "single" => node(&url).ok_or_else(|| bad_url("host:port or a redis:// URL"))?,
        "cluster" => {
            let nodes: Option<Vec<RedisEndpoint>> = entries.iter().map(|e| node(e)).collect();
            let nodes = nodes.ok_or_else(|| bad_url("a comma-separated list of host:port"))?;
            let addrs: Option<Vec<(String, u16)>> = nodes
                .iter()
                .map(|n| n.tcp_address().map(|(h, p)| (h.to_owned(), p)))
                .collect();
            let addrs = addrs.ok_or_else(|| bad_url("a comma-separated list of host:port"))?;
            // The first node's URL credentials and TLS stand for all.
            let first = &nodes[0];
            let mut cluster = RedisEndpoint::cluster(addrs);
            if first.uses_tls() {
                cluster = cluster.with_tls(RedisTls::new());
            }
            cluster
        }
        "sentinel" => {
            let expected = "the master's name then the sentinels: mymaster,host1:26379,host2:26379";
            let [master, sentinels @ ..] = entries.as_slice() else {
                return Err(bad_url(expected));
            };
            if master.is_empty() || sentinels.is_empty() {
                return Err(bad_url(expected));
            }
            let addrs: Option<Vec<(String, u16)>> = sentinels
                .iter()
                .map(|s| node(s).and_then(|n| n.tcp_address().map(|(h, p)| (h.to_owned(), p))))
                .collect();
            RedisEndpoint::sentinel(*master, addrs.ok_or_else(|| bad_url(expected))?)
        }
        _ => {
            return Err(SettingError {
                name: "REDIS_TYPE",
                value: kind,
                expected: "single, cluster or sentinel",
            });
        }
    };
    if let Some(auth) = get("REDIS_AUTH").filter(|a| !a.is_empty())
        && !endpoint.has_auth()
    {
        let (user, password) = credentials(&auth);
        endpoint = endpoint.with_auth(user, password);
    }
    if let Some(auth) = get("REDIS_SENTINEL_AUTH").filter(|a| !a.is_empty()) {
        let (user, password) = credentials(&auth);
        endpoint = endpoint.with_sentinel_auth(user, password);
    }
    if bool_of("REDIS_TLS", false)? {
        endpoint = endpoint.with_tls(tls(get, bool_of)?);
    }
    Ok(endpoint)
}

/// `user:password` or `password`, as theirs splits it.
fn credentials(auth: &str) -> (Option<&str>, &str) {
    match auth.split_once(':') {
        Some((user, password)) => (Some(user), password),
        None => (None, auth),
    }
}

/// `REDIS_TLS_*`: the files read now, so a missing one stops the start.
fn tls(
    get: &impl Fn(&str) -> Option<String>,
    bool_of: &impl Fn(&'static str, bool) -> Result<bool, SettingError>,
) -> Result<RedisTls, SettingError> {
    let file = |name: &'static str| -> Result<Option<Vec<u8>>, SettingError> {
        match get(name).filter(|p| !p.is_empty()) {
            None => Ok(None),
            Some(path) => std::fs::read(Path::new(&path))
                .map(Some)
                .map_err(|_| SettingError {
                    name,
                    value: path,
                    expected: "a readable PEM file",
                }),
        }
    };
    let mut tls = RedisTls::new()
        .skip_hostname_verification(bool_of("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)?);
    if let Some(ca) = file("REDIS_TLS_CACERT")? {
        tls = tls.ca_pem(ca);
    }
    // Theirs uses the pair only when both are set.
    if let (Some(cert), Some(key)) = (
        file("REDIS_TLS_CLIENT_CERT")?,
        file("REDIS_TLS_CLIENT_KEY")?,
    ) {
        tls = tls.client_cert_pem(cert, key);
    }
    Ok(tls)
}
