//! The fields about requests: key, match, mode, networks, headers.

#[allow(unused_imports)]
use super::*;

impl<'n> Fields<'_, '_, 'n> {
    pub(super) fn key(&mut self) -> Option<KeySpec> {
        let per_ip = match self.t.get("per_ip") {
            None => false,
            Some(n) => match n.value {
                Value::Bool(b) => b,
                ref other => {
                    self.err(n.pos, "per_ip", wrong("true or false", other));
                    return None;
                }
            },
        };
        let Some(n) = self.t.get("key") else {
            let parts = if per_ip {
                vec![KeyPart::Ip]
            } else {
                Vec::new()
            };
            return Some(KeySpec { parts });
        };
        let items: Vec<&Node> = match &n.value {
            Value::Str(_) => vec![n],
            Value::Seq(items) if !items.is_empty() => items.iter().collect(),
            other => {
                let problem = wrong("a key kind or a non-empty list of key parts", other);
                self.err(n.pos, "key", problem);
                return None;
            }
        };
        let mut parts = Vec::new();
        let mut ok = true;
        for item in items {
            let Some(s) = self.string(item, "key") else {
                ok = false;
                continue;
            };
            let part = match s.split_once(':') {
                _ if s == "global" && n.pos == item.pos => None,
                _ if s == "ip" => Some(KeyPart::Ip),
                _ if s == "route" => Some(KeyPart::Route),
                Some(("header", name)) => match HeaderName::try_from(name.trim()) {
                    Ok(h) => Some(KeyPart::Header(h)),
                    Err(_) => {
                        let problem = Problem::InvalidValue {
                            reason: format!("`{name}` is not a valid header name"),
                            expected: "header:NAME with a header name such as x-api-key".into(),
                        };
                        self.err(item.pos, "key", problem);
                        ok = false;
                        continue;
                    }
                },
                _ => {
                    let found = s.to_owned();
                    self.err(item.pos, "key", Problem::UnknownKeyKind { found });
                    ok = false;
                    continue;
                }
            };
            parts.extend(part);
        }
        if per_ip && parts != [KeyPart::Ip] && ok {
            let problem = Problem::InvalidValue {
                reason: "`per_ip: true` contradicts this `key`".into(),
                expected: "either `per_ip: true` or `key`, not both".into(),
            };
            self.err(n.pos, "key", problem);
            return None;
        }
        ok.then_some(KeySpec { parts })
    }

    pub(super) fn matcher(&mut self) -> (Option<MatchSpec>, Pos) {
        let Some(n) = self.t.get("match") else {
            return (None, self.t.pos);
        };
        let Value::Map(entries) = &n.value else {
            let problem = wrong("a table with `route` or `prefix`, and `methods`", &n.value);
            self.err(n.pos, "match", problem);
            return (None, n.pos);
        };
        let m = Table {
            entries,
            pos: n.pos,
        };
        for (key, kpos, _) in entries {
            if !["route", "prefix", "methods"].contains(&key.as_str()) {
                let problem = Problem::UnknownField {
                    found: key.clone(),
                    expected: vec!["route", "prefix", "methods"],
                };
                self.err(*kpos, &format!("match.{key}"), problem);
            }
        }
        let path = match (m.get("route"), m.get("prefix")) {
            (Some(r), None) => self.path(r, "match.route").map(PathMatch::Route),
            (None, Some(p)) => self.path(p, "match.prefix").map(|p| {
                let trimmed = p.trim_end_matches('/');
                PathMatch::Prefix(if trimmed.is_empty() {
                    "/".into()
                } else {
                    trimmed.into()
                })
            }),
            (r, _) => {
                let problem = Problem::InvalidValue {
                    reason: if r.is_some() {
                        "both `route` and `prefix`".into()
                    } else {
                        "neither `route` nor `prefix`".into()
                    },
                    expected:
                        "exactly one of `route` (a template such as /orders/{id}) and `prefix`"
                            .into(),
                };
                self.err(n.pos, "match", problem);
                None
            }
        };
        let mut methods = Vec::new();
        if let Some(ms) = m.get("methods") {
            match &ms.value {
                Value::Seq(items) => {
                    for item in items {
                        let Some(s) = self.string(item, "match.methods") else {
                            continue;
                        };
                        match Method::from_bytes(s.to_ascii_uppercase().as_bytes()) {
                            Ok(method) => methods.push(method),
                            Err(_) => {
                                let problem = Problem::InvalidValue {
                                    reason: format!("`{s}` is not an HTTP method"),
                                    expected: "methods such as GET, POST, PUT, DELETE".into(),
                                };
                                self.err(item.pos, "match.methods", problem);
                            }
                        }
                    }
                }
                other => self.err(ms.pos, "match.methods", wrong("a list of methods", other)),
            }
        }
        (path.map(|path| MatchSpec { path, methods }), n.pos)
    }

    pub(super) fn path(&mut self, n: &Node, field: &str) -> Option<String> {
        let s = self.string(n, field)?;
        if !s.starts_with('/') || template_of(s).is_none() {
            let problem = Problem::InvalidValue {
                reason: format!("`{s}` is not a path"),
                expected: "a path starting with `/`, parameters as {name} and a last {*rest}"
                    .into(),
            };
            self.err(n.pos, field, problem);
            return None;
        }
        Some(s.to_owned())
    }

    pub(super) fn mode(&mut self, leaky: bool) -> Option<Mode> {
        let delay = match self.t.get("mode") {
            None => leaky,
            Some(n) => match self.string(n, "mode")? {
                "reject" => false,
                "delay" => true,
                other => {
                    let problem = Problem::InvalidValue {
                        reason: format!("unknown mode `{other}`"),
                        expected: "reject or delay".into(),
                    };
                    self.err(n.pos, "mode", problem);
                    return None;
                }
            },
        };
        let max_delay = self.duration("max_delay")?;
        match (delay, max_delay) {
            (false, Some((_, pos))) => {
                let problem = Problem::InvalidValue {
                    reason: "`max_delay` has no effect in reject mode".into(),
                    expected: "`mode: delay` with it, or no `max_delay`".into(),
                };
                self.err(pos, "max_delay", problem);
                None
            }
            (false, None) => Some(Mode::Reject),
            (true, d) => Some(Mode::Delay {
                max_delay: d.map_or(DEFAULT_MAX_DELAY, |(d, _)| d),
            }),
        }
    }

    pub(super) fn cidrs(&mut self, field: &str) -> Option<Vec<IpNet>> {
        let Some(n) = self.t.get(field) else {
            return Some(Vec::new());
        };
        let Value::Seq(items) = &n.value else {
            self.err(n.pos, field, wrong("a list of networks", &n.value));
            return None;
        };
        let mut nets = Vec::new();
        let mut ok = true;
        for item in items {
            let Some(s) = self.string(item, field) else {
                ok = false;
                continue;
            };
            let parsed = s
                .parse::<IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from));
            match parsed {
                Ok(net) => nets.push(net),
                Err(_) => {
                    let found = s.to_owned();
                    self.err(item.pos, field, Problem::InvalidCidr { found });
                    ok = false;
                }
            }
        }
        ok.then_some(nets)
    }

    pub(super) fn headers(&mut self) -> Option<HeaderSpec> {
        let Some(n) = self.t.get("headers") else {
            return Some(HeaderSpec::Draft10);
        };
        match self.string(n, "headers")? {
            "draft10" => Some(HeaderSpec::Draft10),
            "legacy" => Some(HeaderSpec::Legacy),
            "none" => Some(HeaderSpec::None),
            other => {
                let problem = Problem::InvalidValue {
                    reason: format!("unknown header style `{other}`"),
                    expected: "draft10, legacy or none".into(),
                };
                self.err(n.pos, "headers", problem);
                None
            }
        }
    }
}

impl Fields<'_, '_, '_> {
    /// A `true`/`false` field; `Some(None)` when absent.
    pub(super) fn flag(&mut self, field: &str) -> Option<Option<bool>> {
        let Some(n) = self.t.get(field) else {
            return Some(None);
        };
        match n.value {
            Value::Bool(b) => Some(Some(b)),
            ref other => {
                self.err(n.pos, field, wrong("true or false", other));
                None
            }
        }
    }

    /// `penalty: { after, within, block }`, on a keyed rule only.
    pub(super) fn penalty(&mut self, key: Option<&KeySpec>) -> Option<Option<PenaltySpec>> {
        let Some(n) = self.t.get("penalty") else {
            return Some(None);
        };
        let Value::Map(entries) = &n.value else {
            let problem = wrong("a table with `after`, `within` and `block`", &n.value);
            self.err(n.pos, "penalty", problem);
            return None;
        };
        let p = Table {
            entries,
            pos: n.pos,
        };
        let mut ok = true;
        for (key, kpos, _) in entries {
            if !["after", "within", "block"].contains(&key.as_str()) {
                let problem = Problem::UnknownField {
                    found: key.clone(),
                    expected: vec!["after", "within", "block"],
                };
                self.err(*kpos, &format!("penalty.{key}"), problem);
                ok = false;
            }
        }
        let after = match p.get("after") {
            None => {
                self.err(n.pos, "penalty.after", Problem::MissingField);
                None
            }
            Some(a) => self.positive(a, "penalty.after").and_then(|v| {
                match u32::try_from(v).ok().filter(|&v| v <= MAX_PENALTY_AFTER) {
                    Some(v) => Some(v),
                    None => {
                        let problem = Problem::InvalidValue {
                            reason: format!("{v} refusals cannot be counted"),
                            expected: format!("at most {MAX_PENALTY_AFTER}"),
                        };
                        self.err(a.pos, "penalty.after", problem);
                        None
                    }
                }
            }),
        };
        let mut span = |field: &str, check: fn(Duration) -> Option<String>| {
            let name = format!("penalty.{field}");
            let Some(d) = p.get(field) else {
                self.err(n.pos, &name, Problem::MissingField);
                return None;
            };
            let s = self.string(d, &name)?;
            let value = match parse_duration(s) {
                Ok(v) => v,
                Err(reason) => {
                    self.err(d.pos, &name, Problem::InvalidDuration { reason });
                    return None;
                }
            };
            match check(value) {
                None => Some(value),
                Some(expected) => {
                    let problem = Problem::InvalidValue {
                        reason: format!("`{s}` is out of range"),
                        expected,
                    };
                    self.err(d.pos, &name, problem);
                    None
                }
            }
        };
        let within = span("within", |d| {
            let whole_ms = d.subsec_nanos() % 1_000_000 == 0;
            (d < Duration::from_millis(1) || d.as_millis() >= 1 << 42 || !whole_ms)
                .then(|| "a whole number of milliseconds, at least 1ms and under 139 years".into())
        });
        let block = span("block", |d| {
            (d.is_zero() || d.as_nanos() > 1 << 60)
                .then(|| "a duration above 0 and at most 36 years".into())
        });
        if key.is_some_and(KeySpec::is_global) {
            let problem = Problem::InvalidValue {
                reason: "a penalty on a global rule would block every client".into(),
                expected: "a keyed rule (`key: ip`, `key: header:NAME`, ...) for `penalty`".into(),
            };
            self.err(n.pos, "penalty", problem);
            ok = false;
        }
        let spec = PenaltySpec {
            after: after?,
            within: within?,
            block: block?,
        };
        ok.then_some(Some(spec))
    }
}
