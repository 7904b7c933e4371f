//! Deciders made of deciders: a pointer to one (`&D`, `Arc<D>`) is that
//! decider, and a pair `(A, B)` decides both limits, all or nothing.

use core::time::Duration;

use super::{Decide, Denial, Grant};
use crate::debt::Debt;
use crate::error::AcquireError;
use crate::reservation::Headroom;

/// A pointer to a decider is that decider: `&D`, `Arc<D>`.
macro_rules! forward_decide {
    ($($pointer:ty),*) => {$(
        impl<D: Decide + ?Sized> Decide for $pointer {
            type Key = D::Key;
            type Ticket = D::Ticket;
            #[inline]
            fn decide(
                &self,
                key: &D::Key,
                cost: u32,
                max_wait: Duration,
            ) -> Result<Grant<D::Ticket>, Denial> {
                (**self).decide(key, cost, max_wait)
            }
            fn cancel(&self, key: &D::Key, ticket: D::Ticket) -> bool {
                (**self).cancel(key, ticket)
            }
            #[inline]
            fn acquire_now(&self, key: &D::Key, cost: u32) -> Result<(), AcquireError> {
                (**self).acquire_now(key, cost)
            }
            #[inline]
            fn charge_after(&self, key: &D::Key, permits: u64, cap: Duration) -> Debt {
                (**self).charge_after(key, permits, cap)
            }
        }
    )*};
}

forward_decide!(&D, alloc::sync::Arc<D>);

/// Two limits at once, all or nothing: `A` decided per key (say, per
/// user), `B` once for all (say, global). A grant waits for the later of
/// the two slots and reports the headroom of the part with fewer permits
/// left (on a tie, the one that refills later) and the policy with the
/// slower steady rate; a denial of either gives the other's permits back
/// and carries the denying part's policy.
impl<A, B> Decide for (A, B)
where
    A: Decide,
    B: Decide<Key = ()>,
{
    type Key = A::Key;
    type Ticket = (A::Ticket, B::Ticket);

    fn decide(
        &self,
        key: &A::Key,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Self::Ticket>, Denial> {
        let a = self.0.decide(key, cost, max_wait)?;
        let b = match self.1.decide(&(), cost, max_wait) {
            Ok(b) => b,
            Err(denial) => {
                self.0.cancel(key, a.ticket);
                return Err(denial);
            }
        };
        let tighter = |x: Headroom, y: Headroom| {
            (x.remaining, core::cmp::Reverse(x.refill_in))
                <= (y.remaining, core::cmp::Reverse(y.refill_in))
        };
        let headroom = if tighter(a.headroom, b.headroom) {
            a.headroom
        } else {
            b.headroom
        };
        let policy = if a.policy.interval >= b.policy.interval {
            a.policy
        } else {
            b.policy
        };
        Ok(Grant {
            wait: a.wait.max(b.wait),
            ticket: (a.ticket, b.ticket),
            headroom,
            policy,
        })
    }

    /// Cancels `B`'s part first, then `A`'s; whether both are back.
    fn cancel(&self, key: &A::Key, (a, b): Self::Ticket) -> bool {
        let b = self.1.cancel(&(), b);
        let a = self.0.cancel(key, a);
        a && b
    }

    /// Charges both parts; the debt reported is the smaller charge (what
    /// both carry), the rest counted as dropped.
    fn charge_after(&self, key: &A::Key, permits: u64, cap: Duration) -> Debt {
        let a = self.0.charge_after(key, permits, cap);
        let b = self.1.charge_after(&(), permits, cap);
        let charged = a.charged.min(b.charged);
        Debt {
            charged,
            dropped: permits - charged,
        }
    }
}
