//! [`KeyedLimiter`] as a [`Decide`]r keyed by `K`: each key's decision is
//! [`KeyedLimiter::reserve_n_with_headroom`], so the headroom comes from the
//! word that key's CAS wrote, and the policy is the quota that key's entry
//! was decided under (its override, or the shared one), read from the same
//! entry: no second lookup of the key.
//!
//! A full key table ([`KeyedError::TooManyKeys`]) is a
//! [`Denial::Unavailable`]: the limiter could not decide, as opposed to a
//! decision against the key.

use core::hash::Hash;
use core::time::Duration;

use limiter_core::{Clock, Decide, Denial, Grant, Policy, Reservation};

use crate::error::KeyedError;
use crate::limiter::KeyedLimiter;

/// The denial of a key decided under `policy`: a refusal by the limit
/// carries it, a full key table is [`Denial::Unavailable`].
fn denial(e: KeyedError, policy: Policy) -> Denial {
    match e {
        KeyedError::Limited(e) => Denial::refused(e, policy),
        other => Denial::Unavailable(Box::new(other)),
    }
}

/// Exact headroom per key (see the module docs); the policy is the quota
/// the key's own decision ran under, read from its entry.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{Decide, Headroom, ManualClock, Quota};
/// use limiter_keyed::KeyedLimiter;
///
/// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(3)?)
///     .clock(ManualClock::new())
///     .build()?;
/// let grant = limiter.decide(&"alice", 1, Duration::ZERO)?;
/// assert_eq!(grant.headroom, Headroom { remaining: 2, refill_in: Duration::from_millis(100) });
/// assert_eq!(grant.policy.burst, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<K, C> Decide for KeyedLimiter<K, C>
where
    K: Hash + Eq + Clone + Send + Sync,
    C: Clock,
{
    type Key = K;
    type Ticket = Reservation;

    #[inline]
    fn decide(&self, key: &K, cost: u32, max_wait: Duration) -> Result<Grant<Reservation>, Denial> {
        match self.decide_with_policy(key, cost, max_wait) {
            Ok((ticket, headroom, policy)) => Ok(Grant {
                wait: ticket.wait(),
                ticket,
                headroom,
                policy,
            }),
            Err((error, policy)) => Err(denial(error, policy)),
        }
    }

    fn cancel(&self, key: &K, ticket: Reservation) -> bool {
        KeyedLimiter::cancel(self, key, ticket)
    }

    /// [`ChargeKeyAfter::charge_key_after`](crate::ChargeKeyAfter::charge_key_after):
    /// the key's own quota.
    fn charge_after(&self, key: &K, permits: u64, cap: Duration) -> limiter_core::debt::Debt {
        crate::ChargeKeyAfter::charge_key_after(self, key, permits, cap)
    }
}
