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
//! once, here as in the library path).

use crate::RuleClock;
use std::sync::Arc;
use std::time::Duration;

use limiter_async::AsyncDecide;
use limiter_core::{Decide, Decider, Denial, Grant, Policy, Reservation};

use crate::key::{RuleKeyText, encodes};
use crate::limiter::RuleLimiter;
use crate::live::Core;
use limiter_rules::Algorithm;

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
            Core::Gcra(l) => l.decide(&(), cost, max_wait),
            Core::Keyed(k) => k.decide(key, cost, max_wait),
            Core::SlidingWindow(l) => l.decide(&(), cost, max_wait),
            Core::WarmUp(l) => l.decide(&(), cost, max_wait),
            Core::AdaptiveEwma(l) => l.decide(&(), cost, max_wait),
            Core::AdaptivePercentile(l) => l.decide(&(), cost, max_wait),
            Core::Priority(p, _) => p.decide(&self.class_of(key), cost, max_wait),
            Core::Redis { .. } => return None,
        }))
    }

    /// A priority rule's class for `key` (the class header's encoded
    /// value): the class it names, else the lowest.
    fn class_of(&self, key: &RuleKeyText) -> usize {
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

impl<C: RuleClock> Decider for RuleBackend<C> {
    type Key = RuleKeyText;
    type Ticket = RuleTicket;

    fn cancel(&self, key: &RuleKeyText, ticket: RuleTicket) -> bool {
        let Some(reservation) = ticket.reservation else {
            // Redis refunds nothing.
            return false;
        };
        match &self.0.live.core {
            Core::Gcra(l) => Decider::cancel(&**l, &(), reservation),
            Core::Keyed(k) => Decider::cancel(&**k, key, reservation),
            Core::SlidingWindow(l) => Decider::cancel(&**l, &(), reservation),
            Core::WarmUp(l) => Decider::cancel(&**l, &(), reservation),
            Core::AdaptiveEwma(l) => Decider::cancel(&**l, &(), reservation),
            Core::AdaptivePercentile(l) => Decider::cancel(&**l, &(), reservation),
            Core::Priority(p, _) => Decider::cancel(&**p, &self.class_of(key), reservation),
            Core::Redis { .. } => false,
        }
    }

    fn policy(&self, key: &RuleKeyText) -> Policy {
        match &self.0.live.core {
            Core::Gcra(l) => l.policy(&()),
            Core::Keyed(k) => k.policy(key),
            Core::SlidingWindow(l) => l.policy(&()),
            Core::WarmUp(l) => l.policy(&()),
            Core::AdaptiveEwma(l) => l.policy(&()),
            Core::AdaptivePercentile(l) => l.policy(&()),
            Core::Priority(p, _) => p.policy(&self.class_of(key)),
            Core::Redis { limiter, .. } => limiter.quota().into(),
        }
    }
}

impl<C: RuleClock> AsyncDecide for RuleBackend<C> {
    async fn decide_async(
        &self,
        key: &RuleKeyText,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<RuleTicket>, Denial> {
        if let Some(decision) = self.decide_sync(key, cost, max_wait) {
            return decision;
        }
        let Core::Redis { limiter, keyed } = &self.0.live.core else {
            unreachable!("every other core decides synchronously")
        };
        // The key is written once, by the one key encoding (`crate::key`),
        // as the library path writes it: injective, and free of hash tags.
        let redis_key = if *keyed {
            key.text()
        } else {
            std::borrow::Cow::Borrowed("global")
        };
        limiter
            .decide_async(&redis_key, cost, max_wait)
            .await
            .map(|g| g.map_ticket(|()| RuleTicket { reservation: None }))
    }

    fn decide_ready(
        &self,
        key: &RuleKeyText,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<RuleTicket>, Denial>> {
        self.decide_sync(key, cost, max_wait)
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
                    .map(|g| g.headroom)
                    .map_err(|d| d.retry_after());
                let direct = match &twin.0.live.core {
                    Core::SlidingWindow(l) => l.decide(&(), 1, Duration::ZERO),
                    Core::WarmUp(l) => l.decide(&(), 1, Duration::ZERO),
                    Core::AdaptiveEwma(l) => l.decide(&(), 1, Duration::ZERO),
                    _ => unreachable!("{body}"),
                }
                .map(|g| g.headroom)
                .map_err(|d| d.retry_after());
                assert_eq!(g, direct, "{body}");
                assert_eq!(b.policy(&key), twin.policy(&key), "{body}");
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
        assert_eq!(b.policy(&critical).burst, 4);
        assert_eq!(b.policy(&unknown).burst, 2); // the lowest class
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
