//! [`RedisLimiter`] as an [`AsyncDecide`]r keyed by `str`: the decision is
//! [`RedisLimiter::reserve_n`], and the grant's [`Headroom`] comes from the
//! script's reply for that decision (its `remaining`, and the time until
//! one more permit derived from its time until full).
//!
//! # Cancel
//!
//! A Redis grant cannot be given back (the script has no refund, see
//! `docs/distributed.md`): [`AsyncDecide::cancel`] returns `false`, and the
//! ticket is `()`.
//!
//! # Failure
//!
//! The limiter's own [`WhenDown`](crate::WhenDown) answers first:
//! `Local` and `Open` grant, `Closed` denies ([`Denial::RateLimited`] with
//! the breaker's wait). Under `WhenDown::Error` an unavailability
//! (timeout, refused connection, open breaker) is [`Denial::Unavailable`].

use core::time::Duration;

use limiter_async::AsyncDecide;
use limiter_core::{Denial, Grant, Headroom, Policy, Unavailable, debt::Debt};

use crate::admission::Admission;
use crate::error::RedisLimitError;
use crate::limiter::RedisLimiter;

/// The denial of `e` by a limit decided under `policy`.
pub(crate) fn denial(e: RedisLimitError, policy: Policy) -> Denial {
    match e {
        RedisLimitError::RateLimited { retry_after, .. } => Denial::RateLimited {
            retry_after,
            policy,
        },
        RedisLimitError::InsufficientCapacity { requested, burst } => Denial::OverBurst {
            cost: requested,
            burst,
            policy,
        },
        other => Denial::Unavailable(Box::new(other)),
    }
}

impl RedisLimiter {
    /// The grant of `admission`: its `remaining`, and the time until one
    /// more permit, from the time until full (`reset_after`) when the
    /// script knows it: full at `reset_after`, one permit every `t` before
    /// it, so the next of the `missing` ones comes `(missing − 1)·t` earlier.
    /// Zero when unknown (a lease, fail-open) or when nothing is missing.
    pub(crate) fn grant(&self, admission: Admission) -> Grant<()> {
        let quota = self.quota();
        let missing = quota.burst().saturating_sub(admission.remaining);
        let refill_in = if admission.reset_after.is_zero() || missing == 0 {
            Duration::ZERO
        } else {
            admission
                .reset_after
                .saturating_sub(quota.period().saturating_mul(missing - 1))
        };
        Grant {
            ticket: (),
            wait: admission.wait,
            headroom: Headroom {
                remaining: admission.remaining,
                refill_in,
            },
            policy: quota.into(),
        }
    }
}

/// Keys are the strings the limiter is asked about (it adds its prefix and
/// hash tag); the policy is the limiter's quota.
///
/// # Cancel safety
///
/// As [`RedisLimiter::reserve_n`]: a future dropped during the call may or
/// may not have consumed its slot on Redis.
impl AsyncDecide for RedisLimiter {
    type Key = str;
    type Ticket = ();

    fn cancel(&self, _key: &str, _ticket: ()) -> bool {
        false
    }

    async fn decide_async(
        &self,
        key: &str,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<()>, Denial> {
        match self.reserve_n(key, cost, max_wait).await {
            Ok(admission) => Ok(self.grant(admission)),
            Err(e) => Err(denial(e, self.quota().into())),
        }
    }

    /// [`RedisLimiter::charge_after`]: one call of the debt script.
    async fn charge_after_async(
        &self,
        key: &str,
        permits: u64,
        cap: Duration,
    ) -> Result<Debt, Unavailable> {
        self.charge_after(key, permits, cap)
            .await
            .map_err(|e| Box::new(e) as Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Source;

    #[test]
    fn denials_keep_their_meaning() {
        let policy = Policy {
            burst: 2,
            interval: Duration::from_millis(500),
        };
        let limited = RedisLimitError::RateLimited {
            retry_after: Duration::from_millis(7),
            reset_after: Duration::ZERO,
            remaining: 0,
            source: Source::Redis,
        };
        assert_eq!(
            denial(limited, policy).retry_after(),
            Some(Duration::from_millis(7))
        );
        let over = RedisLimitError::InsufficientCapacity {
            requested: 5,
            burst: 2,
        };
        assert!(matches!(
            denial(over, policy),
            Denial::OverBurst { cost: 5, burst: 2, policy: p } if p == policy
        ));
        let down = RedisLimitError::Timeout {
            after: Duration::from_millis(50),
        };
        assert!(matches!(denial(down, policy), Denial::Unavailable(_)));
    }
}
