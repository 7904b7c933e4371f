//! What a rule adds around its limiter's decision: the penalty box before
//! it, the calendar `quota` after it (all or nothing: a calendar refusal
//! gives the rate's reservation back), then the refusal's strike, the top
//! keys and shadow mode (`RuleLimiter::settle`); and the same steps around
//! a Redis rule's remote decision.
//!
//! A shadowed rule's state is what enforcement would have left: a refusal
//! becomes a grant that charged nothing, a held grant goes at once with its
//! permits charged, each counted.

use crate::RuleClock;
use std::time::Duration;

use limiter_core::{Denial, Grant, Headroom, Policy};
use limiter_keyed::Strike;

use super::{RuleBackend, RuleTicket};
use crate::calendar::composite_headroom;
use crate::key::RuleKeyText;
use crate::limiter::RuleLimiter;
#[cfg(feature = "redis")]
use crate::live::Core;

impl<C: RuleClock> RuleLimiter<C> {
    /// How long a key in the penalty box stays in it, if it is in it now.
    pub(super) fn penalized(&self, key: &RuleKeyText) -> Option<Duration> {
        self.penalty.as_ref()?.blocked(key)
    }

    /// What the rule makes of its limiter's decision (or of the penalty
    /// box's refusal, `boxed`): refusals are recorded in the top keys and
    /// struck in the penalty box (a strike that blocks makes the refusal's
    /// wait the whole block); in shadow mode a refusal becomes a grant that
    /// charged nothing (counted), and a held grant goes at once, its
    /// permits charged (counted).
    pub(super) fn settle(
        &self,
        key: &RuleKeyText,
        decision: Result<Grant<RuleTicket>, Denial>,
        boxed: bool,
    ) -> Result<Grant<RuleTicket>, Denial> {
        let denial = match decision {
            Ok(mut grant) => {
                if self.spec.shadow && !grant.wait.is_zero() {
                    self.counters.shadow_delayed.increment(1);
                    grant.wait = Duration::ZERO;
                }
                return Ok(grant);
            }
            Err(d @ (Denial::RateLimited { .. } | Denial::OverBurst { .. })) => d,
            Err(other) => return Err(other),
        };
        if let Some(top) = self.live.top.get() {
            top.record(key, 1);
        }
        let denial = match (&self.penalty, denial) {
            (_, denial) if boxed => {
                self.counters.penalized.increment(1);
                denial
            }
            (
                Some(jail),
                Denial::RateLimited {
                    retry_after,
                    policy,
                },
            ) => match jail.strike(key) {
                Strike::Penalized { retry_after: block } => Denial::RateLimited {
                    retry_after: retry_after.max(block),
                    policy,
                },
                _ => Denial::RateLimited {
                    retry_after,
                    policy,
                },
            },
            (_, denial) => denial,
        };
        if !self.spec.shadow {
            return Err(denial);
        }
        self.counters.shadow_rejected.increment(1);
        // Only refusals by the limit get here, and each carries its policy.
        let policy = denial.policy().unwrap_or(Policy {
            burst: 0,
            interval: Duration::ZERO,
        });
        Ok(Grant {
            ticket: RuleTicket { reservation: None },
            wait: Duration::ZERO,
            headroom: Headroom {
                remaining: 0,
                refill_in: denial.retry_after().unwrap_or(Duration::ZERO),
            },
            policy,
        })
    }
}

impl<C: RuleClock> RuleBackend<C> {
    /// The composite with the rule's local calendar `quota` (see
    /// `calendar`): asked only after the rate admitted, and a calendar
    /// refusal gives the rate's reservation back, so a refusal by either
    /// charges nothing on the other.
    pub(super) fn with_calendar(
        &self,
        key: &RuleKeyText,
        cost: u32,
        decision: Result<Grant<RuleTicket>, Denial>,
    ) -> Result<Grant<RuleTicket>, Denial> {
        let Some(calendar) = &self.0.calendar else {
            return decision;
        };
        // The rate refused: the calendar was not asked; the denial states
        // the rate.
        let mut grant = decision?;
        match calendar.decide(key, cost) {
            Some(Ok(quota)) => {
                (grant.headroom, grant.policy) =
                    composite_headroom(calendar, (grant.headroom, grant.policy), &quota);
                Ok(grant)
            }
            Some(Err(denial)) => {
                // All or nothing: give the rate's permits back.
                self.cancel_ticket(key, grant.ticket);
                Err(denial)
            }
            // A Redis count beside a local rate cannot be built.
            None => Ok(grant),
        }
    }

    /// A Redis rule's decision: a spent calendar period refused before the
    /// rate is asked (a Redis rate refunds nothing), then the rate, then
    /// the period's count, settled by the rule; `None` for any other rule.
    #[cfg(feature = "redis")]
    pub(super) async fn decide_remote(
        &self,
        key: &RuleKeyText,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<RuleTicket>, Denial>> {
        use limiter_async::AsyncDecide;
        let Core::Redis { limiter, keyed } = &self.0.live.core else {
            return None;
        };
        // The key is written once, by the one key encoding
        // (`crate::key`), as the library path writes it: injective, and
        // free of hash tags.
        let redis_key = if *keyed {
            key.text()
        } else {
            std::borrow::Cow::Borrowed("global")
        };
        let calendar = self.0.calendar.as_deref();
        // A spent period is refused before the rate is asked (a Redis
        // rate refunds nothing): a read of the count, cost 0.
        if let Some(calendar) = calendar {
            match calendar.decide_remote(key, 0).await {
                Some(Ok(q)) if q.headroom.remaining < cost => {
                    let denial = Denial::RateLimited {
                        retry_after: q.headroom.refill_in,
                        policy: calendar.policy(),
                    };
                    return Some(self.0.settle(key, Err(denial), false));
                }
                Some(Err(denial)) => return Some(self.0.settle(key, Err(denial), false)),
                _ => {}
            }
        }
        let decision = limiter
            .decide_async(&redis_key, cost, max_wait)
            .await
            .map(|g| g.map_ticket(|()| RuleTicket { reservation: None }));
        let decision = match (calendar, decision) {
            (Some(calendar), Ok(mut grant)) => {
                match calendar.decide_remote(key, cost).await {
                    Some(Ok(quota)) => {
                        (grant.headroom, grant.policy) =
                            composite_headroom(calendar, (grant.headroom, grant.policy), &quota);
                        Ok(grant)
                    }
                    // Only a race for the period's last permits with
                    // another instance gets here.
                    Some(Err(denial)) => Err(denial),
                    None => Ok(grant),
                }
            }
            (_, decision) => decision,
        };
        Some(self.0.settle(key, decision, false))
    }
}
