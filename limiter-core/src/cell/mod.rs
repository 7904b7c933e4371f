//! The building blocks of per-key limiters, for `limiter-keyed` and the
//! authors of other keyed maps; a user of one limiter needs none of them.
//!
//! # Contract
//!
//! * [`GcraCell`]: one subject's GCRA state (`tat`) in a bare `AtomicU64`
//!   plus an identity; the caller passes the quota and the time on every
//!   call, and keeps the cell in its own map. Decide with
//!   [`try_acquire_n`](GcraCell::try_acquire_n) or
//!   [`reserve_n_on`](GcraCell::reserve_n_on) (std: the `_with_refunds`
//!   pair, which also gives back reservations cancelled out of order);
//!   report with [`available`](GcraCell::available) and
//!   [`headroom_of`](GcraCell::headroom_of); remove a key with
//!   [`retire_if_idle`](GcraCell::retire_if_idle) or
//!   [`retire`](GcraCell::retire), change its quota with
//!   [`retire_into`](GcraCell::retire_into). Every method is lock-free.
//! * [`SharedQuota`] and [`CellQuota`]: a quota every cell follows and each
//!   cell's record of it; [`QuotaOf`] names the one a call decides under.
//! * [`CellClock`]: the reading a cell decides at, from the caller's epoch.
//! * [`CellRefunds`] (std): the slots of reservations cancelled out of order.
//!
//! Files: this one (the cell and its clock), `decide` (acquiring and the
//! headroom), `retire` (reading, retiring, moving), `refunds` (std).
//!
//! # Layout
//!
//! ```text
//!  offset 0   word: AtomicU64
//!  63                                                              0
//! +-----------------------------------------------------------------+
//! |  tat: ns since the caller's epoch, at most MAX_SPAN (2^60 - 1)   |
//! +-----------------------------------------------------------------+
//!  offset 8   owner: u64, fixed at construction, never written again
//! ```
//!
//! 16 bytes, not padded to a cache line. The word is `tat`, or [`GcraCell::RETIRED`]
//! (`u64::MAX`, above every valid `tat`): the cell has been taken out of
//! service by [`GcraCell::retire_if_idle`] or [`GcraCell::retire`] and
//! makes no more decisions. Retiring is how a keyed map removes a key
//! safely: a thread that found the cell before it was removed from the map
//! either changed it before the retiring CAS (which then fails, so the key
//! stays) or sees `RETIRED` and looks the key up again. No admission is ever
//! made on a cell that has left the map.
//!
//! The owner is a process-unique number drawn when the cell is made and
//! stamped on every reservation the cell issues; [`GcraCell::cancel_with_refunds`]
//! refuses a reservation of any other cell. A keyed map that evicts a key
//! and later makes a new cell for it therefore never lets a reservation made
//! on the old cell refund the new one, even when the two words happen to be
//! equal.
//!
//! Unlike [`RateLimiter`](crate::RateLimiter) the cell holds no quota, no
//! generation and no epoch: the caller passes the same quota (or
//! deliberately a new one) on every call, and `now` in nanoseconds since
//! its own epoch. A quota change is not rescaled: the `tat` keeps its
//! meaning in nanoseconds.
//!
//! The decision is `gcra::reserve_within` with the whole burst; the CAS loop
//! is the one of `state`: load once, decide, `compare_exchange_weak`, decide
//! again on the value a failed CAS returns; a refusal writes nothing.

pub use crate::follow::{CellQuota, QuotaOf, SharedQuota};

use crate::clock::Clock;
use crate::identity::Owner;
use crate::quota::MAX_SPAN;
use crate::sync::AtomicU64;

mod decide;
#[cfg(feature = "std")]
mod refunds;
mod retire;
#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(feature = "std")]
pub use refunds::CellRefunds;

/// The clock a [`GcraCell`] decides on: `clock`'s readings counted from
/// the caller's epoch `origin` (a reading of that clock), so a clock of any
/// origin works and reservations report clock readings. A reading before
/// `origin` counts as 0 (time never runs ahead).
///
/// # Examples
///
/// ```
/// use limiter_core::{cell::CellClock, ManualClock};
///
/// let clock = ManualClock::starting_at(1_000);
/// let on = CellClock { clock: &clock, origin: 400 };
/// assert_eq!(on.now(), 600);
/// ```
#[derive(Debug)]
pub struct CellClock<'a, C: ?Sized> {
    /// The clock read.
    pub clock: &'a C,
    /// The reading the cell's time counts from.
    pub origin: u64,
}

impl<C: ?Sized> Clone for CellClock<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: ?Sized> Copy for CellClock<'_, C> {}

impl<C: Clock + ?Sized> CellClock<'_, C> {
    /// Nanoseconds since `origin` (0 before it).
    #[inline]
    pub fn now(&self) -> u64 {
        self.clock.now().saturating_sub(self.origin)
    }
}

// A retired word can never be mistaken for a tat.
const _: () = assert!(GcraCell::RETIRED > MAX_SPAN);

/// The GCRA state of one subject: a theoretical arrival time in one
/// `AtomicU64`, decided against a quota the caller passes in, and the cell's
/// own identity (16 bytes in all).
///
/// A new cell is full (it grants the quota's burst at once). Every method
/// takes `&self` and is lock-free. Times (`now`) are nanoseconds since the
/// caller's epoch, at most [`MAX_SPAN`].
///
/// # Memory ordering
///
/// As [`RateLimiter`](crate::RateLimiter): each admission is one successful
/// CAS on the word, so decisions on one cell are linearizable. The cell
/// publishes nothing else.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{cell::CellClock, cell::GcraCell, ManualClock, Quota};
///
/// let quota = Quota::per_second(10)?.with_burst(2)?;
/// let cell = GcraCell::new();
/// assert!(cell.try_acquire_n(quota, 0, 2).unwrap().is_ok());
/// assert!(cell.try_acquire_n(quota, 0, 1).unwrap().is_err());
/// assert_eq!(cell.available(quota, 100_000_000), 1); // one permit back, not both
/// assert_eq!(cell.tat(), Some(200_000_000)); // full again from then on
///
/// // Reservations name the clock's reading of their slot.
/// let clock = ManualClock::starting_at(200_000_000);
/// let r = cell.reserve_n_on(CellClock { clock: &clock, origin: 0 }, quota, 1, Duration::ZERO).unwrap()?;
/// assert_eq!(r.ready_at(), 200_000_000);
///
/// assert!(cell.retire_if_idle(300_000_000));
/// assert!(cell.try_acquire_n(quota, 300_000_000, 1).is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct GcraCell {
    word: AtomicU64,
    owner: Owner,
}

impl Default for GcraCell {
    fn default() -> GcraCell {
        GcraCell::new()
    }
}

impl GcraCell {
    /// The word of a retired cell (`u64::MAX`): above every valid `tat`, so
    /// it is never mistaken for one.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{cell::GcraCell, clock::MAX_SPAN};
    ///
    /// assert!(GcraCell::RETIRED > MAX_SPAN);
    /// ```
    pub const RETIRED: u64 = u64::MAX;

    /// A full cell (`tat = 0`) with an identity never used before in this
    /// process.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// assert_eq!(cell.tat(), Some(0));
    /// assert_eq!(cell.available(quota.with_burst(5)?, 0), 5); // full
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new() -> GcraCell {
        GcraCell {
            word: AtomicU64::new(0),
            owner: Owner::new(),
        }
    }
}
