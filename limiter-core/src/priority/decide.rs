//! [`Decide`] for [`PriorityLimiter`] (keyed by the class) and for
//! [`PriorityClass`]: the decision within the class's share of the burst.

use core::time::Duration;

use super::{PriorityClass, PriorityLimiter};
use crate::clock::Clock;
use crate::decision::{Decide, Denial, Grant};
use crate::gcra::Params;
use crate::quota::saturating_nanos;
use crate::reservation::Reservation;

/// Keyed by the class: exact headroom within the class's share of the
/// burst, from the word the decision wrote; the policy of a class is its
/// share of the burst at the quota's interval. A class past the last is
/// refused as [`Denial::Unavailable`].
impl<C: Clock> Decide for PriorityLimiter<C> {
    type Key = usize;
    type Ticket = Reservation;

    fn decide(
        &self,
        class: &usize,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let class = *class;
        let share = match self.share(class, cost) {
            Ok(share) => share,
            Err(error) => return Err(Denial::Unavailable(alloc::boxed::Box::new(error))),
        };
        let max_wait = if class == 0 {
            saturating_nanos(max_wait)
        } else {
            0
        };
        let now = self.limiter.clock().now();
        let usable = |p: Params| share.usable(p.burst);
        let class_policy = |p: Params| {
            Params {
                t: p.t,
                burst: usable(p),
            }
            .policy()
        };
        match self
            .limiter
            .reserve_with_headroom_at(now, cost, max_wait, usable)
        {
            Ok((ticket, headroom, params)) => Ok(Grant {
                wait: ticket.wait(),
                ticket,
                headroom,
                policy: class_policy(params),
            }),
            Err((error, params)) => Err(Denial::refused(error, class_policy(params))),
        }
    }

    fn cancel(&self, _class: &usize, ticket: Reservation) -> bool {
        PriorityLimiter::cancel(self, ticket)
    }
}

/// As [`PriorityLimiter`]'s `Decide` for this view's class.
impl<C: Clock> Decide for PriorityClass<C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        _key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        self.limiter.decide(&self.class, cost, max_wait)
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        PriorityLimiter::cancel(&self.limiter, ticket)
    }
}
