//! [`RateLimiter`]: the GCRA decision of [`crate::gcra`] applied to one
//! [`AtomicState`](crate::state::AtomicState) word, with hot quota changes
//! through [`crate::quota_slots`].
//!
//! Every acquisition is: one clock read, one load of the state word, the
//! pure decision, and on admission one `compare_exchange_weak` (retried with
//! the decision recomputed from the value the failed CAS returned). A denial
//! writes nothing. Nothing allocates and nothing locks.

use core::time::Duration;

use crate::clock::Clock;
use crate::error::AcquireError;
use crate::gcra::{self, Params, Refusal};
use crate::identity::Owner;
use crate::quota::{Quota, saturating_nanos};
use crate::quota_slots::{QuotaSlots, generation, next_generation, pack, tat};
use crate::reservation::{Reservation, Undo};
use crate::state::AtomicState;

use crate::clock::DefaultClock;

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
pub struct RateLimiter<C: Clock = DefaultClock> {
    state: AtomicState,
    slots: QuotaSlots,
    owner: Owner,
    clock: C,
}

#[cfg(feature = "std")]
impl RateLimiter<DefaultClock> {
    /// A full limiter for `quota` on a new [`DefaultClock`] (the TSC clock
    /// with the default features).
    pub fn new(quota: Quota) -> RateLimiter<DefaultClock> {
        RateLimiter::with_clock(quota, DefaultClock::default())
    }
}

impl<C: Clock> RateLimiter<C> {
    /// A full limiter for `quota` reading `clock`.
    pub fn with_clock(quota: Quota, clock: C) -> RateLimiter<C> {
        RateLimiter {
            state: AtomicState::new(pack(0, 0)),
            slots: QuotaSlots::new(quota),
            owner: Owner::new(),
            clock,
        }
    }

    /// Takes one permit if it is available now.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](RateLimiter::try_acquire_n) with `n = 1`.
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
    /// * [`AcquireError::TimeOutOfRange`] if the clock reads past
    ///   [`MAX_SPAN`](crate::MAX_SPAN).
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        let now = self.clock.now();
        self.reserve_at::<false>(now, n, 0, |p| p.burst).map(|_| ())
    }

    /// Claims the earliest slot for `n` permits and says how long to wait for
    /// it, if that is at most `max_wait`; otherwise fails at once and changes
    /// nothing. Slots are handed out in CAS order: first come, first served.
    ///
    /// # Errors
    ///
    /// * [`AcquireError::InsufficientCapacity`] if `n > burst`.
    /// * [`AcquireError::RateLimited`] with the wait the slot would need, if
    ///   it exceeds `max_wait`. Nothing is written.
    /// * [`AcquireError::TimeOutOfRange`] if the clock, or the slot, lies past
    ///   [`MAX_SPAN`](crate::MAX_SPAN).
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
        self.reserve_at::<true>(now, n, saturating_nanos(max_wait), |p| p.burst)
    }

    /// The decision at a given `now`, shared by every acquiring method.
    /// `usable(params)` is how much of the quota's burst this caller may use
    /// (all of it, except for the lower priority tiers). `CANCELLABLE`
    /// reservations record the quota-change count so `cancel` can check it;
    /// plain tries skip that load.
    #[inline]
    pub(crate) fn reserve_at<const CANCELLABLE: bool>(
        &self,
        now: u64,
        n: u32,
        max_wait: u64,
        usable: impl Fn(Params) -> u32,
    ) -> Result<Reservation, AcquireError> {
        self.state.update(|word| {
            // Read before the decision: a quota change that begins after this
            // read moves the word, so our CAS fails and we read it again.
            let changes = if CANCELLABLE { self.slots.changes() } else { 0 };
            let params = self.slots.params(word);
            let usable = usable(params);
            match gcra::reserve_within(tat(word), now, n, max_wait, params, usable) {
                Ok(grant) => {
                    let after = pack(generation(word), grant.tat);
                    let reservation = Reservation {
                        permits: n,
                        ready_at: now + grant.wait,
                        wait: grant.wait,
                        owner: self.owner,
                        undo: if CANCELLABLE && n != 0 {
                            Undo::Word {
                                before: word,
                                after,
                                changes,
                            }
                        } else {
                            Undo::Nothing
                        },
                    };
                    Ok((after, reservation))
                }
                Err(refusal) => Err(acquire_error(refusal, n, now, usable)),
            }
        })
    }

    /// Gives back the permits of `reservation` if no later decision depends on
    /// them: no quota change since it was made (checked on a full 64-bit
    /// count) and the state word still equals what this reservation left (no
    /// reservation came after it). Returns whether it did.
    ///
    /// Cancelling restores the state exactly as if the reservation had never
    /// been made, so it never lets the limiter admit more than its quota.
    /// Cancelling is a promise that the permits were not and will not be
    /// used. A reservation of 0 permits gives nothing back and returns
    /// `false`.
    pub fn cancel(&self, reservation: Reservation) -> bool {
        if reservation.owner != self.owner {
            return false;
        }
        match reservation.undo {
            Undo::Word {
                before,
                after,
                changes,
            } => {
                // A quota change that begins after this check moves the word
                // before it can matter, so the CAS below then fails.
                self.slots.changes() == changes && self.state.replace_if(after, before)
            }
            _ => false,
        }
    }

    /// How many permits [`try_acquire_n`](RateLimiter::try_acquire_n) could
    /// take right now. Changes nothing; by the time the caller acts, other
    /// threads may have taken them.
    pub fn available(&self) -> u32 {
        self.available_within(|p| p.burst)
    }

    /// As [`available`](RateLimiter::available) for a caller that may use
    /// `usable(params)` permits of the burst.
    pub(crate) fn available_within(&self, usable: impl Fn(Params) -> u32) -> u32 {
        let now = self.clock.now();
        let word = self.state.load();
        let params = self.slots.params(word);
        let headroom = params.burst - usable(params);
        gcra::available(tat(word), now, params).saturating_sub(headroom)
    }

    /// The quota in force.
    pub fn quota(&self) -> Quota {
        self.slots.params(self.state.load()).into()
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
    /// Quota changes are serialised with each other by a spin lock that the
    /// acquisition path never touches.
    pub fn set_quota(&self, quota: Quota) {
        let guard = self.slots.lock();
        let now = self.clock.now();
        let new = Params::from(quota);
        let current = self.state.load();
        // Only setters change the generation and we hold the lock, so the
        // generation (and hence `old`) is fixed for the whole loop.
        let old = self.slots.params(current);
        let next = next_generation(generation(current));
        guard.begin_change(next, new);
        let installed: Result<(), core::convert::Infallible> = self
            .state
            .update(|word| Ok((pack(next, moved_tat(tat(word), now, old, new)), ())));
        let Ok(()) = installed;
        drop(guard);
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// The `tat` a quota change installs: the fill level kept in permits
/// ([`gcra::rescale`]), and an idle `tat` (before `now`) moved up to `now`,
/// which no reading at or after `now` can tell apart and which is stricter
/// for a clock that steps back. Moving it keeps 16 quota changes on an idle
/// limiter from returning the word to a value a stalled decision loaded (see
/// [`crate::quota_slots`] on ABA).
fn moved_tat(tat: u64, now: u64, old: Params, new: Params) -> u64 {
    // A clock past MAX_SPAN decides nothing; leave such a tat to rescale,
    // which keeps it (tat ≤ MAX_SPAN < now).
    if tat < now && now <= crate::quota::MAX_SPAN {
        now
    } else {
        gcra::rescale(tat, now, old, new)
    }
}

/// The public error for a refusal of `n` permits at `now`, for a caller that
/// may use `burst` permits of the burst.
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
