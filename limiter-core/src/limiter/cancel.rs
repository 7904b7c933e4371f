//! Giving permits back: [`RateLimiter::cancel`] restores the word when no
//! later decision depends on it, else (std) records the slot as a refund
//! for the next reservation that would wait longer. All of it runs under
//! the change lock, which the acquisition path never takes.

use super::RateLimiter;
use crate::change_lock::ChangeGuard;
use crate::clock::Clock;
#[cfg(feature = "std")]
use crate::refunds::{Refund, WordUndo};
use crate::reservation::{Reservation, Undo};

impl<C: Clock> RateLimiter<C> {
    /// `fresh` would wait and the refund table is not empty: hands out a
    /// refund that comes sooner instead, giving `fresh` back.
    #[cfg(feature = "std")]
    #[cold]
    pub(super) fn prefer_refund(&self, fresh: Reservation, now: u64, max_wait: u64) -> Reservation {
        let table = self.changes();
        let mut guard = table.lock.lock();
        let changes = table.quotas.changes();
        let Undo::Word {
            changes: made_at, ..
        } = fresh.undo
        else {
            return fresh;
        };
        // A refund belongs to the quota in force; so must `fresh`.
        if made_at != changes {
            return fresh;
        }
        let fresh_slot = now + fresh.wait;
        match guard.refunds().take(
            self.owner.get(),
            now,
            fresh.permits,
            max_wait,
            fresh_slot,
            &table.pending,
        ) {
            Some(refund) => {
                self.give_back(&mut guard, fresh, now);
                self.refunded(refund, now, changes)
            }
            None => fresh,
        }
    }

    /// A reservation made of `refund`, which was taken from the table with
    /// the quota-change count at `changes`.
    #[cfg(feature = "std")]
    pub(super) fn refunded(&self, refund: Refund, now: u64, changes: u64) -> Reservation {
        let undo = refund.undo(changes);
        self.reservation(refund.permits, refund.slot, now, undo)
    }

    /// Gives back the permits of `reservation` if no later decision depends
    /// on them, or hands them to a later reservation if one does. Returns
    /// whether the permits are back in the limiter. Refuses (returns
    /// `false`) a reservation of another limiter, one made before a quota
    /// change (checked on a full 64-bit count), and one of 0 permits.
    ///
    /// * If the state still equals what this reservation left (no
    ///   reservation came after it), it is restored exactly as if the
    ///   reservation had never been made.
    /// * Otherwise (with `std`), its slot becomes a refund: the next
    ///   reservation that would wait past that slot gets it instead, and
    ///   once every later reservation has been cancelled too, the state is
    ///   restored. A refund whose slot passes unclaimed is dropped, as an
    ///   unused slot of an idle limiter is. Without `std`, such a
    ///   cancellation returns `false` and the permits stay spent.
    ///
    /// Either way the limiter never admits more than its quota in any
    /// window: a refund grants only what the schedule had already granted at
    /// that slot. Cancelling is a promise that the permits were not and will
    /// not be used.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// limiter.try_acquire()?;
    /// let first = limiter.reserve_n(1, Duration::MAX)?; // slot at 100 ms
    /// let second = limiter.reserve_n(1, Duration::MAX)?; // slot at 200 ms
    /// assert!(limiter.cancel(first)); // not the last: its slot is refunded
    /// let next = limiter.reserve_n(1, Duration::MAX)?;
    /// assert_eq!(next.wait(), Duration::from_millis(100)); // ...and reused
    /// # let _ = second;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, reservation: Reservation) -> bool {
        if reservation.owner != self.owner || reservation.permits == 0 {
            return false;
        }
        let now = self.epoch.elapsed(self.clock.now());
        let mut guard = self.changes().lock.lock();
        self.give_back(&mut guard, reservation, now)
    }

    /// `cancel` under the change lock, which excludes quota changes, so the
    /// count checked here holds until the undo is done.
    #[cfg_attr(not(feature = "std"), allow(unused_variables))]
    fn give_back(&self, guard: &mut ChangeGuard<'_>, reservation: Reservation, now: u64) -> bool {
        let changes = self.changes_made();
        match reservation.undo {
            Undo::Word {
                before,
                after,
                changes: made_at,
            } if made_at == changes => {
                if self.state.replace_if(after, before) {
                    #[cfg(feature = "std")]
                    self.collapse(guard, now);
                    return true;
                }
                #[cfg(feature = "std")]
                {
                    let slot = self.epoch.elapsed(reservation.ready_at);
                    let undo = Some(WordUndo { before, after });
                    self.record(guard, slot, reservation.permits, undo, now)
                }
                #[cfg(not(feature = "std"))]
                false
            }
            #[cfg(feature = "std")]
            Undo::Refund {
                slot,
                changes: made_at,
            } if made_at == changes => self.record(guard, slot, reservation.permits, None, now),
            _ => false,
        }
    }

    /// Records a refund of `permits` at `slot`, unless the slot has passed.
    #[cfg(feature = "std")]
    fn record(
        &self,
        guard: &mut ChangeGuard<'_>,
        slot: u64,
        permits: u32,
        undo: Option<WordUndo>,
        now: u64,
    ) -> bool {
        // A passed slot would be dropped at once; and `give_back` has just
        // found that the word cannot be restored over it.
        if slot < now {
            return false;
        }
        let refund = Refund {
            owner: self.owner.get(),
            slot,
            permits,
            undo,
        };
        guard.refunds().record(refund, now, &self.changes().pending);
        // The word may already equal this refund's `after`.
        self.collapse(guard, now);
        true
    }

    /// Restores the state over every whole refund it can (see
    /// [`crate::refunds`]).
    #[cfg(feature = "std")]
    fn collapse(&self, guard: &mut ChangeGuard<'_>, now: u64) {
        guard.refunds().collapse(
            self.owner.get(),
            now,
            &self.changes().pending,
            || self.state.load(),
            |after, before| self.state.replace_if(after, before),
        );
    }
}
