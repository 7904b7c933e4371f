//! The full decision every acquiring method shares: a load, the GCRA step
//! under the quota the word names, a CAS, a version check after it (a void
//! CAS is decided again), and for reservations a refund when one comes
//! sooner. Also [`Decide`] and [`ChargeAfter`] for [`RateLimiter`].

use core::time::Duration;

use super::{Ask, Decided, RateLimiter, acquire_error};
use crate::clock::Clock;
use crate::debt::{ChargeAfter, Debt, charge_in_chunks};
use crate::decision::{Decide, Denial, Grant};
use crate::error::AcquireError;
use crate::gcra::{self, Params};
use crate::quota::saturating_nanos;
use crate::quota_versions::tat;
use crate::reservation::{Headroom, Reservation, Undo};

impl<C: Clock> RateLimiter<C> {
    /// Claims the earliest slot for `n` permits and says how long to wait for
    /// it, if that is at most `max_wait`; otherwise fails at once and changes
    /// nothing. Slots are handed out in CAS order: first come, first served.
    /// A slot given back by a [`cancel`](RateLimiter::cancel) that came too
    /// late to restore the state is handed to the next reservation that
    /// would otherwise wait longer (see `cancel`).
    ///
    /// # Errors
    ///
    /// * [`AcquireError::InsufficientCapacity`] if `n > burst`.
    /// * [`AcquireError::RateLimited`] with the wait the slot would need, if
    ///   it exceeds `max_wait`. Nothing is written.
    /// * [`AcquireError::TimeOutOfRange`] if the clock, or the slot, lies
    ///   more than [`MAX_SPAN`](crate::clock::MAX_SPAN) past the limiter's creation.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// let first = limiter.reserve_n(1, Duration::ZERO).unwrap();
    /// let second = limiter.reserve_n(1, Duration::from_secs(1)).unwrap();
    /// assert_eq!(first.wait(), Duration::ZERO);
    /// assert_eq!(second.wait(), Duration::from_millis(100));
    /// assert!(limiter.cancel(second)); // the last one can be given back
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    #[inline]
    pub fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        let now = self.clock.now();
        self.reserve_at(Ask::Reserve, now, n, saturating_nanos(max_wait), |p| {
            p.burst
        })
    }

    /// As [`reserve_n`](RateLimiter::reserve_n), with the [`Headroom`] the
    /// decision left: the permits a caller right after it would get at once,
    /// and the time until one more. Both come from the state word this
    /// decision wrote, so concurrent callers cannot skew them (an HTTP
    /// layer's `RateLimit` header reports this decision, not a later look).
    /// A reservation served from a refunded slot (see
    /// [`cancel`](RateLimiter::cancel)) writes no word: it reports 0
    /// remaining and its wait plus one emission interval.
    ///
    /// # Errors
    ///
    /// As [`reserve_n`](RateLimiter::reserve_n).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{Headroom, ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(2)?, ManualClock::new());
    /// let (_, left) = limiter.reserve_n_with_headroom(2, Duration::ZERO)?;
    /// assert_eq!(left, Headroom { remaining: 0, refill_in: Duration::from_millis(100) });
    /// // A reservation 100 ms out: none left until 100 ms after its slot.
    /// let (r, left) = limiter.reserve_n_with_headroom(1, Duration::MAX)?;
    /// assert_eq!((r.wait(), left.remaining, left.refill_in), (Duration::from_millis(100), 0, Duration::from_millis(200)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    // Inlined: the grant is built where it is used, not moved through results.
    #[inline(always)]
    pub fn reserve_n_with_headroom(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, Headroom), AcquireError> {
        let now = self.clock.now();
        self.reserve_with_headroom_at(now, n, saturating_nanos(max_wait), |p| p.burst)
            .map(|(reservation, headroom, _)| (reservation, headroom))
            .map_err(|(error, _)| error)
    }

    /// [`reserve_n_with_headroom`](RateLimiter::reserve_n_with_headroom) at
    /// the clock reading `clock_now`, for a caller that may use
    /// `usable(params)` permits of the burst (the priority tiers): the
    /// headroom is then what is left within that share. Grant and refusal
    /// both come with the quota they were decided under.
    #[inline(always)]
    pub(crate) fn reserve_with_headroom_at(
        &self,
        clock_now: u64,
        n: u32,
        max_wait: u64,
        usable: impl Fn(Params) -> u32,
    ) -> Result<(Reservation, Headroom, Params), (AcquireError, Params)> {
        let (reservation, decided) =
            self.decide_at(Ask::Reserve, clock_now, n, max_wait, usable)?;
        Ok(match decided {
            Some(d) => {
                let (remaining, refill_in) =
                    gcra::headroom(d.tat, d.now, d.params, d.usable, self.epoch.limit());
                let headroom = Headroom {
                    remaining,
                    refill_in: Duration::from_nanos(refill_in),
                };
                (reservation, headroom, d.params)
            }
            None => {
                let params = Params::from(self.quota());
                let headroom = Headroom {
                    remaining: 0,
                    refill_in: reservation
                        .wait()
                        .saturating_add(Duration::from_nanos(params.t)),
                };
                (reservation, headroom, params)
            }
        })
    }

    /// The decision at the clock reading `clock_now`, shared by every
    /// acquiring method. `usable(params)` is how much of the quota's burst
    /// this caller may use (all of it, except for the lower priority tiers).
    /// A reservation (`Ask::Reserve`) records the quota-change count so
    /// `cancel` can check it, and may take a refund; a plain try skips both.
    #[inline]
    pub(crate) fn reserve_at(
        &self,
        ask: Ask,
        clock_now: u64,
        n: u32,
        max_wait: u64,
        usable: impl Fn(Params) -> u32,
    ) -> Result<Reservation, AcquireError> {
        // Inlined: the unused `Decided` and quota cost nothing.
        self.decide_at(ask, clock_now, n, max_wait, usable)
            .map(|(reservation, _)| reservation)
            .map_err(|(error, _)| error)
    }

    /// [`reserve_at`](RateLimiter::reserve_at), with what the decision wrote
    /// (`None` for a grant made of a refund, which writes no word), and a
    /// refusal with the quota that refused.
    #[inline]
    fn decide_at(
        &self,
        ask: Ask,
        mut clock_now: u64,
        n: u32,
        max_wait: u64,
        usable: impl Fn(Params) -> u32,
    ) -> Result<(Reservation, Option<Decided>), (AcquireError, Params)> {
        let cancellable = ask == Ask::Reserve;
        let limit = self.epoch.limit();
        // Whether the clock was read again after a refusal on a stale reading.
        let mut reread = false;
        loop {
            let now = self.epoch.elapsed(clock_now);
            let decided = self.state.update_retried(|word| {
                // Read before the decision: a later change moves the word and
                // fails our CAS.
                let changes = if cancellable { self.changes_made() } else { 0 };
                let read = self.read(word);
                let usable = usable(read.params);
                match gcra::reserve_within(tat(word), now, n, max_wait, read.params, usable, limit)
                {
                    Ok(grant) => {
                        #[cfg(all(test, not(loom)))]
                        super::tests::stall_before_cas();
                        // The word with its tat replaced, generation kept.
                        let after = (word ^ tat(word)) | grant.tat;
                        let slot = now + grant.wait;
                        let undo = if cancellable && n != 0 {
                            Undo::Word {
                                before: word,
                                after,
                                changes,
                            }
                        } else {
                            Undo::Nothing
                        };
                        let full = usable == read.params.burst;
                        let decided = Decided {
                            tat: grant.tat,
                            now,
                            params: read.params,
                            usable,
                        };
                        // n ≥ 1 always moves tat (t ≥ 1); n = 0 writes nothing.
                        Ok((
                            (n != 0).then_some(after),
                            (self.reservation(n, slot, now, undo), read, full, decided),
                        ))
                    }
                    Err(refusal) => Err((acquire_error(refusal, n, clock_now, usable), read)),
                }
            });
            match decided {
                // A zero-permit grant writes nothing: nothing to check.
                Ok((reservation, read, full, decided)) => {
                    if n != 0 && !self.unchanged_since(read) {
                        // The slot was rewritten under us (`quota_versions`,
                        // rule 2): void, keep its permits counted, decide again.
                        continue;
                    }
                    #[cfg(feature = "std")]
                    if cancellable && full && reservation.wait != 0 && self.refunds_pending() {
                        let fresh = reservation.undo;
                        let chosen = self.prefer_refund(reservation, now, max_wait);
                        let decided = (chosen.undo == fresh).then_some(decided);
                        return Ok((chosen, decided));
                    }
                    let _ = full;
                    return Ok((reservation, Some(decided)));
                }
                // Refused after a lost CAS on a reading older than the
                // winner's: read the clock once more, so contention alone
                // does not refuse what conforms now.
                Err(((AcquireError::RateLimited { .. }, _), true)) if !reread => {
                    clock_now = self.clock.now();
                    reread = true;
                }
                #[cfg(feature = "std")]
                Err(((AcquireError::RateLimited { wait }, read), _))
                    if cancellable
                        && usable(read.params) == read.params.burst
                        && self.refunds_pending() =>
                {
                    // Too far for `max_wait`; a refund may come sooner.
                    let fresh_slot = now.saturating_add(saturating_nanos(wait));
                    let changes = self.changes();
                    let mut guard = changes.lock.lock();
                    let made = changes.quotas.changes();
                    return match guard.refunds().take(
                        self.owner.get(),
                        now,
                        n,
                        max_wait,
                        fresh_slot,
                        &changes.pending,
                    ) {
                        Some(refund) => Ok((self.refunded(refund, now, made), None)),
                        None => Err((AcquireError::RateLimited { wait }, read.params)),
                    };
                }
                Err(((error, read), _)) => return Err((error, read.params)),
            }
        }
    }

    /// A reservation of this limiter for `n` permits at limiter time `slot`,
    /// decided at limiter time `now`.
    #[inline]
    pub(super) fn reservation(&self, n: u32, slot: u64, now: u64, undo: Undo) -> Reservation {
        Reservation {
            permits: n,
            // slot ≤ the new tat ≤ epoch.limit(): converts without overflow.
            ready_at: self.epoch.to_clock(slot),
            wait: slot - now,
            owner: self.owner,
            undo,
        }
    }
}

/// Exact headroom, from the word the decision's CAS wrote; the policy is
/// the quota that word names.
impl<C: Clock> Decide for RateLimiter<C> {
    type Key = ();
    type Ticket = Reservation;

    #[inline]
    fn decide(
        &self,
        _key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let now = self.clock.now();
        match self.reserve_with_headroom_at(now, cost, saturating_nanos(max_wait), |p| p.burst) {
            Ok((ticket, headroom, params)) => Ok(Grant {
                wait: ticket.wait(),
                ticket,
                headroom,
                policy: params.policy(),
            }),
            Err((error, params)) => Err(Denial::refused(error, params.policy())),
        }
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        RateLimiter::cancel(self, ticket)
    }

    /// The plain [`try_acquire_n`](RateLimiter::try_acquire_n).
    #[inline]
    fn acquire_now(&self, _key: &(), cost: u32) -> Result<(), AcquireError> {
        RateLimiter::try_acquire_n(self, cost)
    }

    /// [`ChargeAfter::charge_after`](crate::debt::ChargeAfter::charge_after).
    fn charge_after(&self, _key: &(), permits: u64, cap: Duration) -> crate::debt::Debt {
        crate::debt::ChargeAfter::charge_after(self, permits, cap)
    }
}

/// The charge after admission (`ChargeAfter`): reservations of this
/// limiter's own protocol, kept spent.
impl<C: Clock> ChargeAfter for RateLimiter<C> {
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{debt::ChargeAfter, debt::Debt, ManualClock, Quota, RateLimiter};
    ///
    /// // 10 per second, burst 5: t = 100 ms.
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(5)?, ManualClock::new());
    /// limiter.try_acquire()?; // admitted on its up-front cost of 1
    /// // The response says it cost 8 more: 4 come out of the burst, 4 are
    /// // debt, so the next permit is 400 ms + t away.
    /// let cap = Duration::from_secs(1);
    /// assert_eq!(limiter.charge_after(8, cap), Debt { charged: 8, dropped: 0 });
    /// assert_eq!(
    ///     limiter.try_acquire().unwrap_err().retry_after(),
    ///     Some(Duration::from_millis(500))
    /// );
    /// // A huge cost is held at the cap: the next permit is at most 1 s away.
    /// assert_eq!(limiter.charge_after(1_000, cap).charged, 5);
    /// assert_eq!(limiter.try_acquire().unwrap_err().retry_after(), Some(cap));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn charge_after(&self, permits: u64, cap: Duration) -> Debt {
        charge_in_chunks(permits, cap, self.quota(), |n, max_wait| {
            self.reserve_n(n, max_wait).map(drop)
        })
    }
}
