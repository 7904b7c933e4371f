//! [`RateLimiter`]: the GCRA decision of [`crate::gcra`] applied to one
//! [`AtomicState`](crate::state::AtomicState) word, with hot quota changes
//! through [`crate::quota_versions`].
//!
//! Every acquisition is: one clock read, one load of the state word, the
//! pure decision, and on admission one `compare_exchange_weak` (retried with
//! the decision recomputed from the value the failed CAS returned). A denial
//! writes nothing. Nothing allocates and nothing locks.
//!
//! # Layout
//!
//! The limiter is 128 bytes, aligned to 128 (the pair of cache lines x86_64
//! and aarch64 fetch together), so a hot limiter shares no line with its
//! neighbours: the state word, the quota it was made with (generation 0 of
//! the word, never rewritten), its epoch, identity and clock, and one
//! pointer to [`Changes`], which the first `set_quota` or `cancel` allocates:
//! the quota table of hot changes, the change lock and the refund table.
//! Until then a decision reads nothing but the limiter's own block.

use alloc::boxed::Box;
use core::time::Duration;

use once_cell::race::OnceBox;

use crate::change_lock::ChangeLock;
use crate::clock::{Clock, DefaultClock, Epoch};
use crate::debt::{ChargeAfter, Debt, charge_in_chunks};
use crate::decision::{Decide, Denial, Grant};
use crate::error::AcquireError;
use crate::gcra::{self, Params, Refusal};
use crate::identity::Owner;
use crate::quota::{Quota, saturating_nanos};
use crate::quota_versions::{
    QuotaRead, QuotaVersions, generation, next_change_generation, pack, tat,
};
#[cfg(feature = "std")]
use crate::refunds::{Pending, Refund, WordUndo};
use crate::reservation::{Headroom, Reservation, Undo};
use crate::state::AtomicState;

/// A lock-free GCRA rate limiter whose whole state is one `AtomicU64`.
///
/// A new or long-idle limiter admits `quota.burst()` permits at one instant,
/// then one per `quota.period()`. All methods take `&self`; share the limiter
/// between threads by reference or in an `Arc`.
///
/// # Memory ordering
///
/// Decisions are linearizable: each admission is one successful CAS on the
/// state word, and all CASes on it form a single total order, so no
/// interleaving admits more than the quota allows. The limiter does not order
/// *your* memory operations; it is not a lock. See `docs/design.md`.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{AcquireError, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(2)?, clock.clone());
///
/// assert!(limiter.try_acquire().is_ok());
/// assert!(limiter.try_acquire().is_ok());
/// assert_eq!(
///     limiter.try_acquire(),
///     Err(AcquireError::RateLimited { wait: Duration::from_millis(100) })
/// );
/// clock.advance(Duration::from_millis(100));
/// assert!(limiter.try_acquire().is_ok());
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug)]
#[repr(align(128))]
pub struct RateLimiter<C: Clock = DefaultClock> {
    /// `[gen:4 | tat:60]`, `tat` in ns since `epoch` (see `quota_versions`).
    state: AtomicState,
    /// The quota of generation 0: the one the limiter was made with.
    first: Params,
    /// Allocated by the first quota change or cancellation.
    changes: OnceBox<Changes>,
    epoch: Epoch,
    owner: Owner,
    clock: C,
}

/// What only quota changes and cancellations need, out of the limiter's
/// block (module docs, "Layout").
#[derive(Debug)]
struct Changes {
    /// The quotas of generations 1 to 15, and the count of changes.
    quotas: QuotaVersions,
    /// Serialises quota changes, cancellations and the refund table.
    lock: ChangeLock,
    /// Whether the refund table may hold refunds (read without the lock).
    #[cfg(feature = "std")]
    pending: Pending,
}

/// What a decision is for: a plain try, or a reservation that may be
/// cancelled (and may be served from a refund).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// `try_acquire*`: now or never, not cancellable.
    Try,
    /// `reserve_n*`: a slot within `max_wait`, cancellable.
    Reserve,
}

/// What a successful decision wrote: the new `tat` at limiter time `now`,
/// under `params`, for a caller that may use `usable` permits of the burst.
#[derive(Debug, Clone, Copy)]
struct Decided {
    tat: u64,
    now: u64,
    params: Params,
    usable: u32,
}

#[cfg(feature = "std")]
impl RateLimiter<DefaultClock> {
    /// A full limiter for `quota` on a new [`DefaultClock`] (the TSC clock
    /// with the default features).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::new(Quota::per_second(100)?.with_burst(10)?);
    /// assert_eq!(limiter.available(), 10);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn new(quota: Quota) -> RateLimiter<DefaultClock> {
        RateLimiter::with_clock(quota, DefaultClock::default())
    }
}

impl<C: Clock> RateLimiter<C> {
    /// A full limiter for `quota` reading `clock`.
    ///
    /// The limiter counts time from `clock`'s reading now, its epoch, so any
    /// clock origin works (the Unix epoch, a counter, a process start): the
    /// [`MAX_SPAN`](crate::clock::MAX_SPAN) of 36.5 years is measured from the
    /// limiter's creation. Past it (or past the clock's `u64::MAX`, if that
    /// comes first) every call answers [`AcquireError::TimeOutOfRange`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// // A clock counting from the Unix epoch works as well as any other.
    /// let clock = ManualClock::starting_at(1_800_000_000_000_000_000);
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, clock);
    /// assert!(limiter.try_acquire().is_ok());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> RateLimiter<C> {
        let limiter = RateLimiter {
            state: AtomicState::new(pack(0, 0)),
            first: Params::from(quota),
            changes: OnceBox::new(),
            epoch: Epoch::at(clock.now()),
            owner: Owner::new(),
            clock,
        };
        // loom does not model `OnceBox`'s pointer, so it would not see the
        // block's atomics published: the models make it here, before the
        // limiter is shared, and check the protocol on the word and slots.
        #[cfg(loom)]
        limiter.changes();
        limiter
    }

    /// Takes one permit if it is available now.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](RateLimiter::try_acquire_n) with `n = 1`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// assert!(limiter.try_acquire().is_ok());
    /// let denied = limiter.try_acquire().unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits if all are available now; takes none otherwise.
    /// `n == 0` succeeds and changes nothing.
    ///
    /// # Errors
    ///
    /// * [`AcquireError::InsufficientCapacity`] if `n > burst`: never
    ///   satisfiable under this quota.
    /// * [`AcquireError::RateLimited`] with the exact wait until `n` permits
    ///   would be available. Nothing is written.
    /// * [`AcquireError::TimeOutOfRange`] if the clock reads more than
    ///   [`MAX_SPAN`](crate::clock::MAX_SPAN) past the limiter's creation.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{AcquireError, ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(3)?, ManualClock::new());
    /// assert!(limiter.try_acquire_n(2).is_ok());
    /// assert!(limiter.try_acquire_n(2).is_err()); // only one left: takes none
    /// assert_eq!(limiter.available(), 1);
    /// assert_eq!(
    ///     limiter.try_acquire_n(4),
    ///     Err(AcquireError::InsufficientCapacity { requested: 4, burst: 3 })
    /// );
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        let clock_now = self.clock.now();
        match self.try_uncontended(clock_now, n) {
            Some(outcome) => outcome,
            None => self.try_contended(n),
        }
    }

    /// A plain try (no wait, the whole burst, nothing to cancel) on the
    /// limiter's first quota, and nothing else: one load, the pure decision,
    /// one CAS. `None` when it cannot answer alone (a quota change named
    /// another generation, or its CAS was lost):
    /// [`try_contended`](RateLimiter::try_contended) then decides afresh.
    /// Generation 0 is never rewritten, so no version check follows the CAS
    /// (`quota_versions`, rule 2); kept this small so that a caller's loop
    /// can inline it.
    #[inline(always)]
    fn try_uncontended(&self, clock_now: u64, n: u32) -> Option<Result<(), AcquireError>> {
        // A reading behind the epoch or past the span: the full path answers.
        let now = self.epoch.elapsed_in_range(clock_now)?;
        let word = self.state.load();
        if generation(word) != 0 {
            return None;
        }
        let p = self.first;
        match gcra::reserve_within(tat(word), now, n, 0, p, p.burst, self.epoch.limit()) {
            Ok(_) if n == 0 => Some(Ok(())),
            Ok(grant) => {
                #[cfg(all(test, not(loom)))]
                tests::stall_before_cas();
                // Generation 0: the word is its tat.
                self.state.replace_if(word, grant.tat).then_some(Ok(()))
            }
            // A refusal writes nothing, and was decided on a whole quota.
            Err(refusal) => Some(Err(acquire_error(refusal, n, clock_now, p.burst))),
        }
    }

    /// A plain try after [`try_uncontended`](RateLimiter::try_uncontended)
    /// could not answer: the whole decision on a fresh clock reading (after
    /// a lost CAS the reading taken before the winner's decision may no
    /// longer allow what conforms now).
    #[cold]
    #[inline(never)]
    fn try_contended(&self, n: u32) -> Result<(), AcquireError> {
        self.reserve_at(Ask::Try, self.clock.now(), n, 0, |p| p.burst)
            .map(|_| ())
    }

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
    // Inlined into its caller (a front end's decision): the grant is then
    // built where it is used, not moved out through three results.
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
                // Read before the decision: a quota change that begins after
                // this read moves the word, so our CAS fails and we read it
                // again.
                let changes = if cancellable { self.changes_made() } else { 0 };
                let read = self.read(word);
                let usable = usable(read.params);
                match gcra::reserve_within(tat(word), now, n, max_wait, read.params, usable, limit)
                {
                    Ok(grant) => {
                        #[cfg(all(test, not(loom)))]
                        tests::stall_before_cas();
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
                        // The slot was rewritten while we decided: the CAS
                        // may have matched a word that now names another
                        // quota (`quota_versions`, rule 2). Void: grant nothing
                        // on it, keep its permits counted, decide again.
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
                // A refusal decided again after a lost CAS used the reading
                // taken before the winner's (later) decision: the winner
                // may have moved the word past what that reading allows. Read
                // the clock once more and decide afresh, so contention alone
                // does not refuse a request that conforms now.
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
    fn reservation(&self, n: u32, slot: u64, now: u64, undo: Undo) -> Reservation {
        Reservation {
            permits: n,
            // slot ≤ the new tat ≤ epoch.limit(): converts without overflow.
            ready_at: self.epoch.to_clock(slot),
            wait: slot - now,
            owner: self.owner,
            undo,
        }
    }

    /// `fresh` would wait and the refund table is not empty: hands out a
    /// refund that comes sooner instead, giving `fresh` back.
    #[cfg(feature = "std")]
    #[cold]
    fn prefer_refund(&self, fresh: Reservation, now: u64, max_wait: u64) -> Reservation {
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
    fn refunded(&self, refund: Refund, now: u64, changes: u64) -> Reservation {
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
    fn give_back(
        &self,
        guard: &mut crate::change_lock::ChangeGuard<'_>,
        reservation: Reservation,
        now: u64,
    ) -> bool {
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
        guard: &mut crate::change_lock::ChangeGuard<'_>,
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
    fn collapse(&self, guard: &mut crate::change_lock::ChangeGuard<'_>, now: u64) {
        guard.refunds().collapse(
            self.owner.get(),
            now,
            &self.changes().pending,
            || self.state.load(),
            |after, before| self.state.replace_if(after, before),
        );
    }

    /// How many permits [`try_acquire_n`](RateLimiter::try_acquire_n) could
    /// take right now: exactly the largest `n` it would grant, including
    /// near the end of the limiter's span. Changes nothing; by the time the
    /// caller acts, other threads may have taken them.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(5)?, clock.clone());
    /// limiter.try_acquire_n(5)?;
    /// clock.advance(Duration::from_millis(250));
    /// assert_eq!(limiter.available(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available(&self) -> u32 {
        self.available_within(|p| p.burst)
    }

    /// As [`available`](RateLimiter::available) for a caller that may use
    /// `usable(params)` permits of the burst.
    pub(crate) fn available_within(&self, usable: impl Fn(Params) -> u32) -> u32 {
        let now = self.epoch.elapsed(self.clock.now());
        let word = self.state.load();
        let params = self.read(word).params;
        gcra::available_within(tat(word), now, params, usable(params), self.epoch.limit())
    }

    /// The quota in force.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// limiter.set_quota(Quota::per_second(20)?);
    /// assert_eq!(limiter.quota(), Quota::per_second(20)?);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.read(self.state.load()).params.into()
    }

    /// Replaces the quota, atomically as a unit, keeping the fill level in
    /// permits.
    ///
    /// Where the limiter owes time (`tat > now`), the debt `tat − now` is
    /// scaled by `t_new / t_old` (rounded up), so a limiter that was half
    /// empty stays half empty in permits; an idle limiter stays full at the
    /// new burst. Reservations already handed out keep their `ready_at`
    /// times, but can no longer be cancelled. No decision ever mixes the old
    /// and new parameters (see `docs/design.md`, "State encoding").
    ///
    /// Refunds of cancelled reservations (see [`cancel`](RateLimiter::cancel))
    /// belong to the old quota and are dropped.
    ///
    /// Quota changes are serialised with each other (and with `cancel`) by a
    /// lock that the acquisition path never touches.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(4)?, ManualClock::new());
    /// limiter.try_acquire_n(2)?; // half empty
    /// limiter.set_quota(Quota::per_second(1)?.with_burst(4)?);
    /// assert_eq!(limiter.available(), 2); // still half empty, in permits
    /// assert_eq!(limiter.try_acquire_n(3).unwrap_err().retry_after(), Some(Duration::from_secs(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) {
        let changes = self.changes();
        #[cfg_attr(not(feature = "std"), allow(unused_mut))]
        let mut guard = changes.lock.lock();
        let now = self.epoch.elapsed(self.clock.now());
        let limit = self.epoch.limit();
        let new = Params::from(quota);
        let current = self.state.load();
        // Only setters change the generation and we hold the lock, so the
        // generation (and hence `old`) is fixed for the whole loop.
        let old = self.read(current).params;
        let next = next_change_generation(generation(current));
        changes.quotas.begin_change(&guard, next, new);
        let installed: Result<(), core::convert::Infallible> = self.state.update(|word| {
            let moved = moved_tat(tat(word), now, old, new, limit);
            Ok((pack(next, moved), ()))
        });
        let Ok(()) = installed;
        #[cfg(feature = "std")]
        guard.refunds().clear(&changes.pending);
        drop(guard);
    }

    /// The quota the state word `word` names, as a decision reads it: the
    /// limiter's own for generation 0, else its entry of the change table.
    #[inline]
    fn read(&self, word: u64) -> QuotaRead {
        if generation(word) == 0 {
            return QuotaRead::first(self.first);
        }
        // A word past generation 0 was installed by a quota change, after
        // the table was made (and published by the word's release CAS).
        let Some(changes) = self.changes.get() else {
            unreachable!("a changed quota without a change table")
        };
        changes.quotas.read(word)
    }

    /// Whether the quota `read` came from is still the one it read
    /// (`quota_versions`, rule 2). Generation 0 is never rewritten.
    #[inline]
    fn unchanged_since(&self, read: QuotaRead) -> bool {
        read.generation() == 0
            || self
                .changes
                .get()
                .is_some_and(|changes| changes.quotas.unchanged_since(read))
    }

    /// How many quota changes have begun (0 before the first).
    #[inline]
    fn changes_made(&self) -> u64 {
        self.changes
            .get()
            .map_or(0, |changes| changes.quotas.changes())
    }

    /// Whether the refund table may hold refunds (a hint, read without the
    /// lock).
    #[cfg(feature = "std")]
    #[inline]
    fn refunds_pending(&self) -> bool {
        self.changes
            .get()
            .is_some_and(|changes| changes.pending.any())
    }

    /// The change table, made on first use. Threads that race to make it
    /// all use the one that was published first.
    fn changes(&self) -> &Changes {
        self.changes.get_or_init(|| {
            Box::new(Changes {
                quotas: QuotaVersions::new(self.first.into()),
                lock: ChangeLock::new(),
                #[cfg(feature = "std")]
                pending: Pending::default(),
            })
        })
    }

    /// The clock this limiter reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Clock, ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::starting_at(7));
    /// assert_eq!(limiter.clock().now(), 7);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
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

/// The `tat` a quota change installs: the fill level kept in permits
/// ([`gcra::rescale`]), and an idle `tat` (before `now`) moved up to `now`,
/// which no reading at or after `now` can tell apart and which is stricter
/// for a clock that steps back. Moving it keeps 16 quota changes on an idle
/// limiter from returning the word to a value a stalled decision loaded,
/// though correctness does not rest on it (see [`crate::quota_versions`] on
/// ABA). A clock past the limit decides nothing, so it moves nothing: an
/// idle `tat` is left as it is (rescale keeps it), and a clock that comes
/// back into range finds the limiter as it was.
pub(crate) fn moved_tat(tat: u64, now: u64, old: Params, new: Params, limit: u64) -> u64 {
    if tat < now && now <= limit {
        now
    } else {
        gcra::rescale(tat, now, old, new, limit)
    }
}

/// The public error for a refusal of `n` permits at the clock reading `now`,
/// for a caller that may use `burst` permits of the burst.
pub(crate) fn acquire_error(refusal: Refusal, n: u32, now: u64, burst: u32) -> AcquireError {
    match refusal {
        Refusal::Insufficient => AcquireError::InsufficientCapacity {
            requested: n,
            burst,
        },
        Refusal::Wait(wait) => AcquireError::RateLimited {
            wait: Duration::from_nanos(wait),
        },
        Refusal::OutOfRange => AcquireError::TimeOutOfRange { now },
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::boxed::Box;
    use std::cell::RefCell;

    use super::*;
    use crate::ManualClock;

    std::thread_local! {
        /// Run once by the next decision of this thread, between its load
        /// of the word and its CAS: a deterministic stall.
        static STALL: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
    }

    pub(super) fn stall_before_cas() {
        if let Some(stall) = STALL.with(|s| s.borrow_mut().take()) {
            stall();
        }
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn the_change_table_is_432_bytes_and_made_on_first_use() {
        // The size the README states for the block a change allocates.
        assert_eq!(core::mem::size_of::<Changes>(), 432);
        let limiter = RateLimiter::with_clock(Quota::per_second(10).unwrap(), ManualClock::new());
        limiter.try_acquire().unwrap();
        let _ = limiter.reserve_n(1, Duration::MAX).unwrap();
        assert!(
            limiter.changes.get().is_none(),
            "decisions allocate nothing"
        );
        limiter.set_quota(Quota::per_second(20).unwrap());
        assert!(limiter.changes.get().is_some());
    }

    #[test]
    fn a_refusal_after_a_lost_cas_reads_the_clock_again() {
        // t = 100 ms, burst 2, idle at 0. A decision reads the clock at 0;
        // before its CAS the clock reaches 1 s and another caller takes one
        // permit (tat 1.1 s). On the stale reading the retry would refuse
        // (it needs tat ≤ 0.1 s); at 1 s one permit is free.
        let clock = ManualClock::new();
        let quota = Quota::per_second(10).unwrap().with_burst(2).unwrap();
        let limiter = std::sync::Arc::new(RateLimiter::with_clock(quota, clock.clone()));
        let other = std::sync::Arc::clone(&limiter);
        STALL.with(|s| {
            *s.borrow_mut() = Some(Box::new(move || {
                clock.set(1_000_000_000);
                other.try_acquire().unwrap();
            }))
        });
        assert_eq!(limiter.try_acquire(), Ok(()));
        // Both permits of the burst are now taken at 1 s.
        assert!(limiter.try_acquire().is_err());
    }

    #[test]
    fn fifteen_quota_changes_during_a_decision_cannot_admit_under_the_old_quota() {
        // A frozen clock and an idle limiter: every change leaves tat = now,
        // so after 15 changes (through generations 2 to 15 and back to 1) the
        // word is bit-identical to the one the stalled decision loaded, but
        // its generation's slot now holds a burst of 1.
        let big = Quota::per_second(1_000).unwrap().with_burst(100).unwrap();
        let small = Quota::per_second(1_000).unwrap();
        let limiter = std::sync::Arc::new(RateLimiter::with_clock(small, ManualClock::new()));
        limiter.set_quota(big); // generation 1
        let word = limiter.state.load();
        let setter = std::sync::Arc::clone(&limiter);
        STALL.with(|s| {
            *s.borrow_mut() = Some(Box::new(move || {
                for _ in 0..15 {
                    setter.set_quota(small);
                }
                assert_eq!(setter.state.load(), word, "the ABA precondition");
            }))
        });
        assert_eq!(
            limiter.try_acquire_n(100),
            Err(AcquireError::InsufficientCapacity {
                requested: 100,
                burst: 1
            }),
            "decided under the quota the word names now"
        );
        assert_eq!(limiter.quota(), small);
    }

    #[test]
    fn a_speed_up_and_slow_down_during_a_decision_cannot_admit_under_the_old_quota() {
        // An owed tat returns to the same value when the rate is doubled and
        // halved again; fifteen such changes bring the word back.
        let clock = ManualClock::new();
        let slow = Quota::per_second(10).unwrap().with_burst(4).unwrap();
        let fast = Quota::per_second(20).unwrap().with_burst(4).unwrap();
        let tiny = Quota::per_second(10).unwrap().with_burst(1).unwrap();
        let limiter = std::sync::Arc::new(RateLimiter::with_clock(slow, clock));
        limiter.set_quota(slow); // generation 1
        limiter.try_acquire_n(2).unwrap(); // owes 200 ms
        let word = limiter.state.load();
        let setter = std::sync::Arc::clone(&limiter);
        STALL.with(|s| {
            *s.borrow_mut() = Some(Box::new(move || {
                for i in 0..14 {
                    setter.set_quota(if i % 2 == 0 { fast } else { slow });
                }
                setter.set_quota(tiny); // same t as slow: the debt is kept
                assert_eq!(setter.state.load(), word, "the ABA precondition");
            }))
        });
        // Under `slow` 2 more permits fit; under `tiny` (burst 1) none.
        assert_eq!(
            limiter.try_acquire_n(2),
            Err(AcquireError::InsufficientCapacity {
                requested: 2,
                burst: 1
            })
        );
        // The void CAS's 2 permits stay counted (200 ms more debt): the
        // stalled decision made the limiter stricter, never looser. (A weak
        // CAS may also fail spuriously, as miri makes it do and LL/SC
        // targets may; the decision is then made again on the current word,
        // with nothing void. The loom model pins both outcomes.)
        let debt = limiter.try_acquire().unwrap_err().retry_after();
        let void = Some(Duration::from_millis(400));
        let retried = Some(Duration::from_millis(200));
        assert!(debt == void || debt == retried, "{debt:?}");
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
