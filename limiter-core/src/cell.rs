//! [`GcraCell`]: the GCRA state of one limited subject in a bare `AtomicU64`,
//! with the quota passed in by the caller. The building block of keyed
//! limiters, which keep one cell per key and one quota for all of them.
//!
//! # Layout of the cell word
//!
//! ```text
//!  63                                                              0
//! +-----------------------------------------------------------------+
//! |  tat: ns since the clock's origin, at most MAX_SPAN (2^60 - 1)   |
//! +-----------------------------------------------------------------+
//! ```
//!
//! or [`RETIRED`] (`u64::MAX`, above every valid `tat`): the cell has been
//! taken out of service by [`GcraCell::retire_if_idle`] or
//! [`GcraCell::retire`] and makes no more decisions. Retiring is how a keyed
//! map removes a key safely: a thread that found the cell before it was
//! removed from the map either changed it before the retiring CAS (which
//! then fails, so the key stays) or sees `RETIRED` and looks the key up
//! again. No admission is ever made on a cell that has left the map.
//!
//! Unlike [`RateLimiter`](crate::RateLimiter) the cell holds no quota and no
//! generation: it is 8 bytes, not padded to a cache line, and the caller
//! must pass the same quota (or deliberately a new one) on every call. A
//! quota change is not rescaled: the `tat` keeps its meaning in nanoseconds.
//!
//! The decision is [`crate::gcra::reserve_within`] with the whole burst; the CAS loop is the one of
//! [`crate::state`] (load once, decide, `compare_exchange_weak`, decide again
//! on the value a failed CAS returns; a refusal writes nothing).

use core::time::Duration;

use crate::error::AcquireError;
use crate::gcra::{self, Params};
use crate::identity::Owner;
use crate::limiter::acquire_error;
use crate::quota::{MAX_SPAN, Quota, saturating_nanos};
use crate::reservation::{Reservation, Undo};
use crate::state::update_word;
use crate::sync::{AtomicU64, Ordering};

/// The word of a retired cell: above every valid `tat`.
pub const RETIRED: u64 = u64::MAX;

// A retired word can never be mistaken for a tat.
const _: () = assert!(RETIRED > MAX_SPAN);

/// The GCRA state of one subject: a theoretical arrival time in one
/// `AtomicU64`, decided against a quota the caller passes in.
///
/// A new cell is full (it grants the quota's burst at once). Every method
/// takes `&self` and is lock-free.
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
/// use limiter_core::{GcraCell, Quota};
///
/// let quota = Quota::per_second(10)?.with_burst(2)?;
/// let cell = GcraCell::new();
/// assert!(cell.try_acquire_n(quota, 0, 2).unwrap().is_ok());
/// assert!(cell.try_acquire_n(quota, 0, 1).unwrap().is_err());
/// assert!(!cell.is_idle(100_000_000)); // one permit back, not both
/// assert!(cell.is_idle(200_000_000)); // full again: it carries no information
/// assert!(cell.retire_if_idle(200_000_000));
/// assert!(cell.try_acquire_n(quota, 200_000_000, 1).is_none());
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct GcraCell {
    word: AtomicU64,
}

impl Default for GcraCell {
    fn default() -> GcraCell {
        GcraCell::new()
    }
}

impl GcraCell {
    /// A full cell (`tat = 0`).
    pub fn new() -> GcraCell {
        GcraCell {
            word: AtomicU64::new(0),
        }
    }

    /// Takes `n` permits at `now` if all are available, all or nothing.
    /// `None` if the cell is retired (look the subject up again).
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n`](crate::RateLimiter::try_acquire_n).
    #[inline]
    pub fn try_acquire_n(
        &self,
        quota: Quota,
        now: u64,
        n: u32,
    ) -> Option<Result<(), AcquireError>> {
        self.reserve_at(quota, now, n, 0).map(|r| r.map(|_| ()))
    }

    /// Claims the earliest slot for `n` permits at `now` if it comes within
    /// `max_wait`. `None` if the cell is retired.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::reserve_n`](crate::RateLimiter::reserve_n).
    #[inline]
    pub fn reserve_n(
        &self,
        quota: Quota,
        now: u64,
        n: u32,
        max_wait: Duration,
    ) -> Option<Result<Reservation, AcquireError>> {
        self.reserve_at(quota, now, n, saturating_nanos(max_wait))
    }

    #[inline]
    fn reserve_at(
        &self,
        quota: Quota,
        now: u64,
        n: u32,
        max_wait: u64,
    ) -> Option<Result<Reservation, AcquireError>> {
        let params = Params::from(quota);
        // Relaxed throughout: the word names no other data; the CAS alone
        // orders decisions on this cell among themselves (linearizable).
        let outcome = update_word(
            &self.word,
            Ordering::Relaxed,
            Ordering::Relaxed,
            Ordering::Relaxed,
            |current| {
                if current == RETIRED {
                    return Err(None);
                }
                let grant =
                    gcra::reserve_within(current, now, n, max_wait, params, params.burst, MAX_SPAN)
                        .map_err(|refusal| Some(acquire_error(refusal, n, now, params.burst)))?;
                let undo = if n == 0 {
                    Undo::Nothing
                } else {
                    Undo::Word {
                        before: current,
                        after: grant.tat,
                        changes: 0,
                    }
                };
                Ok((
                    grant.tat,
                    Reservation {
                        permits: n,
                        ready_at: now + grant.wait,
                        wait: grant.wait,
                        owner: Owner::NONE,
                        undo,
                    },
                ))
            },
        );
        match outcome {
            Ok(reservation) => Some(Ok(reservation)),
            Err(None) => None,
            Err(Some(error)) => Some(Err(error)),
        }
    }

    /// Gives back the permits of a reservation made on this cell if nothing
    /// has changed the cell since; returns whether it did.
    pub fn cancel(&self, reservation: Reservation) -> bool {
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

    /// How many permits a try could take at `now` under `quota` (0 if
    /// retired).
    pub fn available(&self, quota: Quota, now: u64) -> u32 {
        // Relaxed: a snapshot of one value.
        match self.word.load(Ordering::Relaxed) {
            RETIRED => 0,
            tat => gcra::available(tat, now, Params::from(quota), MAX_SPAN),
        }
    }

    /// Whether the cell is full again at `now` (`tat ≤ now`): it would grant
    /// a whole burst, exactly like a new cell, so forgetting it loses nothing.
    pub fn is_idle(&self, now: u64) -> bool {
        // Relaxed: a snapshot of one value.
        let tat = self.word.load(Ordering::Relaxed);
        tat != RETIRED && tat <= now
    }

    /// The theoretical arrival time, or `None` if retired.
    pub fn tat(&self) -> Option<u64> {
        // Relaxed: a snapshot of one value.
        match self.word.load(Ordering::Relaxed) {
            RETIRED => None,
            tat => Some(tat),
        }
    }

    /// Retires the cell if it is idle at `now`, atomically with that check:
    /// a decision that changed the cell first makes this fail. Returns
    /// whether this call retired it.
    pub fn retire_if_idle(&self, now: u64) -> bool {
        // Relaxed: as in the acquisition CAS.
        let tat = self.word.load(Ordering::Relaxed);
        tat != RETIRED
            && tat <= now
            && self
                .word
                .compare_exchange(tat, RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Retires the cell whatever its state, forgetting any debt. Returns
    /// whether this call retired it (false if it already was).
    pub fn retire(&self) -> bool {
        // Relaxed: as in the acquisition CAS.
        self.word.swap(RETIRED, Ordering::Relaxed) != RETIRED
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn quota() -> Quota {
        Quota::per_second(10).unwrap().with_burst(3).unwrap()
    }

    #[test]
    fn a_cell_decides_like_the_limiter() {
        let cell = GcraCell::new();
        for _ in 0..3 {
            assert_eq!(cell.try_acquire_n(quota(), 0, 1), Some(Ok(())));
        }
        assert_eq!(
            cell.try_acquire_n(quota(), 0, 1),
            Some(Err(AcquireError::RateLimited {
                wait: Duration::from_millis(100)
            }))
        );
        assert_eq!(cell.tat(), Some(300_000_000));
        assert_eq!(cell.available(quota(), 150_000_000), 1);
        assert_eq!(
            cell.try_acquire_n(quota(), 0, 4),
            Some(Err(AcquireError::InsufficientCapacity {
                requested: 4,
                burst: 3
            }))
        );
    }

    #[test]
    fn reservations_cancel_only_when_last() {
        let cell = GcraCell::new();
        let a = cell
            .reserve_n(quota(), 0, 3, Duration::ZERO)
            .unwrap()
            .unwrap();
        let b = cell
            .reserve_n(quota(), 0, 1, Duration::from_secs(1))
            .unwrap()
            .unwrap();
        assert_eq!(b.wait(), Duration::from_millis(100));
        assert!(!cell.cancel(a));
        assert!(cell.cancel(b));
        assert_eq!(cell.tat(), Some(300_000_000));
    }

    #[test]
    fn only_an_idle_cell_retires_quietly() {
        let cell = GcraCell::new();
        assert_eq!(cell.try_acquire_n(quota(), 0, 1), Some(Ok(())));
        assert!(!cell.is_idle(99_999_999));
        assert!(!cell.retire_if_idle(99_999_999));
        assert!(cell.retire_if_idle(100_000_000));
        assert!(!cell.retire_if_idle(100_000_000));
        assert_eq!(cell.try_acquire_n(quota(), 0, 1), None);
        assert_eq!(cell.available(quota(), 0), 0);
        assert!(!cell.is_idle(u64::MAX));
        assert!(!cell.retire());

        let busy = GcraCell::new();
        assert_eq!(busy.try_acquire_n(quota(), 0, 3), Some(Ok(())));
        assert!(busy.retire());
        assert_eq!(busy.tat(), None);
    }
}
