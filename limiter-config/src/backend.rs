//! `RuleBackend`: a rule's limiter as a `limiter-tower` backend (an
//! `AsyncDecide`), whatever its algorithm or store, keyed by the rule's
//! encoded key (`crate::key`).
//!
//! Every local rule decides through its limiter's own `Decide` (GCRA,
//! keyed GCRA on `limiter-keyed`'s `KeyedLimiter`, sliding window, warm-up,
//! adaptive, a priority class), so a grant's headroom, and the headers
//! made from it, come from the decision itself: no quota is built and no
//! second reading of the limiter is taken per request. Redis rules ask
//! their `RedisLimiter` about the encoded key as it is (it is encoded
//! once, here as in the library path). What the rule adds around each
//! decision (penalty box, calendar quota, strikes, top keys, shadow mode)
//! is `settle`.

use crate::RuleClock;
use std::sync::Arc;
use std::time::Duration;

use limiter_async::AsyncDecide;
use limiter_core::{Decide, Denial, Grant, Policy, Reservation, Unavailable, debt::Debt};

use crate::key::{RuleKeyText, encodes};
use crate::limiter::RuleLimiter;
use crate::live::Core;
use limiter_rules::Algorithm;

mod settle;

/// A rule's limiter as a `limiter-tower` backend (an [`AsyncDecide`]).
pub(crate) struct RuleBackend<C: RuleClock>(pub(crate) Arc<RuleLimiter<C>>);

impl<C: RuleClock> std::fmt::Debug for RuleBackend<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RuleBackend")
            .field(&self.0.spec.name)
            .finish()
    }
}

/// What a grant of a rule hands back: the reservation (none from Redis).
#[derive(Debug)]
pub(crate) struct RuleTicket {
    reservation: Option<Reservation>,
}

/// A grant of one of the rule's limiters, as the rule's.
fn ruled(decision: Result<Grant<Reservation>, Denial>) -> Result<Grant<RuleTicket>, Denial> {
    decision.map(|g| {
        g.map_ticket(|reservation| RuleTicket {
            reservation: Some(reservation),
        })
    })
}

impl<C: RuleClock> RuleBackend<C> {
    /// The rule's decision when it can be made at once: the penalty box,
    /// then the limiter's, settled by the rule (shadow, strikes, top
    /// keys); `None` for a Redis rule whose key is not in the box.
    fn decide_now(
        &self,
        key: &RuleKeyText,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<RuleTicket>, Denial>> {
        if let Some(left) = self.0.penalized(key) {
            let refusal = Denial::RateLimited {
                retry_after: left,
                policy: self.rate_policy(key),
            };
            return Some(self.0.settle(key, Err(refusal), true));
        }
        let decision = self.decide_sync(key, cost, max_wait)?;
        let decision = self.with_calendar(key, cost, decision);
        Some(self.0.settle(key, decision, false))
    }

    /// Every local rule decides through its limiter's own [`Decide`], so
    /// the headroom (and the headers) come from the decision itself; `None`
    /// for a Redis rule, which decides remotely.
    fn decide_sync(
        &self,
        key: &RuleKeyText,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<RuleTicket>, Denial>> {
        Some(ruled(match &self.0.live.core {
            Core::Local(l) => l.decide(&(), cost, max_wait),
            Core::Keyed(k) => k.decide(key, cost, max_wait),
            Core::Priority(p, _) => p.decide(&self.class_of(key), cost, max_wait),
            #[cfg(feature = "redis")]
            Core::Redis { .. } => return None,
            Core::Concurrency(_) => return None,
        }))
    }

    /// A priority rule's class for `key` (the class header's encoded
    /// value): the class it names, else the lowest.
    pub(crate) fn class_of(&self, key: &RuleKeyText) -> usize {
        let (Core::Priority(_, lowest), Algorithm::Priority { classes, .. }) =
            (&self.0.live.core, &self.0.spec.algorithm)
        else {
            return 0;
        };
        classes
            .iter()
            .position(|(name, _)| encodes(key, name))
            .unwrap_or_else(|| lowest.class())
    }
}

/// The policy `limiter` decides `key` under now: a zero-permit decision's,
/// which takes nothing; `otherwise` where it cannot decide.
fn standing_policy<D: Decide + ?Sized>(
    limiter: &D,
    key: &D::Key,
    otherwise: impl FnOnce() -> Policy,
) -> Policy {
    match limiter.decide(key, 0, Duration::ZERO) {
        Ok(grant) => grant.policy,
        Err(denial) => denial.policy().unwrap_or_else(otherwise),
    }
}

impl<C: RuleClock> RuleBackend<C> {
    /// Gives a grant's reservation back to the limiter that made it.
    fn cancel_ticket(&self, key: &RuleKeyText, ticket: RuleTicket) -> bool {
        let Some(reservation) = ticket.reservation else {
            // Redis refunds nothing.
            return false;
        };
        match &self.0.live.core {
            Core::Local(l) => Decide::cancel(&**l, &(), reservation),
            Core::Keyed(k) => Decide::cancel(&**k, key, reservation),
            Core::Priority(p, _) => Decide::cancel(&**p, &self.class_of(key), reservation),
            #[cfg(feature = "redis")]
            Core::Redis { .. } => false,
            Core::Concurrency(_) => false,
        }
    }

    /// The policy of the rule's rate as it stands (for `explain` and a
    /// penalty box's refusal; a decision carries its own).
    pub(crate) fn rate_policy(&self, key: &RuleKeyText) -> Policy {
        match &self.0.live.core {
            Core::Local(l) => standing_policy(&**l, &(), || Policy {
                // Only a clock past the limiter's span gets here.
                burst: 0,
                interval: Duration::MAX,
            }),
            Core::Keyed(k) => k.quota_of(key).into(),
            Core::Priority(p, _) => standing_policy(&**p, &self.class_of(key), || p.quota().into()),
            #[cfg(feature = "redis")]
            Core::Redis { limiter, .. } => limiter.quota().into(),
            // Never asked: a concurrency rule is routed to its own layer,
            // never to a RateLimitLayer. Its limit, with no refill.
            Core::Concurrency(l) => Policy {
                burst: l.limit(),
                interval: Duration::MAX,
            },
        }
    }
}

impl<C: RuleClock> AsyncDecide for RuleBackend<C> {
    type Key = RuleKeyText;
    type Ticket = RuleTicket;

    fn cancel(&self, key: &RuleKeyText, ticket: RuleTicket) -> bool {
        self.cancel_ticket(key, ticket)
    }

    async fn decide_async(
        &self,
        key: &RuleKeyText,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<RuleTicket>, Denial> {
        if let Some(decision) = self.decide_now(key, cost, max_wait) {
            return decision;
        }
        #[cfg(feature = "redis")]
        if let Some(decision) = self.decide_remote(key, cost, max_wait).await {
            return decision;
        }
        // A concurrency rule is routed to its own layer (`layer`), never to
        // a RateLimitLayer over this backend.
        unreachable!("every other core decides synchronously")
    }

    fn decide_ready(
        &self,
        key: &RuleKeyText,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<RuleTicket>, Denial>> {
        self.decide_now(key, cost, max_wait)
    }

    /// The cost after the response, charged to the rule's limiter in
    /// memory; `None` for a Redis rule, which charges by its debt script.
    /// A shadowed rule charges too: the debt is what enforcement would
    /// have charged, so its state stays what enforcement would show.
    fn charge_ready(&self, key: &RuleKeyText, permits: u64, cap: Duration) -> Option<Debt> {
        Some(match &self.0.live.core {
            Core::Local(l) => l.charge_after(&(), permits, cap),
            Core::Keyed(k) => k.charge_after(key, permits, cap),
            Core::Priority(p, _) => p.charge_after(&self.class_of(key), permits, cap),
            #[cfg(feature = "redis")]
            Core::Redis { .. } => return None,
            Core::Concurrency(_) => Debt {
                charged: 0,
                dropped: permits,
            },
        })
    }

    async fn charge_after_async(
        &self,
        key: &RuleKeyText,
        permits: u64,
        cap: Duration,
    ) -> Result<Debt, Unavailable> {
        if let Some(debt) = self.charge_ready(key, permits, cap) {
            return Ok(debt);
        }
        #[cfg(feature = "redis")]
        if let Core::Redis { limiter, keyed } = &self.0.live.core {
            // The Redis key of the decisions (see `decide_async`).
            let redis_key = if *keyed {
                key.text()
            } else {
                std::borrow::Cow::Borrowed("global")
            };
            return limiter
                .charge_after(&redis_key, permits, cap)
                .await
                .map_err(|e| Box::new(e) as Unavailable);
        }
        unreachable!("every other core charges synchronously")
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
        RuleBackend(Arc::new(RuleLimiter::new(spec, live, None)))
    }

    #[test]
    fn gcra_grants_report_the_headroom_of_their_own_decision() {
        let clock = ManualClock::new();
        let rule = "rate_limits:\n  r:\n    algorithm: token_bucket\n    rate: 10\n    burst: 3\n";
        for yaml in [rule.to_owned(), format!("{rule}    key: ip\n")] {
            let b = backend(&yaml, &clock);
            let key = crate::key::library_key("1.2.3.4");
            let g = b.decide_ready(&key, 1, Duration::ZERO).unwrap().unwrap();
            assert_eq!(
                (g.headroom.remaining, g.headroom.refill_in),
                (2, Duration::from_millis(100))
            );
            // Half an emission interval later, one more grant: one permit
            // left, the next in 50 ms (not a whole period).
            clock.advance(Duration::from_millis(50));
            let g = b.decide_ready(&key, 1, Duration::ZERO).unwrap().unwrap();
            assert_eq!(
                (g.headroom.remaining, g.headroom.refill_in),
                (1, Duration::from_millis(50))
            );
            let held = b
                .decide_ready(&key, 2, Duration::from_secs(1))
                .unwrap()
                .unwrap();
            assert_eq!(held.wait, Duration::from_millis(50));
            assert!(b.cancel(&key, held.ticket));
            clock.advance(Duration::from_secs(1));
        }
    }

    #[test]
    fn every_algorithm_reports_the_headroom_of_its_own_decision() {
        let rule = |body: &str| format!("rate_limits:\n  r:\n{body}");
        let cases = [
            "    algorithm: sliding_window\n    limit: 3\n    window: 3s\n",
            "    algorithm: warm_up\n    rate: 10\n    warm_up: 10s\n    cold_factor: 3\n",
            "    algorithm: adaptive\n    target_latency: 10ms\n    min_rate: 10\n    max_rate: 100\n    burst: 5\n",
        ];
        for body in cases {
            let clock = ManualClock::new();
            let b = backend(&rule(body), &clock);
            // A twin of the same rule, decided directly on its limiter.
            let twin = backend(&rule(body), &clock);
            let key = RuleKeyText::default();
            // Granted or refused alike, the same answer as the limiter's own.
            for _ in 0..4 {
                let g = b
                    .decide_ready(&key, 1, Duration::ZERO)
                    .unwrap()
                    .map(|g| (g.headroom, g.policy))
                    .map_err(|d| (d.retry_after(), d.policy()));
                let Core::Local(direct) = &twin.0.live.core else {
                    unreachable!("{body}")
                };
                let direct = direct
                    .decide(&(), 1, Duration::ZERO)
                    .map(|g| (g.headroom, g.policy))
                    .map_err(|d| (d.retry_after(), d.policy()));
                assert_eq!(g, direct, "{body}");
                assert_eq!(b.rate_policy(&key), twin.rate_policy(&key), "{body}");
                clock.advance(Duration::from_millis(100));
            }
        }
        // The sliding window's numbers: 3 per 3 s, two left after one.
        let clock = ManualClock::new();
        let b = backend(&rule(cases[0]), &clock);
        let key = RuleKeyText::default();
        let g = b.decide_ready(&key, 1, Duration::ZERO).unwrap().unwrap();
        assert_eq!(g.headroom.remaining, 2);
    }

    #[test]
    fn a_priority_rule_decides_in_the_class_its_header_names() {
        let clock = ManualClock::new();
        let b = backend(
            "rate_limits:\n  r:\n    algorithm: priority\n    rate: 1/h\n    burst: 4\n    classes: { critical: 1.0, batch: 0.5 }\n    class_header: x-priority\n",
            &clock,
        );
        let critical = crate::key::library_key("critical");
        let unknown = crate::key::library_key("root");
        assert_eq!(b.rate_policy(&critical).burst, 4);
        assert_eq!(b.rate_policy(&unknown).burst, 2); // the lowest class
        let g = b
            .decide_ready(&unknown, 1, Duration::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!(g.headroom.remaining, 1); // within batch's half
        let g = b
            .decide_ready(&critical, 1, Duration::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!(g.headroom.remaining, 2);
        assert!(b.cancel(&critical, g.ticket));
    }
}
