//! `RuleBackend`: a rule's limiter as a `limiter-tower` backend (an
//! `AsyncDecide`), whatever its algorithm or store, keyed by the rule's
//! encoded key (`crate::key`).
//!
//! GCRA rules, global or keyed (`limiter-keyed`'s `KeyedLimiter`), decide
//! with the headroom of their own decision; Redis rules go through
//! limiter-tower's `RedisBackend`.

use crate::RuleClock;
use std::sync::Arc;
use std::time::Duration;

use limiter_async::AsyncDecide;
use limiter_core::{Decider, Denial, Grant, Headroom, Limiter, Policy, Quota, Reservation};

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

/// The grant of a GCRA decision with the headroom its own state word left.
fn exact_grant((reservation, left): (Reservation, Headroom)) -> Grant<RuleTicket> {
    Grant {
        wait: reservation.wait(),
        ticket: RuleTicket {
            reservation: Some(reservation),
        },
        headroom: left,
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
        headroom: Headroom {
            remaining,
            refill_in: reset,
        },
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
    let period = policy.interval;
    let quota = Quota::with_period(period.max(Duration::from_nanos(1)))
        .and_then(|q| q.with_burst(policy.burst.max(1)))
        .unwrap_or_else(|_| Quota::from_nanos(1, 1).expect("1 ns, burst 1 is valid"));
    Ok(grant(reservation, quota, available()))
}

impl<C: RuleClock> RuleBackend<C> {
    fn decide_sync(
        &self,
        key: &RuleKeyText,
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
            Core::Keyed(k) => k
                .reserve_n_with_headroom(key, cost, max_wait)
                .map(exact_grant)
                .map_err(Denial::from),
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
                        classes.iter().position(|(name, _)| encodes(key, name))
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
                burst: l.limit(),
                interval: l.window() / l.limit().max(1),
            },
            Core::WarmUp(_) => match self.0.spec.algorithm {
                Algorithm::WarmUp { quota, .. } => quota.into(),
                _ => Policy {
                    burst: 1,
                    interval: Duration::from_secs(1),
                },
            },
        }
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
            Core::Keyed(k) => k.cancel(key, reservation),
            _ => self.0.live.local().is_some_and(|l| l.cancel(reservation)),
        }
    }

    fn policy(&self, key: &RuleKeyText) -> Policy {
        match &self.0.live.core {
            Core::Keyed(k) => k.quota_of(key).into(),
            _ => self.policy_of(),
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
        let Core::Redis { http, keyed, .. } = &self.0.live.core else {
            unreachable!("every other core decides synchronously")
        };
        // limiter-tower's RedisBackend: its exact reset from the script's
        // `reset_after`, its injective Redis keys.
        let redis_key = if *keyed { &**key } else { "global" };
        http.decide_async(&String::from(redis_key), cost, max_wait)
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
}
