//! Reservations of cells cancelled out of order (std): [`CellRefunds`],
//! one table of refunded slots per keyed limiter, and the cell methods that
//! reserve from it and cancel into it. A refund is tagged with its cell's
//! identity and the quota version it was decided under, so it never
//! serves another cell or a later quota.

use core::time::Duration;

use super::{CellClock, GcraCell, QuotaOf, SharedQuota};
use crate::clock::Clock;
use crate::error::AcquireError;
use crate::quota::{Quota, saturating_nanos};
use crate::refunds::{Pending, Refund, Refunds, WordUndo};
use crate::reservation::{Reservation, Undo};
use crate::sync::Ordering;

impl GcraCell {
    /// As [`reserve_n_on`](GcraCell::reserve_n_on), taking a refund of
    /// this cell from `refunds` when its fresh slot would wait and a refund
    /// comes sooner (see [`cancel_with_refunds`](GcraCell::cancel_with_refunds)).
    /// The fresh slot is then given back. A reservation whose permits are
    /// free now, or an empty table, costs nothing more than
    /// `reserve_n_on`.
    ///
    /// # Errors
    ///
    /// As [`reserve_n_on`](GcraCell::reserve_n_on).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::CellClock, cell::CellRefunds, cell::GcraCell, ManualClock, Quota};
    ///
    /// let (cell, refunds, clock) = (GcraCell::new(), CellRefunds::new(), ManualClock::new());
    /// let on = CellClock { clock: &clock, origin: 0 };
    /// let q = Quota::per_second(10)?; // slots 100 ms apart
    /// let reserve = || cell.reserve_n_with_refunds(&refunds, on, q, 1, Duration::MAX).unwrap();
    /// let (_now, first, _second) = (reserve()?, reserve()?, reserve()?);
    /// assert!(cell.cancel_with_refunds(&refunds, first, on, q)); // refunded at 100 ms
    /// assert_eq!(reserve()?.wait(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn reserve_n_with_refunds<'a, C: Clock + ?Sized>(
        &self,
        refunds: &CellRefunds,
        clock: CellClock<'_, C>,
        quota: impl Into<QuotaOf<'a>>,
        n: u32,
        max_wait: Duration,
    ) -> Option<Result<Reservation, AcquireError>> {
        let max_wait = saturating_nanos(max_wait);
        let origin = clock.origin;
        let quota = quota.into();
        let (fresh, now) = self.reserve_at(quota, origin, || clock.now(), n, max_wait)?;
        if !refunds.pending.any() {
            return Some(fresh);
        }
        let fresh_wait = match &fresh {
            Ok(r) if r.wait != 0 => r.wait,
            Err(AcquireError::RateLimited { wait }) => saturating_nanos(*wait),
            _ => return Some(fresh),
        };
        let mut table = refunds.lock();
        // Under the table's lock no quota change can begin (see
        // `SharedQuota::set_clearing`): the table holds refunds of the
        // version in force only, and a fresh slot of an older one is kept.
        let version = quota.version_now();
        if matches!(&fresh, Ok(r) if undo_version(r) != version) {
            return Some(fresh);
        }
        let owner = self.owner.get();
        let sooner_than = now.saturating_add(fresh_wait);
        let Some(refund) = table.take(owner, now, n, max_wait, sooner_than, &refunds.pending)
        else {
            return Some(fresh);
        };
        if let Ok(fresh) = fresh {
            self.give_back(&mut table, refunds, fresh, origin, now);
        }
        let undo = refund.undo(version);
        Some(Ok(Reservation {
            permits: refund.permits,
            // The refund's slot was a slot of this cell, which lay in range.
            ready_at: origin + refund.slot,
            wait: refund.slot - now,
            owner: self.owner,
            undo,
        }))
    }

    /// Gives back the permits of a reservation made on this cell, whether or
    /// not later reservations depend on them; returns whether they are back.
    /// `clock` is the one the reservation was made on (see
    /// [`reserve_n_on`](GcraCell::reserve_n_on)). Refuses a reservation of
    /// any other cell.
    ///
    /// If the cell still holds what the reservation left, its word is
    /// restored (a plain undo). Otherwise its slot
    /// becomes a refund in `refunds`, which the next
    /// [`reserve_n_with_refunds`](GcraCell::reserve_n_with_refunds) of this
    /// cell that would wait longer takes; once every later reservation is
    /// cancelled too, the word is restored over it. A slot already passed is
    /// not refunded (`false`). The cell never admits more than its quota in
    /// any window: a refund grants only what its schedule already granted at
    /// that slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::CellRefunds, cell::GcraCell, Quota};
    ///
    /// use limiter_core::{cell::CellClock, ManualClock};
    /// let (cell, refunds, clock) = (GcraCell::new(), CellRefunds::new(), ManualClock::new());
    /// let on = CellClock { clock: &clock, origin: 0 };
    /// let q = Quota::per_second(10)?;
    /// let reserve = || cell.reserve_n_with_refunds(&refunds, on, q, 1, Duration::MAX).unwrap();
    /// let (_now, first, second) = (reserve()?, reserve()?, reserve()?);
    /// assert!(cell.cancel_with_refunds(&refunds, first, on, q)); // not the last
    /// assert!(cell.cancel_with_refunds(&refunds, second, on, q)); // unwinds both
    /// assert_eq!(reserve()?.wait(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn cancel_with_refunds<'a, C: Clock + ?Sized>(
        &self,
        refunds: &CellRefunds,
        reservation: Reservation,
        clock: CellClock<'_, C>,
        quota: impl Into<QuotaOf<'a>>,
    ) -> bool {
        if reservation.owner != self.owner || reservation.permits == 0 {
            return false;
        }
        let now = clock.now();
        let mut table = refunds.lock();
        // A reservation made before a change of the shared quota it follows
        // belongs to the old quota: refused, checked under the lock that
        // changes take (see `SharedQuota::set_clearing`).
        if !quota.into().still_in_force(undo_version(&reservation)) {
            return false;
        }
        self.give_back(&mut table, refunds, reservation, clock.origin, now)
    }

    /// `cancel_with_refunds` with the table locked.
    #[cfg(feature = "std")]
    fn give_back(
        &self,
        table: &mut Refunds,
        refunds: &CellRefunds,
        reservation: Reservation,
        origin: u64,
        now: u64,
    ) -> bool {
        let owner = self.owner.get();
        let collapse = |table: &mut Refunds| {
            table.collapse(
                owner,
                now,
                &refunds.pending,
                // Relaxed: as in the acquisition CAS.
                || self.word.load(Ordering::Relaxed),
                |after, before| {
                    self.word
                        .compare_exchange(after, before, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                },
            )
        };
        let (slot, undo) = match reservation.undo {
            Undo::Word { before, after, .. } => {
                // Relaxed and strong: as in `cancel`.
                if self
                    .word
                    .compare_exchange(after, before, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    collapse(table);
                    return true;
                }
                let slot = reservation.ready_at.saturating_sub(origin);
                (slot, Some(WordUndo { before, after }))
            }
            Undo::Refund { slot, .. } => (slot, None),
            _ => return false,
        };
        if slot < now {
            return false;
        }
        let refund = Refund {
            owner,
            slot,
            permits: reservation.permits,
            undo,
        };
        table.record(refund, now, &refunds.pending);
        collapse(table);
        true
    }
}

/// The quota version a reservation was decided under (0 for a fixed quota).
#[cfg(feature = "std")]
fn undo_version(reservation: &Reservation) -> u64 {
    match reservation.undo {
        Undo::Word { changes, .. } | Undo::Refund { changes, .. } => changes,
        _ => 0,
    }
}

/// The refunds of reservations cancelled out of order on a set of
/// [`GcraCell`]s: one table for a whole keyed limiter, each refund tagged
/// with its cell's identity (see
/// [`cancel_with_refunds`](GcraCell::cancel_with_refunds)).
///
/// A mutex guards the table; a cell takes it only to cancel, or to reserve
/// when its fresh slot would wait and the table is not empty (an atomic
/// count says so without the lock). Refunds expire with their slot and the
/// table holds at most 4,096, so a table outlives any number of cells in
/// bounded memory.
#[cfg(feature = "std")]
#[derive(Debug)]
pub struct CellRefunds {
    table: crate::sync::Mutex<Refunds>,
    pending: Pending,
}

#[cfg(feature = "std")]
impl CellRefunds {
    /// An empty table.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::CellClock, cell::CellRefunds, cell::GcraCell, ManualClock, Quota};
    ///
    /// let (cell, refunds, clock) = (GcraCell::new(), CellRefunds::new(), ManualClock::new());
    /// let on = CellClock { clock: &clock, origin: 0 };
    /// let quota = Quota::per_second(10)?;
    /// let r = cell.reserve_n_with_refunds(&refunds, on, quota, 1, Duration::ZERO).unwrap()?;
    /// assert!(cell.cancel_with_refunds(&refunds, r, on, quota));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new() -> CellRefunds {
        CellRefunds {
            table: crate::sync::Mutex::new(Refunds::new()),
            pending: Pending::default(),
        }
    }

    /// Runs `change` (a quota change) with the table locked, then drops
    /// every refund: they belong to the quota before it.
    pub(crate) fn clear_during(&self, change: impl FnOnce()) {
        let mut table = self.lock();
        change();
        table.clear(&self.pending);
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Refunds> {
        // Every update is one push, remove or field write: a panic cannot
        // leave the table inconsistent, so a poisoned lock is used as is.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(feature = "std")]
impl Default for CellRefunds {
    fn default() -> CellRefunds {
        CellRefunds::new()
    }
}

/// Quota changes that drop the refunds of a [`CellRefunds`] table (here,
/// beside the table, so that `follow` does not depend on this module).
#[cfg(feature = "std")]
impl SharedQuota {
    /// [`set`](SharedQuota::set), and drops the refunds of `refunds`: they
    /// belong to the old quota. Holding the table's lock across the change
    /// serialises it with every cancellation into the table, which checks
    /// under the same lock that no change came after its reservation.
    pub fn set_clearing(&self, quota: Quota, now: u64, refunds: &CellRefunds) {
        refunds.clear_during(|| self.set(quota, now));
    }
}
