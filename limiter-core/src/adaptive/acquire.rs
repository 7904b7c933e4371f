//! Taking permits from an [`AdaptiveLimiter`]: the inner limiter's
//! decisions, each admission counted for the app-limited guard.

use core::time::Duration;

use super::{AdaptiveLimiter, RateController};
use crate::clock::Clock;
use crate::decision::{Decide, Denial, Grant};
use crate::error::AcquireError;
use crate::reservation::Reservation;

/// Taking permits; every admission counts toward the app-limited guard.
impl<P: RateController, C: Clock> AdaptiveLimiter<P, C> {
    /// Takes one permit now at the rate in force.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n`](crate::RateLimiter::try_acquire_n).
    #[inline]
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits now at the rate in force, all or nothing.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n`](crate::RateLimiter::try_acquire_n).
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.limiter.try_acquire_n(n)?;
        self.count(n);
        Ok(())
    }

    /// Claims the earliest slot for `n` permits within `max_wait`. A
    /// reservation counts as admitted when made, also if later cancelled
    /// (the demand was there).
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::reserve_n`](crate::RateLimiter::reserve_n).
    #[inline]
    pub fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        let reservation = self.limiter.reserve_n(n, max_wait)?;
        self.count(n);
        Ok(reservation)
    }

    /// Gives back a reservation as [`RateLimiter::cancel`](crate::RateLimiter::cancel) does.
    pub fn cancel(&self, reservation: Reservation) -> bool {
        self.limiter.cancel(reservation)
    }
}

/// Exact headroom under the rate in force, from the word the decision
/// wrote; the policy is the quota of that rate. Grants count as admitted,
/// as [`reserve_n`](AdaptiveLimiter::reserve_n)'s do.
impl<P: RateController, C: Clock> Decide for AdaptiveLimiter<P, C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        _key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let grant = self.limiter.decide(&(), cost, max_wait)?;
        self.count(cost);
        Ok(grant)
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        self.limiter.cancel(ticket)
    }

    #[inline]
    fn acquire_now(&self, _key: &(), cost: u32) -> Result<(), AcquireError> {
        self.try_acquire_n(cost)
    }
}
