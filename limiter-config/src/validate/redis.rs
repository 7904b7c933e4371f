//! `backend` and the `redis` section.

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
                .and_then(|u| match ::redis::Client::open(u) {
                    Ok(_) => Some(u.to_owned()),
                    Err(e) => {
                        let message = e.to_string();
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
            Some(Algorithm::TokenBucket { quota, .. } | Algorithm::LeakyBucket { quota, .. })
                if !quota.period_nanos().is_multiple_of(1_000) =>
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
            Some(Algorithm::TokenBucket { .. } | Algorithm::LeakyBucket { .. }) => {}
            Some(other) => {
                let problem = Problem::InvalidValue {
                    reason: format!("`{}` has no Redis backend", other.name()),
                    expected:
                        "`backend: local`, or algorithm token_bucket or leaky_bucket on Redis"
                            .into(),
                };
                let pos = self.t.get("backend").map_or(self.t.pos, |n| n.pos);
                self.err(pos, "backend", problem);
                ok = false;
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
