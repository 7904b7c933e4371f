//! [`RuleSet::explain`]: what the rules would do with a request, now,
//! consuming nothing: the rule that matches, the key it computes (the key
//! text, as the rule's table holds it), the decision and the permits left.
//!
//! # How the decision is read without taking
//!
//! Nothing is reserved, cancelled or inserted: each limiter is only read.
//! The permits left are the limiter's own `available()` (exact, whole
//! permits: a GCRA rule's from its state word, a keyed rule's from the
//! key's cell without inserting it). For a request that does not fit,
//! the wait is the time `cost − available` more permits take at the
//! rule's emission interval: an upper bound, exact to within one interval
//! (the fraction of the next permit already earned is not read). A delay
//! rule's request is `Delayed` when that bound is within `max_delay`.
//! A key in the penalty box is refused with the exact rest of its block.
//! Redis rules and adaptive rules are not read (`Verdict::NotRead`): their
//! state is remote, or their rate moves with every latency. A concurrency
//! rule is not a rate: its layer holds a permit while the request is
//! served, it has no key, no allowlist, no shadow mode and no penalty box,
//! so its explanation is `Verdict::Concurrency`, the requests in flight and
//! the limit now. A rule with a calendar `quota` also shows the key's
//! permits left in the period and the time until its reset
//! ([`QuotaReading`], exact: one read of the key's count), and a period
//! that cannot hold the request makes the verdict `Refused` until the
//! reset.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http::{HeaderMap, Method, Request};
use limiter_tower::{KeyExtractor, PeerAddr, RequestHead};

use crate::RuleClock;
use crate::backend::RuleBackend;
use crate::key::RuleKeyText;
use crate::live::Core;
use crate::ruleset::RuleSet;
use limiter_rules::{CostSpec, Mode};

/// A request to explain: what the rules read of a request.
#[derive(Debug, Clone)]
pub struct ExplainRequest {
    /// The method.
    pub method: Method,
    /// The path (normalised as the gateway normalises it).
    pub path: String,
    /// The headers (a key `header:NAME`, `X-Forwarded-For` behind
    /// `trusted_proxies`).
    pub headers: HeaderMap,
    /// The socket peer's address (a key `ip`, the allowlist).
    pub client: Option<IpAddr>,
}

/// What the rules would do with a request now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The rule that matches; `None`: no rule does, the request passes
    /// unlimited.
    pub rule: Option<String>,
    /// The rule's limit as the file states it.
    pub limit: Option<String>,
    /// The key text the rule counts the request by (`""` for a global
    /// rule); `None` when no key could be computed or no rule matches.
    pub key: Option<String>,
    /// Whether the rule is in shadow mode (it would let the request through
    /// whatever [`verdict`](Explanation::verdict) says, counting it).
    pub shadow: bool,
    /// The rule's configured cost: the permits a request takes up front
    /// (what [`verdict`](Explanation::verdict) is decided on) and, when the
    /// rule charges after the response, the header and the debt cap.
    /// `None` when no rule matches.
    pub cost: Option<CostSpec>,
    /// The decision (of the rate and the calendar quota together, for a
    /// rule with `quota`).
    pub verdict: Verdict,
    /// The rule's calendar quota for this key, read without deciding;
    /// `None` for a rule without `quota`, a key not computed, or a Redis
    /// rule (remote).
    pub quota: Option<QuotaReading>,
}

/// A key's calendar quota as it stands now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaReading {
    /// The period's limit.
    pub limit: u32,
    /// Permits left in the current period.
    pub remaining: u32,
    /// The time until the period resets (and all of the limit comes back).
    pub reset_in: Duration,
}

/// The decision a request would get now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// No rule matches: passed unlimited.
    Unlimited,
    /// The client is on the rule's allowlist: passed uncounted.
    Allowlisted,
    /// The rule's key cannot be computed (a missing header, no client
    /// address): the layer answers with an error.
    NoKey,
    /// Admitted at once, leaving `remaining` permits.
    Admitted {
        /// Permits left after it.
        remaining: u32,
    },
    /// Held for at most `wait`, then admitted (a delay-mode rule).
    Delayed {
        /// The wait (an upper bound, exact to within one emission
        /// interval).
        wait: Duration,
        /// Permits available now (fewer than the cost).
        remaining: u32,
    },
    /// Refused (`429`) with `retry_after`.
    Refused {
        /// When the same request would fit (an upper bound, exact to
        /// within one emission interval).
        retry_after: Duration,
        /// Permits available now (fewer than the cost).
        remaining: u32,
    },
    /// Refused because the key is in the rule's penalty box, for the
    /// exact rest of its block.
    Penalized {
        /// The rest of the block.
        retry_after: Duration,
    },
    /// The cost is more than the burst: never admitted (`413`).
    OverBurst {
        /// The burst.
        burst: u32,
    },
    /// The rule's state is not read here (Redis, adaptive).
    NotRead,
    /// A concurrency rule: admitted while fewer than `limit` requests are
    /// in flight (its layer's wait or refusal otherwise).
    Concurrency {
        /// Requests the rule holds a permit for now.
        in_flight: u32,
        /// Its limit now.
        limit: u32,
    },
}

impl<C: RuleClock> RuleSet<C> {
    /// What the rules in force would do with `request` now (at the rule's
    /// up-front cost; a cost after the response is not known before it),
    /// consuming nothing: see the module documentation for what is exact.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_config::{ExplainRequest, RuleSet, Verdict};
    /// use limiter_core::ManualClock;
    ///
    /// # let dir = std::env::temp_dir().join(format!("limiter-config-explain-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("rules.yaml");
    /// std::fs::write(&path, "rate_limits:\n  orders:\n    algorithm: token_bucket\n    rate: 10\n    burst: 3\n    key: header:x-user\n    match: { route: \"/orders/{id}\" }\n")?;
    /// let rules = RuleSet::load_with_clock(&path, ManualClock::new())?;
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("x-user", "42".parse()?);
    /// let request = ExplainRequest { method: http::Method::GET, path: "/orders/7".into(), headers, client: None };
    /// let e = rules.explain(&request);
    /// assert_eq!((e.rule.as_deref(), e.key.as_deref()), (Some("orders"), Some("42")));
    /// assert_eq!(e.verdict, Verdict::Admitted { remaining: 2 });
    /// assert_eq!(rules.explain(&request), e); // nothing was taken
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn explain(&self, request: &ExplainRequest) -> Explanation {
        let snapshot = self.current();
        let Some(routed) = snapshot.routed_rule(&request.method, &request.path) else {
            return Explanation {
                rule: None,
                limit: None,
                key: None,
                shadow: false,
                cost: None,
                verdict: Verdict::Unlimited,
                quota: None,
            };
        };
        let rule = &routed.rule;
        let spec = &rule.spec;
        let limit = match &spec.quota {
            None => spec.algorithm.to_string(),
            Some(q) => format!(
                "{}; quota {} per {} ({}{})",
                spec.algorithm,
                q.limit(),
                q.period(),
                q.zone_name(),
                match q.reset_day() {
                    0 => String::new(),
                    day => format!(", resets on day {day}"),
                }
            ),
        };
        let mut explanation = Explanation {
            rule: Some(spec.name.clone()),
            limit: Some(limit),
            key: None,
            shadow: spec.shadow,
            cost: Some(spec.cost.clone()),
            verdict: Verdict::NoKey,
            quota: None,
        };
        if let Some(limiter) = rule.concurrency() {
            explanation.verdict = Verdict::Concurrency {
                in_flight: limiter.in_flight(),
                limit: limiter.limit(),
            };
            return explanation;
        }
        if let Some(ip) = request.client
            && spec
                .allowlist
                .iter()
                .any(|net| net.contains(&canonical(ip)))
        {
            explanation.verdict = Verdict::Allowlisted;
            return explanation;
        }
        let mut head = Request::builder()
            .method(request.method.clone())
            .uri(request.path.as_str())
            .body(())
            .unwrap_or_default();
        *head.headers_mut() = request.headers.clone();
        if let Some(ip) = request.client {
            head.extensions_mut()
                .insert(PeerAddr(SocketAddr::new(ip, 0)));
        }
        let Ok(key) = routed.key.extract(&RequestHead::of(&head)) else {
            return explanation;
        };
        explanation.key = Some(key.text().into_owned());
        let cost = spec.cost.request;
        explanation.verdict = verdict(&RuleBackend(std::sync::Arc::clone(rule)), &key, cost);
        if let Some(calendar) = &rule.calendar
            && let Some(state) = calendar.read(&key)
        {
            explanation.quota = Some(QuotaReading {
                limit: calendar.quota().limit(),
                remaining: state.remaining,
                reset_in: state.reset_in,
            });
            explanation.verdict =
                with_quota(explanation.verdict, state.remaining, state.reset_in, cost);
        }
        explanation
    }
}

/// The rate's verdict `rate` beside a calendar quota with `remaining`
/// permits left in a period ending in `reset_in`: refused until the reset
/// when the period cannot hold `cost`, else the rate's, with the fewer
/// permits of the two left.
fn with_quota(rate: Verdict, remaining: u32, reset_in: Duration, cost: u32) -> Verdict {
    let rate_wait = match rate {
        Verdict::Delayed { wait, .. } => wait,
        Verdict::Refused { retry_after, .. } => retry_after,
        _ => Duration::ZERO,
    };
    match rate {
        Verdict::Admitted { .. } | Verdict::Delayed { .. } | Verdict::Refused { .. }
            if remaining < cost =>
        {
            Verdict::Refused {
                retry_after: reset_in.max(rate_wait),
                remaining,
            }
        }
        Verdict::Admitted { remaining: r } => Verdict::Admitted {
            remaining: r.min(remaining - cost),
        },
        other => other,
    }
}

/// An IPv4-mapped IPv6 address as IPv4, as the layer's allowlist reads it.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The decision `cost` permits of `key` would get from `backend` now.
fn verdict<C: RuleClock>(backend: &RuleBackend<C>, key: &RuleKeyText, cost: u32) -> Verdict {
    let rule = &backend.0;
    if let Some(left) = rule.penalty.as_ref().and_then(|b| b.blocked(key)) {
        return Verdict::Penalized { retry_after: left };
    }
    let available = match &rule.live.core {
        Core::Local(l) => match l.available() {
            Some(available) => available,
            None => return Verdict::NotRead,
        },
        Core::Keyed(k) => k.available(key),
        Core::Priority(p, _) => p.available(backend.class_of(key)).unwrap_or(0),
        #[cfg(feature = "redis")]
        Core::Redis { .. } => return Verdict::NotRead,
        Core::Concurrency(_) => return Verdict::NotRead,
    };
    let policy = backend.rate_policy(key);
    if cost > policy.burst {
        return Verdict::OverBurst {
            burst: policy.burst,
        };
    }
    if available >= cost {
        return Verdict::Admitted {
            remaining: available - cost,
        };
    }
    let wait = policy.interval.saturating_mul(cost - available);
    match rule.spec.mode {
        Mode::Delay { max_delay } if wait <= max_delay => Verdict::Delayed {
            wait,
            remaining: available,
        },
        _ => Verdict::Refused {
            retry_after: wait,
            remaining: available,
        },
    }
}
