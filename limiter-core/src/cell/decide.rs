//! Acquiring on a [`GcraCell`]: the CAS loop of one decision, its entry
//! points, and the [`Headroom`] a decision left.

use core::time::Duration;

use super::{CellClock, GcraCell, QuotaOf};
use crate::clock::Clock;
use crate::error::AcquireError;
use crate::gcra::{self, Refusal};
use crate::limiter::acquire_error;
use crate::quota::{MAX_SPAN, Quota, saturating_nanos};
use crate::reservation::{Headroom, Reservation, Undo};
use crate::sync::Ordering;

impl GcraCell {
    /// Takes `n` permits at `now` if all are available, all or nothing.
    /// `None` if the cell is retired (look the subject up again).
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n`](crate::RateLimiter::try_acquire_n).
    #[inline]
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// use limiter_core::AcquireError;
    /// assert_eq!(cell.try_acquire_n(quota, 0, 1), Some(Ok(())));
    /// let wait = Duration::from_millis(100);
    /// assert_eq!(cell.try_acquire_n(quota, 0, 1), Some(Err(AcquireError::RateLimited { wait })));
    /// cell.retire();
    /// assert_eq!(cell.try_acquire_n(quota, 0, 1), None); // look the subject up again
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_n(
        &self,
        quota: Quota,
        now: u64,
        n: u32,
    ) -> Option<Result<(), AcquireError>> {
        self.reserve_at(quota.into(), 0, || now, n, 0)
            .map(|(outcome, _)| outcome.map(|_| ()))
    }

    /// Claims the earliest slot for `n` permits at the time `clock` reads,
    /// if it comes within `max_wait`; `None` if the cell is retired. The
    /// clock's readings count as nanoseconds since the caller's epoch, and
    /// the reservation's [`ready_at`](Reservation::ready_at) is a reading
    /// of its clock (the epoch plus the slot).
    ///
    /// The clock is read once, and again after a CAS lost to another
    /// decision: that decision may have read the clock later than this one
    /// did, and deciding on its word with the earlier reading would refuse
    /// a request that conforms now, or report one permit too few left.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::reserve_n`](crate::RateLimiter::reserve_n), and
    /// [`AcquireError::TimeOutOfRange`] (with `now` as a clock reading) for
    /// a slot whose clock reading would pass `u64::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::CellClock, cell::GcraCell, ManualClock, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// let clock = ManualClock::starting_at(5_000_000_000);
    /// let on = CellClock { clock: &clock, origin: 5_000_000_000 }; // the caller's epoch
    /// cell.reserve_n_on(on, quota, 1, Duration::ZERO).unwrap()?;
    /// let r = cell.reserve_n_on(on, quota, 1, Duration::MAX).unwrap()?;
    /// assert_eq!(r.ready_at(), 5_100_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn reserve_n_on<'a, C: Clock + ?Sized>(
        &self,
        clock: CellClock<'_, C>,
        quota: impl Into<QuotaOf<'a>>,
        n: u32,
        max_wait: Duration,
    ) -> Option<Result<Reservation, AcquireError>> {
        self.reserve_at(
            quota.into(),
            clock.origin,
            || clock.now(),
            n,
            saturating_nanos(max_wait),
        )
        .map(|(outcome, _)| outcome)
    }

    /// The decision, with the time (since `origin`) it was made at: `now()`
    /// read once, and again after each CAS lost to another decision.
    ///
    /// The CAS loop of [`crate::state`], with two additions for a cell that
    /// follows a shared quota (see [`crate::follow`]): a word that cannot be
    /// decided on yet (the cell is moving, or has just been moved) is loaded
    /// again, and a successful CAS whose quota changed meanwhile is void.
    #[inline]
    pub(super) fn reserve_at(
        &self,
        quota: QuotaOf<'_>,
        origin: u64,
        read_clock: impl Fn() -> u64,
        n: u32,
        max_wait: u64,
    ) -> Option<(Result<Reservation, AcquireError>, u64)> {
        // The furthest slot whose clock reading `origin + slot` exists.
        let last_slot = u64::MAX - origin;
        let mut at = read_clock();
        // Acquire (every load and CAS of the word): a word written by a
        // move publishes the cell's quota record (`follow`). For a fixed
        // quota the word names no other data, and on x86 these cost nothing.
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            if current == Self::RETIRED {
                return None;
            }
            let Ok((params, stamp)) = quota.prepare(&self.word, current) else {
                current = self.word.load(Ordering::Acquire);
                continue;
            };
            let now = at;
            let refuse =
                |refusal| acquire_error(refusal, n, origin.saturating_add(now), params.burst);
            let grant = match gcra::reserve_within(
                current,
                now,
                n,
                max_wait,
                params,
                params.burst,
                MAX_SPAN,
            ) {
                Ok(grant) => grant,
                Err(refusal) => return Some((Err(refuse(refusal)), at)),
            };
            // now ≤ MAX_SPAN and wait ≤ tat ≤ MAX_SPAN: no overflow.
            let slot = now + grant.wait;
            if slot > last_slot {
                return Some((Err(refuse(Refusal::OutOfRange)), at));
            }
            let undo = if n == 0 {
                Undo::Nothing
            } else {
                Undo::Word {
                    before: current,
                    after: grant.tat,
                    changes: stamp.version,
                }
            };
            let reservation = Reservation {
                permits: n,
                ready_at: origin + slot,
                wait: grant.wait,
                owner: self.owner,
                undo,
            };
            if grant.tat == current {
                return Some((Ok(reservation), at));
            }
            #[cfg(all(test, not(loom)))]
            super::tests::stall_before_cas();
            match self.word.compare_exchange_weak(
                current,
                grant.tat,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) if quota.stands(stamp) => return Some((Ok(reservation), at)),
                // Void: the quota changed while we decided. Its permits stay
                // counted (stricter, never looser); decide again.
                Ok(_) => current = self.word.load(Ordering::Acquire),
                Err(actual) => {
                    // A CAS lost to another decision (not a spurious
                    // failure, which leaves the word as it was): that
                    // decision may have read the clock after us.
                    if actual != current {
                        at = read_clock();
                    }
                    current = actual;
                }
            }
        }
    }

    /// The [`Headroom`] that `reservation`, made by this cell under `quota`
    /// on a clock whose epoch is the reading `origin`, left: computed from the word the
    /// decision wrote (kept in the reservation) at the time it was decided
    /// (its `ready_at` less its wait), so a concurrent caller cannot skew it.
    /// `None` for a reservation of another cell. A reservation of 0 permits
    /// wrote nothing: its headroom is the cell's state now. One served from a
    /// refunded slot reports 0 remaining and its wait plus one emission
    /// interval.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::CellClock, cell::GcraCell, Headroom, ManualClock, Quota};
    ///
    /// let quota = Quota::per_second(10)?.with_burst(3)?; // t = 100 ms
    /// let (cell, clock) = (GcraCell::new(), ManualClock::new());
    /// let r = cell.reserve_n_on(CellClock { clock: &clock, origin: 0 }, quota, 1, Duration::ZERO).unwrap()?;
    /// let left = cell.headroom_of(&r, quota, 0);
    /// assert_eq!(left, Some(Headroom { remaining: 2, refill_in: Duration::from_millis(100) }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn headroom_of<'a>(
        &self,
        reservation: &Reservation,
        quota: impl Into<QuotaOf<'a>>,
        origin: u64,
    ) -> Option<Headroom> {
        if reservation.owner != self.owner {
            return None;
        }
        // The decision's time since `origin`: its slot less its wait.
        let now = reservation
            .ready_at
            .saturating_sub(origin)
            .saturating_sub(reservation.wait);
        // For a following cell, the quota its record holds (the one the
        // decision used, unless a change came right after it).
        let params = quota.into().params_now();
        let (remaining, refill_in) = match reservation.undo {
            Undo::Word { after, .. } => gcra::headroom(after, now, params, params.burst, MAX_SPAN),
            Undo::Nothing => {
                let tat = self.settled();
                if tat == Self::RETIRED {
                    (0, 0)
                } else {
                    gcra::headroom(tat, now, params, params.burst, MAX_SPAN)
                }
            }
            _ => (0, reservation.wait.saturating_add(params.t)),
        };
        Some(Headroom {
            remaining,
            refill_in: Duration::from_nanos(refill_in),
        })
    }

    /// [`reserve_n_on`](GcraCell::reserve_n_on) at the time `now`, for the
    /// unit tests.
    #[cfg(all(test, not(loom)))]
    pub(super) fn reserve_n(
        &self,
        quota: Quota,
        now: u64,
        n: u32,
        max_wait: Duration,
    ) -> Option<Result<Reservation, AcquireError>> {
        self.reserve_at(quota.into(), 0, || now, n, saturating_nanos(max_wait))
            .map(|(outcome, _)| outcome)
    }

    /// Gives back a reservation of this cell if nothing has changed the
    /// cell since (the unit tests'; keyed maps use `cancel_with_refunds`).
    #[cfg(all(test, not(loom)))]
    pub(super) fn cancel(&self, reservation: Reservation) -> bool {
        if reservation.owner != self.owner {
            return false;
        }
        let Undo::Word { before, after, .. } = reservation.undo else {
            return false;
        };
        // Relaxed: as in the acquisition CAS. Strong, because a spurious
        // failure would be reported as "not refunded".
        before != after
            && self
                .word
                .compare_exchange(after, before, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}
