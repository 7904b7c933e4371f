//! [`RedisEndpoint::parse`]: the URL forms of an endpoint (the table is in
//! the `endpoint` module). One-server URLs are read by redis-rs' own
//! parser; the Sentinel form, which lists several hosts, is read here.

use std::collections::HashMap;

use redis::{ConnectionAddr, IntoConnectionInfo};

use crate::endpoint::{Credentials, RedisEndpoint, Servers};
use crate::error::EndpointError;
use crate::tls::RedisTls;

impl RedisEndpoint {
    /// The endpoint a URL describes (forms in the
    /// [module documentation](crate::RedisEndpoint)). A `rediss` URL trusts
    /// the system's roots; [`with_tls`](Self::with_tls) sets a CA or a
    /// client certificate.
    ///
    /// # Errors
    ///
    /// [`EndpointError::InvalidUrl`], saying what is wrong (never with the
    /// password).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_redis::{EndpointError, RedisEndpoint};
    ///
    /// let e = RedisEndpoint::parse(
    ///     "redis+sentinel://app:pw@10.0.0.1:26379,10.0.0.2:26379/mymaster/2?sentinel_password=spw",
    /// )?;
    /// assert_eq!(
    ///     e.to_string(),
    ///     r#"redis master "mymaster" via sentinels 10.0.0.1:26379,10.0.0.2:26379 db 2 as app"#
    /// );
    /// assert!(matches!(
    ///     RedisEndpoint::parse("redis+sentinel://10.0.0.1:26379/"),
    ///     Err(EndpointError::InvalidUrl { .. })
    /// ));
    /// # Ok::<(), EndpointError>(())
    /// ```
    pub fn parse(url: &str) -> Result<RedisEndpoint, EndpointError> {
        let invalid = |reason: String| EndpointError::InvalidUrl { reason };
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(invalid("no scheme (write redis://HOST:PORT/)".into()));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "redis+sentinel" | "valkey+sentinel" => sentinel(rest, false),
            "rediss+sentinel" | "valkeys+sentinel" => sentinel(rest, true),
            _ => one_server(url),
        }
    }
}

/// A one-server URL, through redis-rs' parser.
fn one_server(url: &str) -> Result<RedisEndpoint, EndpointError> {
    let info = url
        .into_connection_info()
        // redis-rs' message names the part that is wrong, not the password.
        .map_err(|e| EndpointError::InvalidUrl {
            reason: e.to_string(),
        })?;
    let settings = info.redis_settings();
    let (mut endpoint, tls) = match info.addr() {
        ConnectionAddr::Tcp(host, port) => (RedisEndpoint::single(host.clone(), *port), false),
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            ..
        } => {
            if *insecure {
                return Err(EndpointError::InvalidUrl {
                    reason: "`#insecure` turns certificate checks off; set a CA instead, or skip only the host name check".into(),
                });
            }
            (RedisEndpoint::single(host.clone(), *port), true)
        }
        ConnectionAddr::Unix(path) => (
            RedisEndpoint {
                servers: Servers::Unix(path.clone()),
                ..RedisEndpoint::single("", 0)
            },
            false,
        ),
        other => {
            return Err(EndpointError::InvalidUrl {
                reason: format!("an address this client cannot reach: {other}"),
            });
        }
    };
    if let Some(password) = settings.password() {
        endpoint = endpoint.with_auth(settings.username(), password);
    }
    endpoint = endpoint.with_db(settings.db());
    if tls {
        endpoint = endpoint.with_tls(RedisTls::new());
    }
    Ok(endpoint)
}

/// `[user:password@]h1:p1,h2:p2/master[/db][?sentinel_username=u&sentinel_password=p]`.
fn sentinel(rest: &str, tls: bool) -> Result<RedisEndpoint, EndpointError> {
    let invalid = |reason: String| EndpointError::InvalidUrl { reason };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let mut sentinels = Vec::new();
    for entry in hosts.split(',') {
        sentinels.push(host_port(entry, 26379)?);
    }
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    let master = parts.next().ok_or_else(|| {
        invalid("no master name (write redis+sentinel://HOST:PORT/MASTER)".into())
    })?;
    let master = decode(master)?;
    let db = match parts.next() {
        None => 0,
        Some(d) => d
            .parse::<i64>()
            .map_err(|_| invalid(format!("`{d}` is not a database number")))?,
    };
    if let Some(extra) = parts.next() {
        return Err(invalid(format!("unexpected `/{extra}` after the database")));
    }
    let mut endpoint = RedisEndpoint::sentinel(master, sentinels).with_db(db);
    if let Some(c) = userinfo.map(credentials).transpose()? {
        endpoint.auth = Some(c);
    }
    let mut params = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "sentinel_username" | "sentinel_password" => {
                params.insert(k, decode(v)?);
            }
            other => {
                return Err(invalid(format!(
                    "unknown parameter `{other}` (sentinel_username, sentinel_password)"
                )));
            }
        }
    }
    match (
        params.remove("sentinel_username"),
        params.remove("sentinel_password"),
    ) {
        (user, Some(password)) => {
            endpoint.sentinel_auth = Some(Credentials {
                username: user,
                password,
            });
        }
        (Some(_), None) => {
            return Err(invalid(
                "sentinel_username without sentinel_password".into(),
            ));
        }
        (None, None) => {}
    }
    if tls {
        endpoint = endpoint.with_tls(RedisTls::new());
    }
    Ok(endpoint)
}

/// `host[:port]` or `[v6][:port]`.
pub(crate) fn host_port(entry: &str, default_port: u16) -> Result<(String, u16), EndpointError> {
    let invalid = |reason: String| EndpointError::InvalidUrl { reason };
    let entry = entry.trim();
    let (host, port) = if let Some(v6) = entry.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| invalid(format!("`{entry}`: unclosed `[`")))?;
        (host, after.strip_prefix(':'))
    } else {
        match entry.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (entry, None),
        }
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
    if !host_ok {
        return Err(invalid(format!("`{entry}` is not HOST:PORT")));
    }
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| invalid(format!("`{p}` is not a port")))?,
    };
    Ok((host.to_owned(), port))
}

/// `user:password`, `:password` or `password`, percent-decoded.
fn credentials(userinfo: &str) -> Result<Credentials, EndpointError> {
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (Some(u).filter(|u| !u.is_empty()), p),
        None => (None, userinfo),
    };
    Ok(Credentials {
        username: user.map(decode).transpose()?,
        password: decode(password)?,
    })
}

/// Percent-decoding (RFC 3986), as for the credentials of any URL.
fn decode(s: &str) -> Result<String, EndpointError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return Err(EndpointError::InvalidUrl {
                    reason: "a `%` not followed by two hex digits".into(),
                });
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| EndpointError::InvalidUrl {
        reason: "percent-encoded bytes that are not UTF-8".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_urls() {
        let e = RedisEndpoint::parse(
            "redis+sentinel://u%40x:p%3Aw@a:1,[::1]:2,b/m/3?sentinel_password=s",
        )
        .unwrap();
        let Servers::Sentinel { master, sentinels } = &e.servers else {
            panic!("{e:?}")
        };
        assert_eq!(master, "m");
        assert_eq!(
            sentinels,
            &[("a".into(), 1), ("::1".into(), 2), ("b".into(), 26379)]
        );
        assert_eq!(e.db, 3);
        let auth = e.auth.as_ref().unwrap();
        assert_eq!(
            (auth.username.as_deref(), auth.password.as_str()),
            (Some("u@x"), "p:w")
        );
        let s = e.sentinel_auth.as_ref().unwrap();
        assert_eq!((s.username.as_deref(), s.password.as_str()), (None, "s"));
        assert!(!e.uses_tls());
        assert!(
            RedisEndpoint::parse("rediss+sentinel://a/m")
                .unwrap()
                .uses_tls()
        );
        for bad in [
            "redis+sentinel://a:1",
            "redis+sentinel://a:x/m",
            "redis+sentinel://,/m",
            "redis+sentinel://a/m/db",
            "redis+sentinel://a/m/1/2",
            "redis+sentinel://a/m?foo=1",
            "redis+sentinel://a/m?sentinel_username=u",
            "redis+sentinel://p%zz@a/m",
        ] {
            assert!(
                matches!(
                    RedisEndpoint::parse(bad),
                    Err(EndpointError::InvalidUrl { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn one_server_urls() {
        let e = RedisEndpoint::parse("rediss://lim:pw@h:6380/4").unwrap();
        assert_eq!(e.tcp_address(), Some(("h", 6380)));
        assert!(e.uses_tls() && e.has_auth());
        assert_eq!(e.to_string(), "redis h:6380 db 4 as lim over TLS");
        assert!(!format!("{e:?}").contains("pw"));
        let e = RedisEndpoint::parse("redis://:pw@h").unwrap();
        assert_eq!(e.auth.as_ref().unwrap().username, None);
        assert!(matches!(
            RedisEndpoint::parse("rediss://h/#insecure"),
            Err(EndpointError::InvalidUrl { .. })
        ));
        assert!(RedisEndpoint::parse("unix:///run/redis.sock").is_ok());
        assert!(RedisEndpoint::parse("http://h/").is_err());
        assert!(RedisEndpoint::parse("h:6379").is_err());
    }
}
