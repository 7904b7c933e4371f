//! `backend` and the `redis` section.
//!
//! A Redis URL is checked for its form here (scheme, host, port, database),
//! without the `redis` crate: `redis://[user[:password]@]host[:port][/db]`
//! (also `rediss`, `valkey`, `valkeys`), `unix:///path/to.sock` (also
//! `redis+unix`, `valkey+unix`), or a Sentinel master
//! `redis+sentinel://[user:password@]host:port[,host:port…]/master[/db]`
//! (also `rediss+sentinel`). The `tls` table needs a TLS URL. What only a
//! client can know (a PEM file that does not parse) is reported when the
//! rule set is built.

#[allow(unused_imports)]
use super::*;

impl<'n> Fields<'_, '_, 'n> {
    pub(super) fn backend(&mut self, algorithm: Option<&Algorithm>) -> Option<BackendSpec> {
        let redis = match self.t.get("backend") {
            None => false,
            Some(n) => match self.string(n, "backend")? {
                "local" => false,
                "redis" => true,
                other => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown backend `{other}`"),
                        expected: "local or redis".into(),
                    };
                    self.err(n.pos, "backend", problem);
                    return None;
                }
            },
        };
        let section = self.t.get("redis");
        if !redis {
            if let Some(s) = section {
                let problem = Problem::InvalidValue {
                    reason: "a `redis` section on a local rule".into(),
                    expected: "`backend: redis` with it, or no `redis` section".into(),
                };
                self.err(s.pos, "redis", problem);
                return None;
            }
            return Some(BackendSpec::Local);
        }
        let section = self.required("redis")?;
        let Value::Map(entries) = &section.value else {
            self.err(
                section.pos,
                "redis",
                wrong("a table with `url`", &section.value),
            );
            return None;
        };
        let r = Table {
            entries,
            pos: section.pos,
        };
        const REDIS_FIELDS: &[&str] = &[
            "url",
            "key_prefix",
            "failure_policy",
            "local_share",
            "timeout",
            "tls",
        ];
        let mut ok = true;
        for (key, kpos, _) in entries {
            if !REDIS_FIELDS.contains(&key.as_str()) {
                let problem = Problem::UnknownField {
                    found: key.clone(),
                    expected: REDIS_FIELDS.to_vec(),
                };
                self.err(*kpos, &format!("redis.{key}"), problem);
                ok = false;
            }
        }
        let url = match r.get("url") {
            None => {
                self.err(section.pos, "redis.url", Problem::MissingField);
                None
            }
            Some(n) => self
                .string(n, "redis.url")
                .and_then(|u| match redis_url(u) {
                    Ok(()) => Some(u.to_owned()),
                    Err(message) => {
                        self.err(n.pos, "redis.url", Problem::InvalidRedisUrl { message });
                        None
                    }
                }),
        };
        let key_prefix = match r.get("key_prefix") {
            None => Some(format!("limiter:{}", self.name)),
            Some(n) => self.string(n, "redis.key_prefix").map(str::to_owned),
        };
        let share = match r.get("local_share") {
            None => Some(1.0),
            Some(n) => match self.number(n, "redis.local_share") {
                Some(s) if s > 0.0 && s <= 1.0 => Some(s),
                Some(s) => {
                    let problem = Problem::InvalidValue {
                        reason: format!("a share of {s}"),
                        expected: "a share in (0, 1]: 1/instances".into(),
                    };
                    self.err(n.pos, "redis.local_share", problem);
                    None
                }
                None => None,
            },
        };
        let failure_policy = match r.get("failure_policy") {
            None => share.map(|share| WhenRedisDown::Local { share }),
            Some(n) => match (self.string(n, "redis.failure_policy"), share) {
                (Some("local"), Some(share)) => Some(WhenRedisDown::Local { share }),
                (Some("open"), _) => Some(WhenRedisDown::Open),
                (Some("closed"), _) => Some(WhenRedisDown::Closed),
                (Some("error"), _) => Some(WhenRedisDown::Error),
                (Some(other), _) => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown failure policy `{other}`"),
                        expected: "local, open, closed or error".into(),
                    };
                    self.err(n.pos, "redis.failure_policy", problem);
                    None
                }
                _ => None,
            },
        };
        let timeout = match r.get("timeout") {
            None => Some(Duration::from_millis(100)),
            Some(n) => self
                .string(n, "redis.timeout")
                .and_then(|s| match parse_duration(s) {
                    Ok(d) if !d.is_zero() => Some(d),
                    Ok(_) => {
                        let reason = "a timeout of 0 fails every call".to_owned();
                        self.err(n.pos, "redis.timeout", Problem::InvalidDuration { reason });
                        None
                    }
                    Err(reason) => {
                        self.err(n.pos, "redis.timeout", Problem::InvalidDuration { reason });
                        None
                    }
                }),
        };
        let tls = match r.get("tls") {
            None => Some(None),
            Some(n) => self.redis_tls(n, url.as_deref()).map(Some),
        };
        match algorithm {
            Some(a) if !a.definition().redis => {
                let problem = Problem::InvalidValue {
                    reason: format!("`{}` has no Redis backend", a.name()),
                    expected: format!(
                        "`backend: local`, or algorithm {} on Redis",
                        names_where(|d| d.redis)
                    ),
                };
                let pos = self.t.get("backend").map_or(self.t.pos, |n| n.pos);
                self.err(pos, "backend", problem);
                ok = false;
            }
            Some(a) => {
                if let Some(quota) = a.quota()
                    && !quota.period_nanos().is_multiple_of(1_000)
                {
                    let problem = Problem::InvalidValue {
                        reason: format!(
                            "one permit every {} ns is not a whole number of microseconds, the unit Redis counts in",
                            quota.period_nanos()
                        ),
                        expected: "a rate whose period is whole microseconds (at most 1,000,000/s; 3/s is not, 4/s is)".into(),
                    };
                    let pos = self.t.get("rate").map_or(self.t.pos, |n| n.pos);
                    self.err(pos, "rate", problem);
                    ok = false;
                }
            }
            None => {}
        }
        let spec = RedisSpec {
            url: url?,
            key_prefix: key_prefix?,
            failure_policy: failure_policy?,
            timeout: timeout?,
            tls: tls?,
        };
        ok.then_some(BackendSpec::Redis(spec))
    }
}

impl Fields<'_, '_, '_> {
    /// The `redis.tls` table; `url` (when it parsed) must be a TLS URL.
    fn redis_tls(&mut self, n: &Node, url: Option<&str>) -> Option<RedisTlsSpec> {
        let Value::Map(entries) = &n.value else {
            self.err(n.pos, "redis.tls", wrong("a table of PEM files", &n.value));
            return None;
        };
        const TLS_FIELDS: &[&str] = &[
            "ca_file",
            "cert_file",
            "key_file",
            "skip_hostname_verification",
        ];
        let mut spec = RedisTlsSpec::default();
        let mut ok = true;
        for (key, kpos, value) in entries {
            let field = format!("redis.tls.{key}");
            match key.as_str() {
                "ca_file" | "cert_file" | "key_file" => match self.string(value, &field) {
                    Some(path) if !path.is_empty() => {
                        let path = Some(std::path::PathBuf::from(path));
                        match key.as_str() {
                            "ca_file" => spec.ca_file = path,
                            "cert_file" => spec.cert_file = path,
                            _ => spec.key_file = path,
                        }
                    }
                    Some(_) => {
                        let problem = Problem::InvalidValue {
                            reason: "an empty path".into(),
                            expected: "the path of a PEM file".into(),
                        };
                        self.err(value.pos, &field, problem);
                        ok = false;
                    }
                    None => ok = false,
                },
                "skip_hostname_verification" => match value.value {
                    Value::Bool(b) => spec.skip_hostname_verification = b,
                    ref other => {
                        self.err(value.pos, &field, wrong("true or false", other));
                        ok = false;
                    }
                },
                _ => {
                    let problem = Problem::UnknownField {
                        found: key.clone(),
                        expected: TLS_FIELDS.to_vec(),
                    };
                    self.err(*kpos, &field, problem);
                    ok = false;
                }
            }
        }
        if spec.cert_file.is_some() != spec.key_file.is_some() {
            let problem = Problem::InvalidValue {
                reason: "a client certificate without its key, or a key without its certificate"
                    .into(),
                expected: "both `cert_file` and `key_file`, or neither".into(),
            };
            self.err(n.pos, "redis.tls", problem);
            ok = false;
        }
        if let Some(url) = url
            && !is_tls_url(url)
        {
            let problem = Problem::InvalidValue {
                reason: "a `tls` table with a URL that does not use TLS".into(),
                expected:
                    "a TLS URL (rediss://, valkeys://, rediss+sentinel://), or no `tls` table"
                        .into(),
            };
            self.err(n.pos, "redis.tls", problem);
            ok = false;
        }
        ok.then_some(spec)
    }
}

/// Whether `url`'s scheme is one of the TLS ones.
fn is_tls_url(url: &str) -> bool {
    let scheme = url
        .split_once("://")
        .map_or("", |(s, _)| s)
        .to_ascii_lowercase();
    matches!(
        scheme.as_str(),
        "rediss" | "valkeys" | "rediss+sentinel" | "valkeys+sentinel"
    )
}

/// Whether `url` has the form of a Redis URL; why not otherwise. The
/// messages show the URL redacted.
pub(crate) fn redis_url(url: &str) -> Result<(), String> {
    let shown = crate::schema::redacted(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "`{shown}` has no scheme (write redis://HOST:PORT/)"
        ));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "redis+sentinel" | "rediss+sentinel" | "valkey+sentinel" | "valkeys+sentinel" => {
            return sentinel_url(url, rest);
        }
        "redis" | "rediss" | "valkey" | "valkeys" => {}
        "unix" | "redis+unix" | "valkey+unix" => {
            let path = rest.split(['?', '#']).next().unwrap_or("");
            return if path.starts_with('/') && path.len() > 1 {
                Ok(())
            } else {
                Err(format!("`{shown}` names no socket path"))
            };
        }
        other => return Err(format!("unknown scheme `{other}`")),
    }
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, db) = rest.split_once('/').unwrap_or((rest, ""));
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("`{shown}`: unclosed `[` in the host"))?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("`{host}` is not an IPv6 address"));
        }
        (host, after.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
    if !host_ok {
        return Err(format!("`{shown}` has no valid host"));
    }
    if host == "0.0.0.0" || host == "::" {
        return Err("cannot connect to a wildcard address (0.0.0.0 or ::)".into());
    }
    if let Some(p) = port
        && p.parse::<u16>().is_err()
    {
        return Err(format!("`{p}` is not a port"));
    }
    let db = db.trim_matches('/');
    if !db.is_empty() && db.parse::<i64>().is_err() {
        return Err(format!("`{db}` is not a database number"));
    }
    Ok(())
}

/// The Sentinel form: hosts, then the master's name and an optional
/// database; the query only names the sentinels' credentials.
fn sentinel_url(url: &str, rest: &str) -> Result<(), String> {
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    for host in hosts.split(',') {
        // Each sentinel as a one-server URL, for the same host and port checks.
        redis_url(&format!("redis://{}", host.trim()))
            .map_err(|e| format!("sentinel `{host}`: {e}"))?;
    }
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    if parts.next().is_none() {
        return Err(format!(
            "`{}` names no master (write redis+sentinel://HOST:26379/MASTER)",
            crate::schema::redacted(url)
        ));
    }
    if let Some(db) = parts.next()
        && db.parse::<i64>().is_err()
    {
        return Err(format!("`{db}` is not a database number"));
    }
    if let Some(extra) = parts.next() {
        return Err(format!("unexpected `/{extra}` after the database"));
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let key = pair.split_once('=').map_or(pair, |(k, _)| k);
        if !matches!(key, "sentinel_username" | "sentinel_password") {
            return Err(format!(
                "unknown parameter `{key}` (sentinel_username, sentinel_password)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::redis_url;
    use crate::schema::redacted;

    #[test]
    fn secrets_are_redacted_and_the_rest_kept() {
        for (url, shown) in [
            ("redis://u:pw@h:6379/2", "redis://u:***@h:6379/2"),
            ("redis://:pw@h", "redis://:***@h"),
            ("redis://pw@h/", "redis://***@h/"),
            ("redis://h:6379/0", "redis://h:6379/0"),
            (
                "rediss+sentinel://u:p@a:1,b:2/m/2?sentinel_username=x&sentinel_password=s",
                "rediss+sentinel://u:***@a:1,b:2/m/2?sentinel_username=x&sentinel_password=***",
            ),
            ("unix:///run/r.sock?db=1", "unix:///run/r.sock?db=1"),
            ("no scheme at all", "no scheme at all"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }

    #[test]
    fn a_refused_url_is_named_without_its_password() {
        let err = redis_url("redis://u:hunter2@bad host/").unwrap_err();
        assert!(
            err.contains("u:***@bad host") && !err.contains("hunter2"),
            "{err}"
        );
        let err =
            redis_url("redis+sentinel://u:hunter2@h:1?sentinel_password=hunter3").unwrap_err();
        assert!(!err.contains("hunter"), "{err}");
    }

    #[test]
    fn redis_urls_by_form() {
        for good in [
            "redis://127.0.0.1:6379/",
            "redis://localhost",
            "rediss://user:pw@cache.example:6380/2",
            "redis://[::1]:6379/0",
            "valkey://h",
            "unix:///run/redis.sock",
            "redis+unix:///run/redis.sock?db=1",
            "redis+sentinel://a:26379,b:26380/mymaster",
            "rediss+sentinel://u:p@[::1]:26379/m/2?sentinel_password=s",
        ] {
            assert_eq!(redis_url(good), Ok(()), "{good}");
        }
        for bad in [
            "http//nowhere",
            "http://host/",
            "redis://",
            "redis://:6379",
            "redis://host:port",
            "redis://host:70000",
            "redis://host/db",
            "redis://0.0.0.0",
            "redis://[::1/",
            "unix://",
            "redis+sentinel://a:26379/",
            "redis+sentinel://a:x/m",
            "redis+sentinel://a/m/db",
            "redis+sentinel://a/m?tls=1",
        ] {
            assert!(redis_url(bad).is_err(), "{bad}");
        }
    }
}
