//! Acquiring on a [`WarmUpLimiter`]: the CAS loop on the state word, the
//! headroom it leaves, cancellation, and the [`Decide`] seam.

use core::time::Duration;

use super::WarmUpLimiter;
use super::curve::pack;
use crate::clock::Clock;
use crate::decision::{Decide, Denial, Grant, Policy};
use crate::error::AcquireError;
use crate::quota::saturating_nanos;
use crate::reservation::{Headroom, Reservation, Undo};

impl<C: Clock> WarmUpLimiter<C> {
    /// Takes one permit if a request may proceed now.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](WarmUpLimiter::try_acquire_n).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let clock = ManualClock::new();
    /// // Stable interval 500 ms, cold 1.5 s, 8 stored permits when cold.
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), clock.clone())?;
    /// use limiter_core::AcquireError;
    /// limiter.try_acquire()?;
    /// let wait = Duration::from_millis(1375); // a cold permit
    /// assert_eq!(limiter.try_acquire(), Err(AcquireError::RateLimited { wait }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits if a request may proceed now; their cost delays the
    /// next request.
    ///
    /// # Errors
    ///
    /// [`AcquireError::RateLimited`] with the wait until a request may
    /// proceed (writes nothing); [`AcquireError::TimeOutOfRange`] for a clock
    /// reading past the limiter's range, or a cost that would end past it
    /// (see the module docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let clock = ManualClock::new();
    /// // Stable interval 500 ms, cold 1.5 s, 8 stored permits when cold.
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), clock.clone())?;
    /// limiter.try_acquire_n(3)?; // any n proceeds now; the cost delays the next
    /// assert_eq!(limiter.available(), 0);
    /// assert_eq!(limiter.stored_permits(), 5.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.reserve_n(n, Duration::ZERO).map(|_| ())
    }

    /// Claims the next slot for `n` permits if it comes within `max_wait`;
    /// fails at once, consuming nothing, otherwise. Slots are handed out in
    /// CAS order.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](WarmUpLimiter::try_acquire_n), with the wait
    /// compared to `max_wait`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let clock = ManualClock::new();
    /// // Stable interval 500 ms, cold 1.5 s, 8 stored permits when cold.
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), clock.clone())?;
    /// limiter.try_acquire()?;
    /// assert!(limiter.reserve_n(1, Duration::from_secs(1)).is_err()); // needs 1.375 s
    /// let r = limiter.reserve_n(1, Duration::from_secs(2))?;
    /// assert_eq!(r.wait(), Duration::from_millis(1375));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        self.reserve_with_word(n, max_wait).map(|(r, _)| r)
    }

    /// [`reserve_n`](WarmUpLimiter::reserve_n), with the [`Headroom`] read
    /// from the word its CAS wrote: 0 remaining and the time until the next
    /// request may proceed while one must wait; otherwise what
    /// [`available`](WarmUpLimiter::available) would say on that word, and
    /// no refill to wait for.
    fn reserve_with_headroom(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, Headroom), AcquireError> {
        let (reservation, (word, now, limit)) = self.reserve_with_word(n, max_wait)?;
        let (next_free, stored) = self.curve.refill(word, now);
        let headroom = if next_free > now {
            Headroom {
                remaining: 0,
                refill_in: Duration::from_nanos(next_free - now),
            }
        } else {
            Headroom {
                remaining: self.available_from(next_free, stored, limit),
                refill_in: Duration::ZERO,
            }
        };
        Ok((reservation, headroom))
    }

    /// The decision, with the word it left, its limiter time and the limit.
    #[inline]
    fn reserve_with_word(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, (u128, u64, u64)), AcquireError> {
        let clock_now = self.clock.now();
        let out_of_range = AcquireError::TimeOutOfRange { now: clock_now };
        let now = self.epoch.elapsed(clock_now);
        let limit = self.epoch.limit();
        if now > limit {
            return Err(out_of_range);
        }
        let max_wait = saturating_nanos(max_wait);
        let c = self.curve;
        self.state.update(|word| {
            let (next_free, stored) = c.refill(word, now);
            let wait = next_free - now;
            if wait > max_wait {
                return Err(AcquireError::RateLimited {
                    wait: Duration::from_nanos(wait),
                });
            }
            if n == 0 {
                let r = Reservation {
                    permits: 0,
                    ready_at: clock_now,
                    wait: 0,
                    owner: self.owner,
                    undo: Undo::Nothing,
                };
                return Ok((word, (r, (word, now, limit))));
            }
            let (after_free, left) = c.spend(next_free, stored, n);
            if after_free > limit {
                return Err(out_of_range);
            }
            let after = pack(after_free, left);
            let undo = Undo::WideWord {
                before: word,
                after,
            };
            Ok((
                after,
                (
                    Reservation {
                        permits: n,
                        // next_free ≤ limit (the state only holds times in
                        // range): converts back without overflow.
                        ready_at: self.epoch.to_clock(next_free),
                        wait,
                        owner: self.owner,
                        undo,
                    },
                    (after, now, limit),
                ),
            ))
        })
    }

    /// How many permits [`try_acquire_n`](WarmUpLimiter::try_acquire_n)
    /// could take now: exactly the largest `n` it would grant. Changes
    /// nothing.
    ///
    /// A request that may proceed takes any number of permits (their cost
    /// delays the next request), so this is 0 while a request must wait and
    /// otherwise the most permits whose cost still ends within the limiter's
    /// range (`u32::MAX` when all of them fit).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let clock = ManualClock::new();
    /// // Stable interval 500 ms, cold 1.5 s, 8 stored permits when cold.
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), clock.clone())?;
    /// assert!(limiter.available() > 1_000_000); // every n whose cost ends in range
    /// limiter.try_acquire()?;
    /// assert_eq!(limiter.available(), 0);
    /// clock.advance(Duration::from_millis(1375));
    /// assert!(limiter.available() > 1_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available(&self) -> u32 {
        let now = self.epoch.elapsed(self.clock.now());
        let limit = self.epoch.limit();
        if now > limit {
            return 0;
        }
        let (next_free, stored) = self.curve.refill(self.state.load(), now);
        if next_free > now {
            return 0;
        }
        self.available_from(next_free, stored, limit)
    }

    /// What [`available`](WarmUpLimiter::available) says of a state that may
    /// proceed now (`next_free ≤ now`) with `stored` permits.
    fn available_from(&self, next_free: u64, stored: f64, limit: u64) -> u32 {
        let fits = |n: u32| self.curve.spend(next_free, stored, n).0 <= limit;
        if fits(u32::MAX) {
            return u32::MAX;
        }
        // The cost only grows with n: the largest n that fits, by bisection
        // over [lo, hi) with fits(lo) and !fits(hi). fits(0): 0 costs nothing.
        let (mut lo, mut hi) = (0u32, u32::MAX);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Gives back a reservation if nothing has been decided since: the state
    /// is restored exactly as before it. Returns false for a reservation
    /// that another limiter issued.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let clock = ManualClock::new();
    /// // Stable interval 500 ms, cold 1.5 s, 8 stored permits when cold.
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), clock.clone())?;
    /// let r = limiter.reserve_n(1, Duration::MAX)?;
    /// assert!(limiter.cancel(r));
    /// assert_eq!(limiter.stored_permits(), 8.0); // as before it
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, reservation: Reservation) -> bool {
        if reservation.owner != self.owner {
            return false;
        }
        match reservation.undo {
            Undo::WideWord { before, after } => self.state.replace_if(after, before),
            _ => false,
        }
    }
}

/// Headroom from the word the decision wrote. The policy is one request at
/// a time at the stable interval: a request proceeds when the previous
/// one's cost has passed.
impl<C: Clock> Decide for WarmUpLimiter<C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        _key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let policy = Policy {
            burst: 1,
            // The stable interval is a whole number of ns (the quota's t).
            interval: Duration::from_nanos(self.curve.stable as u64),
        };
        match self.reserve_with_headroom(cost, max_wait) {
            Ok((ticket, headroom)) => Ok(Grant {
                wait: ticket.wait(),
                ticket,
                headroom,
                policy,
            }),
            Err(error) => Err(Denial::refused(error, policy)),
        }
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        WarmUpLimiter::cancel(self, ticket)
    }
}
