//! The building blocks of per-key limiters (what `limiter-keyed` is made
//! of, for authors of other keyed maps): [`GcraCell`], the GCRA state of
//! one limited subject in a bare `AtomicU64`, with the quota passed in by
//! the caller; [`SharedQuota`] and [`CellQuota`], a quota every cell
//! follows and each cell's record of it ([`QuotaOf`] names the one a call
//! decides under); [`CellClock`], the reading a cell decides at; and
//! [`CellRefunds`] (std), the slots of reservations cancelled out of
//! order. A user of one limiter needs none of them.
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
//! stamped on every reservation the cell issues; [`GcraCell::cancel`]
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
//! The decision is `gcra::reserve_within` with the whole burst; the CAS loop is the one of
//! `state` (load once, decide, `compare_exchange_weak`, decide again
//! on the value a failed CAS returns; a refusal writes nothing).

use core::time::Duration;

pub use crate::follow::{CellQuota, QuotaOf, SharedQuota};

use crate::clock::Clock;
use crate::error::AcquireError;
use crate::follow::LOCKED;
use crate::gcra::{self, Params, Refusal};
use crate::identity::Owner;
use crate::limiter::acquire_error;
use crate::quota::{MAX_SPAN, Quota, saturating_nanos};
use crate::reservation::{Headroom, Reservation, Undo};
use crate::sync::{AtomicU64, Ordering};

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
/// use limiter_core::{cell::GcraCell, Quota};
///
/// let quota = Quota::per_second(10)?.with_burst(2)?;
/// let cell = GcraCell::new();
/// assert!(cell.try_acquire_n(quota, 0, 2).unwrap().is_ok());
/// assert!(cell.try_acquire_n(quota, 0, 1).unwrap().is_err());
/// assert!(!cell.is_idle(100_000_000)); // one permit back, not both
/// assert!(cell.is_idle(200_000_000)); // full again: it carries no information
///
/// // A reservation refunds only the cell that issued it.
/// let r = cell.reserve_n(quota, 200_000_000, 1, Duration::ZERO).unwrap()?;
/// assert!(!GcraCell::new().cancel(r));
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

    /// Claims the earliest slot for `n` permits at `now` if it comes within
    /// `max_wait`. `None` if the cell is retired. The reservation's
    /// [`ready_at`](Reservation::ready_at) is in the scale of `now`.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::reserve_n`](crate::RateLimiter::reserve_n).
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
    /// cell.try_acquire_n(quota, 0, 1).unwrap()?;
    /// let r = cell.reserve_n(quota, 30_000_000, 1, Duration::MAX).unwrap()?;
    /// assert_eq!((r.wait(), r.ready_at()), (Duration::from_millis(70), 100_000_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(
        &self,
        quota: Quota,
        now: u64,
        n: u32,
        max_wait: Duration,
    ) -> Option<Result<Reservation, AcquireError>> {
        self.reserve_at(quota.into(), 0, || now, n, saturating_nanos(max_wait))
            .map(|(outcome, _)| outcome)
    }

    /// As [`reserve_n`](GcraCell::reserve_n), at the time `clock` reads: its
    /// readings as nanoseconds since the caller's epoch, and the
    /// reservation's [`ready_at`](Reservation::ready_at) a reading of its
    /// clock (the epoch plus the slot).
    ///
    /// The clock is read once, and again after a CAS lost to another
    /// decision: that decision may have read the clock later than this one
    /// did, and deciding on its word with the earlier reading would refuse
    /// a request that conforms now, or report one permit too few left.
    ///
    /// # Errors
    ///
    /// As [`reserve_n`](GcraCell::reserve_n), and
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
    fn reserve_at(
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
            tests::stall_before_cas();
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

    /// Gives back the permits of a reservation made on this cell if nothing
    /// has changed the cell since; returns whether it did. A reservation
    /// made by any other cell (or limiter) is refused, whatever the words.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// let r = cell.reserve_n(quota, 0, 1, Duration::ZERO).unwrap()?;
    /// assert_eq!(cell.available(quota, 0), 0);
    /// assert!(cell.cancel(r));
    /// assert_eq!(cell.available(quota, 0), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, reservation: Reservation) -> bool {
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

    /// How many permits a try could take at `now` under `quota`: exactly the
    /// largest `n` that [`try_acquire_n`](GcraCell::try_acquire_n) would
    /// grant, including near [`MAX_SPAN`] (0 if retired).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// let quota = quota.with_burst(3)?;
    /// cell.try_acquire_n(quota, 0, 3).unwrap()?;
    /// assert_eq!(cell.available(quota, 0), 0);
    /// assert_eq!(cell.available(quota, 200_000_000), 2);
    /// cell.retire();
    /// assert_eq!(cell.available(quota, 200_000_000), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A cell that follows a shared quota is moved to it first, if it has
    /// not been yet (see [`SharedQuota`]).
    pub fn available<'a>(&self, quota: impl Into<QuotaOf<'a>>, now: u64) -> u32 {
        let quota = quota.into();
        loop {
            let tat = self.settled();
            if tat == Self::RETIRED {
                return 0;
            }
            if let Ok((params, _)) = quota.prepare(&self.word, tat) {
                return gcra::available(tat, now, params, MAX_SPAN);
            }
        }
    }

    /// The word, once no move is in progress (a move is a few stores).
    #[inline]
    fn settled(&self) -> u64 {
        loop {
            // Acquire: as in the decision, the word may publish the record.
            let word = self.word.load(Ordering::Acquire);
            if word != LOCKED {
                return word;
            }
            crate::sync::spin_hint();
        }
    }

    /// The [`Headroom`] that `reservation`, made by this cell under `quota`
    /// on a clock whose epoch is the reading `origin` (0 for
    /// [`reserve_n`](GcraCell::reserve_n)), left: computed from the word the
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
    /// use limiter_core::{cell::GcraCell, Headroom, Quota};
    ///
    /// let quota = Quota::per_second(10)?.with_burst(3)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// let r = cell.reserve_n(quota, 0, 1, Duration::ZERO).unwrap()?;
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

    /// What [`available`](GcraCell::available) says of a new cell at `now`:
    /// the burst, but near [`MAX_SPAN`] only what fits before it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// use limiter_core::clock::MAX_SPAN;
    /// let quota = quota.with_burst(3)?;
    /// assert_eq!(GcraCell::available_when_new(quota, 0), 3);
    /// assert_eq!(GcraCell::available_when_new(quota, MAX_SPAN - 100_000_000), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available_when_new(quota: Quota, now: u64) -> u32 {
        gcra::available(0, now, Params::from(quota), MAX_SPAN)
    }

    /// Whether the cell is full again at `now` (`tat ≤ now`): it would grant
    /// a whole burst, exactly like a new cell, so forgetting it loses nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// assert!(cell.is_idle(0));
    /// cell.try_acquire_n(quota, 0, 1).unwrap()?;
    /// assert!(!cell.is_idle(99_999_999));
    /// assert!(cell.is_idle(100_000_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_idle(&self, now: u64) -> bool {
        let tat = self.settled();
        tat != Self::RETIRED && tat <= now
    }

    /// The theoretical arrival time, or `None` if retired.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// cell.try_acquire_n(quota, 0, 1).unwrap()?;
    /// assert_eq!(cell.tat(), Some(100_000_000));
    /// cell.retire();
    /// assert_eq!(cell.tat(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tat(&self) -> Option<u64> {
        match self.settled() {
            Self::RETIRED => None,
            tat => Some(tat),
        }
    }

    /// Retires the cell if it is idle at `now`, atomically with that check:
    /// a decision that changed the cell first makes this fail. Returns
    /// whether this call retired it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// cell.try_acquire_n(quota, 0, 1).unwrap()?;
    /// assert!(!cell.retire_if_idle(50_000_000)); // still in debt: kept
    /// assert!(cell.retire_if_idle(100_000_000));
    /// assert!(!cell.retire_if_idle(100_000_000)); // already retired
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retire_if_idle(&self, now: u64) -> bool {
        // A moving cell (LOCKED) is above every `now`: not idle.
        // Relaxed: the word alone decides; nothing else is read.
        let tat = self.word.load(Ordering::Relaxed);
        tat != Self::RETIRED
            && tat <= now
            && self
                .word
                .compare_exchange(tat, Self::RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Retires the cell whatever its state, forgetting any debt. Returns
    /// whether this call retired it (false if it already was).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// cell.try_acquire_n(quota, 0, 1).unwrap()?;
    /// assert!(cell.retire()); // debt and all
    /// assert!(!cell.retire());
    /// assert_eq!(cell.tat(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retire(&self) -> bool {
        // Not over a move in progress, whose last store would bring the
        // cell back: wait for it to settle, then CAS.
        loop {
            let word = self.settled();
            if word == Self::RETIRED {
                return false;
            }
            // Relaxed: the word alone decides; nothing else is read.
            if self
                .word
                .compare_exchange(word, Self::RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }
}

impl GcraCell {
    /// Retires the cell (as [`retire`](GcraCell::retire)) and returns a new
    /// cell, of a new identity, owing under `to` the permits this one owed
    /// under `from` at `now`: the rescale of
    /// [`RateLimiter::set_quota`](crate::RateLimiter::set_quota) (a debt
    /// scaled by `t_new / t_old`, rounded up; a full cell stays full).
    /// `None` if the cell was already retired (its subject is being
    /// removed; a new cell starts full).
    ///
    /// `from` is read after the retiring CAS, so it is the quota the
    /// retired `tat` is expressed in: for a record following a shared
    /// quota, the record's (a change of the shared quota the cell had not
    /// yet moved to is skipped: the cell goes straight from its record to
    /// `to`, as a cell more than 15 changes behind does). This is how a
    /// keyed limiter changes one key's quota live: the map swaps the key's
    /// entry for the returned cell under the bucket lock, and every decision
    /// that read the old cell fails its CAS on `RETIRED` and looks again.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let (old, new) = (Quota::per_second(10)?.with_burst(4)?, Quota::per_second(1)?.with_burst(4)?);
    /// let cell = GcraCell::new();
    /// cell.try_acquire_n(old, 0, 3).unwrap()?; // 3 permits owed
    /// let moved = cell.retire_into(old, new, 0).unwrap();
    /// assert_eq!(cell.tat(), None); // retired
    /// assert_eq!(moved.available(new, 0), 1); // still 3 owed
    /// assert!(cell.retire_into(old, new, 0).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retire_into<'a>(
        &self,
        from: impl Into<QuotaOf<'a>>,
        to: Quota,
        now: u64,
    ) -> Option<GcraCell> {
        let tat = loop {
            let word = self.settled();
            if word == Self::RETIRED {
                return None;
            }
            // Acquire: the record a mover published before this word (its
            // release store) is read below as the quota `word` is in.
            if self
                .word
                .compare_exchange(word, Self::RETIRED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                break word;
            }
        };
        let old = from.into().params_now();
        let moved = crate::limiter::moved_tat(tat, now, old, Params::from(to), MAX_SPAN);
        Some(GcraCell {
            word: AtomicU64::new(moved),
            owner: Owner::new(),
        })
    }
}

#[cfg(feature = "std")]
mod refunds;
#[cfg(feature = "std")]
pub use refunds::CellRefunds;

#[cfg(all(test, not(loom)))]
mod tests;
