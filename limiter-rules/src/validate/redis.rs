//! `backend` and the `redis` section.
//!
//! A Redis URL is checked for its form here (scheme, host, port, database),
//! without the `redis` crate: `redis://[user[:password]@]host[:port][/db]`
//! (also `rediss`, `valkey`, `valkeys`) or `unix:///path/to.sock` (also
//! `redis+unix`, `valkey+unix`). What only a client can know (a TLS scheme
//! in a build without TLS) is reported when the rule set is built.

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
            None => share.map(|share| FailurePolicy::Local { share }),
            Some(n) => match (self.string(n, "redis.failure_policy"), share) {
                (Some("local"), Some(share)) => Some(FailurePolicy::Local { share }),
                (Some("open"), _) => Some(FailurePolicy::Open),
                (Some("closed"), _) => Some(FailurePolicy::Closed),
                (Some("error"), _) => Some(FailurePolicy::Error),
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
        };
        ok.then_some(BackendSpec::Redis(spec))
    }
}

/// Whether `url` has the form of a Redis URL; why not otherwise.
pub(crate) fn redis_url(url: &str) -> Result<(), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("`{url}` has no scheme (write redis://HOST:PORT/)"));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "redis" | "rediss" | "valkey" | "valkeys" => {}
        "unix" | "redis+unix" | "valkey+unix" => {
            let path = rest.split(['?', '#']).next().unwrap_or("");
            return if path.starts_with('/') && path.len() > 1 {
                Ok(())
            } else {
                Err(format!("`{url}` names no socket path"))
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
            .ok_or_else(|| format!("`{url}`: unclosed `[` in the host"))?;
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
        return Err(format!("`{url}` has no valid host"));
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

#[cfg(test)]
mod tests {
    use super::redis_url;

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
        ] {
            assert!(redis_url(bad).is_err(), "{bad}");
        }
    }
}
