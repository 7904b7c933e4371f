//! The HTTP half's two adapters onto `limiter-tower`: `RuleBackend` (a
//! rule's limiter as a `limiter_tower::Backend`, whatever its algorithm or
//! store) and `RuleKey` (the rule's `key` as a `KeyExtractor`).
//!
//! `limiter-tower` implements `Backend` for `RateLimiter`, `KeyedLimiter`
//! and (its `RedisBackend`) `RedisLimiter`; a rule can be any of six
//! algorithms, keyed by this crate's [`KeyedRule`](crate::KeyedRule), or on
//! Redis, so the impl for that enum lives here: GCRA rules decide with the
//! core's headroom, Redis rules go through `RedisBackend`. Keys are strings: parts joined by `\u{1f}` (which
//! no header value, address or route contains), a header value's bytes
//! other than visible ASCII and space escaped as `\xNN` and `\` as `\\`, so
//! two different requests never share a key by accident.

use crate::RuleClock;
use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderName;
use limiter_core::{Headroom, Limiter, Quota, Reservation};
use limiter_tower::{
    Backend, ClientIp, Denial, Grant, KeyError, KeyExtractor, PeerIp, Policy, RequestHead,
};

use crate::limiter::RuleLimiter;
use crate::live::Core;
use limiter_rules::{Algorithm, KeyPart, MatchSpec, PathMatch};

/// A rule's limiter as a [`Backend`] of `limiter-tower`.
pub(crate) struct RuleBackend<C: RuleClock>(pub(crate) Arc<RuleLimiter<C>>);

impl<C: RuleClock> std::fmt::Debug for RuleBackend<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RuleBackend")
            .field(&self.0.spec.name)
            .finish()
    }
}

/// What a grant of a rule hands back: the reservation and, for a keyed
/// rule, the key's limiter it came from.
#[derive(Debug)]
pub(crate) struct RuleTicket {
    reservation: Option<Reservation>,
}

/// The grant of a GCRA decision with the headroom its own state word left.
fn exact_grant((reservation, left): (Reservation, Headroom)) -> Grant<RuleTicket> {
    Grant {
        wait: reservation.wait(),
        ticket: RuleTicket {
            reservation: Some(reservation),
        },
        remaining: left.remaining,
        reset: left.refill_in,
    }
}

/// The grant of an algorithm without a headroom of its own: `remaining`
/// read right after the decision, the next permit within one period.
fn grant(reservation: Reservation, quota: Quota, available: u32) -> Grant<RuleTicket> {
    let wait = reservation.wait();
    let (remaining, reset) = if wait.is_zero() {
        let reset = if available >= quota.burst() {
            Duration::ZERO
        } else {
            quota.period()
        };
        (available, reset)
    } else {
        (0, wait.saturating_add(quota.period()))
    };
    Grant {
        ticket: RuleTicket {
            reservation: Some(reservation),
        },
        wait,
        remaining,
        reset,
    }
}

/// The decision of a limiter without a GCRA quota of its own to report
/// (sliding window, warm-up, adaptive, priority class): `remaining` after
/// the grant, the next permit within `period`.
fn decide_local(
    limiter: &dyn Limiter,
    policy: Policy,
    cost: u32,
    max_wait: Duration,
    available: impl FnOnce() -> u32,
) -> Result<Grant<RuleTicket>, Denial> {
    let reservation = limiter.reserve_n(cost, max_wait).map_err(Denial::from)?;
    let period = policy.window / policy.limit.max(1);
    let quota = Quota::with_period(period.max(Duration::from_nanos(1)))
        .and_then(|q| q.with_burst(policy.limit.max(1)))
        .unwrap_or_else(|_| Quota::from_nanos(1, 1).expect("1 ns, burst 1 is valid"));
    Ok(grant(reservation, quota, available()))
}

impl<C: RuleClock> RuleBackend<C> {
    fn decide_sync(
        &self,
        key: &str,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<RuleTicket>, Denial>> {
        let live = &self.0.live;
        Some(match &live.core {
            // The headroom of the decision itself: exact headers.
            Core::Gcra(l) => l
                .reserve_n_with_headroom(cost, max_wait)
                .map(exact_grant)
                .map_err(Denial::from),
            Core::Keyed(k) => match k.limiter(key) {
                Ok(l) => l
                    .reserve_n_with_headroom(cost, max_wait)
                    .map(exact_grant)
                    .map_err(Denial::from),
                Err(full) => Err(Denial::Unavailable(Box::new(full))),
            },
            Core::SlidingWindow(l) => {
                decide_local(&**l, self.policy_of(), cost, max_wait, || l.available())
            }
            Core::WarmUp(l) => {
                decide_local(&**l, self.policy_of(), cost, max_wait, || l.available())
            }
            Core::AdaptiveEwma(l) => decide_local(&**l, self.policy_of(), cost, max_wait, || {
                l.limiter().available()
            }),
            Core::AdaptivePercentile(l) => {
                decide_local(&**l, self.policy_of(), cost, max_wait, || {
                    l.limiter().available()
                })
            }
            Core::Priority(p, lowest) => {
                // The key is the class header's value ("" without one).
                let named = match &self.0.spec.algorithm {
                    Algorithm::Priority { classes, .. } => {
                        classes.iter().position(|(name, _)| name == key)
                    }
                    _ => None,
                };
                let class = named.and_then(|i| p.class(i).ok());
                let view = class.as_ref().unwrap_or(lowest);
                let index = view.class();
                decide_local(view, self.policy_of(), cost, max_wait, || {
                    p.available(index).unwrap_or(0)
                })
            }
            Core::Redis { .. } => return None,
        })
    }

    fn policy_of(&self) -> Policy {
        match &self.0.live.core {
            Core::Gcra(l) => l.quota().into(),
            Core::Keyed(k) => k.quota().into(),
            Core::AdaptiveEwma(l) => l.limiter().quota().into(),
            Core::AdaptivePercentile(l) => l.limiter().quota().into(),
            Core::Priority(p, _) => p.quota().into(),
            Core::Redis { limiter, .. } => limiter.quota().into(),
            Core::SlidingWindow(l) => Policy {
                limit: l.limit(),
                window: l.window(),
            },
            Core::WarmUp(_) => match self.0.spec.algorithm {
                Algorithm::WarmUp { quota, .. } => quota.into(),
                _ => Policy {
                    limit: 1,
                    window: Duration::from_secs(1),
                },
            },
        }
    }
}

impl<C: RuleClock> Backend for RuleBackend<C> {
    type Key = String;
    type Ticket = RuleTicket;

    async fn decide(
        &self,
        key: &String,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<RuleTicket>, Denial> {
        if let Some(decision) = self.decide_sync(key, cost, max_wait) {
            return decision;
        }
        let Core::Redis { http, keyed, .. } = &self.0.live.core else {
            unreachable!("every other core decides synchronously")
        };
        // limiter-tower's RedisBackend: its exact reset from the script's
        // `reset_after`, its injective Redis keys.
        let global = String::from("global");
        let redis_key = if *keyed { key } else { &global };
        http.decide(redis_key, cost, max_wait).await.map(|g| Grant {
            ticket: RuleTicket { reservation: None },
            wait: g.wait,
            remaining: g.remaining,
            reset: g.reset,
        })
    }

    fn decide_now(
        &self,
        key: &String,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<RuleTicket>, Denial>> {
        self.decide_sync(key, cost, max_wait)
    }

    fn cancel(&self, key: &String, ticket: RuleTicket) -> bool {
        let Some(reservation) = ticket.reservation else {
            // Redis refunds nothing.
            return false;
        };
        match &self.0.live.core {
            Core::Keyed(k) => k.limiter(key).is_ok_and(|l| l.as_ref().cancel(reservation)),
            _ => self.0.live.local().is_some_and(|l| l.cancel(reservation)),
        }
    }

    fn policy(&self, _key: &String) -> Policy {
        self.policy_of()
    }
}

/// The key extractor of a rule.
#[derive(Debug, Clone)]
pub(crate) struct RuleKey {
    parts: Vec<Part>,
    /// The rule's match path, the key of `route` without axum's
    /// `MatchedPath`.
    route: Option<String>,
}

#[derive(Debug, Clone)]
enum Part {
    Peer(PeerIp),
    Client(ClientIp),
    Route,
    Header(HeaderName),
    /// A priority class's name: the header's value, "" without it.
    Class(HeaderName),
}

impl RuleKey {
    pub(crate) fn new(
        parts: &[KeyPart],
        trusted: &[ipnet::IpNet],
        matcher: Option<&MatchSpec>,
        class_header: Option<&HeaderName>,
    ) -> RuleKey {
        let mut parts: Vec<Part> = parts
            .iter()
            .map(|p| match p {
                KeyPart::Ip if trusted.is_empty() => Part::Peer(PeerIp::new()),
                KeyPart::Ip => Part::Client(ClientIp::x_forwarded_for(trusted.iter().copied())),
                KeyPart::Route => Part::Route,
                KeyPart::Header(h) => Part::Header(h.clone()),
            })
            .collect();
        parts.extend(class_header.cloned().map(Part::Class));
        let route = matcher.map(|m| match &m.path {
            PathMatch::Route(r) | PathMatch::Prefix(r) => r.clone(),
        });
        RuleKey { parts, route }
    }
}

fn escape_into(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b' '..=b'~' => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
}

impl KeyExtractor for RuleKey {
    type Key = String;

    fn extract(&self, request: &RequestHead<'_>) -> Result<String, KeyError> {
        let mut key = String::new();
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                key.push('\u{1f}');
            }
            match part {
                Part::Peer(p) => key.push_str(&p.extract(request)?.to_string()),
                Part::Client(c) => key.push_str(&c.extract(request)?.to_string()),
                Part::Route => {
                    // axum's matched route template (through limiter-tower's
                    // `Route`, under its `axum` feature), else the rule's own
                    // match path.
                    #[cfg(feature = "axum")]
                    let matched = limiter_tower::Route.extract(request)?;
                    #[cfg(feature = "axum")]
                    let matched =
                        (&*matched != limiter_tower::Route::UNMATCHED).then_some(&*matched);
                    #[cfg(not(feature = "axum"))]
                    let matched: Option<&str> = None;
                    let route = matched.or(self.route.as_deref()).unwrap_or("<unmatched>");
                    escape_into(&mut key, route.as_bytes());
                }
                Part::Class(name) => {
                    if let Some(value) = request.headers().get(name) {
                        escape_into(&mut key, value.as_bytes());
                    }
                }
                Part::Header(name) => {
                    let value = request
                        .headers()
                        .get(name)
                        .ok_or_else(|| KeyError::MissingHeader { name: name.clone() })?;
                    escape_into(&mut key, value.as_bytes());
                }
            }
        }
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::Live;
    use limiter_core::ManualClock;
    use limiter_rules::Format;

    fn backend(yaml: &str, clock: &ManualClock) -> RuleBackend<ManualClock> {
        let spec = crate::check_str("t.yaml".as_ref(), yaml, Format::Yaml)
            .unwrap()
            .remove(0);
        let live = Arc::new(Live::build(&spec, clock, None).unwrap());
        RuleBackend(Arc::new(RuleLimiter { spec, live }))
    }

    #[test]
    fn gcra_grants_report_the_headroom_of_their_own_decision() {
        let clock = ManualClock::new();
        let rule = "rate_limits:\n  r:\n    algorithm: token_bucket\n    rate: 10\n    burst: 3\n";
        for yaml in [rule.to_owned(), format!("{rule}    key: ip\n")] {
            let b = backend(&yaml, &clock);
            let key = "1.2.3.4".to_owned();
            let g = b.decide_now(&key, 1, Duration::ZERO).unwrap().unwrap();
            assert_eq!((g.remaining, g.reset), (2, Duration::from_millis(100)));
            // Half an emission interval later, one more grant: one permit
            // left, the next in 50 ms (not a whole period).
            clock.advance(Duration::from_millis(50));
            let g = b.decide_now(&key, 1, Duration::ZERO).unwrap().unwrap();
            assert_eq!((g.remaining, g.reset), (1, Duration::from_millis(50)));
            let held = b
                .decide_now(&key, 2, Duration::from_secs(1))
                .unwrap()
                .unwrap();
            assert_eq!(held.wait, Duration::from_millis(50));
            assert!(b.cancel(&key, held.ticket));
            clock.advance(Duration::from_secs(1));
        }
    }

    #[test]
    fn composite_keys_do_not_collide() {
        let key = RuleKey::new(
            &[
                KeyPart::Header(HeaderName::from_static("x-a")),
                KeyPart::Header(HeaderName::from_static("x-b")),
            ],
            &[],
            None,
            None,
        );
        let k = |a: &[u8], b: &[u8]| {
            let req = http::Request::builder()
                .header("x-a", http::HeaderValue::from_bytes(a).unwrap())
                .header("x-b", http::HeaderValue::from_bytes(b).unwrap())
                .body(())
                .unwrap();
            key.extract(&RequestHead::of(&req)).unwrap()
        };
        assert_ne!(k(b"a:b", b"c"), k(b"a", b"b:c"));
        assert_ne!(k(b"\\x41", b""), k(b"A", b""));
        assert_ne!(k(b"\xff", b""), k(b"\\xff", b""));
        assert_eq!(k(b"u1", b"p"), "u1\u{1f}p");
    }
}
