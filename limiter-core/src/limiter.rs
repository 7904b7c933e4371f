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
use crate::quota::{Quota, saturating_nanos};
use crate::quota_slots::{QuotaSlots, generation, next_generation, pack, tat};
use crate::reservation::Reservation;
use crate::state::AtomicState;

#[cfg(feature = "std")]
use crate::clock::MonotonicClock;

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
#[cfg(feature = "std")]
#[derive(Debug)]
pub struct RateLimiter<C: Clock = MonotonicClock> {
    state: AtomicState,
    slots: QuotaSlots,
    clock: C,
}

/// A lock-free GCRA rate limiter whose whole state is one `AtomicU64`.
#[cfg(not(feature = "std"))]
#[derive(Debug)]
pub struct RateLimiter<C: Clock> {
    state: AtomicState,
    slots: QuotaSlots,
    clock: C,
}

#[cfg(feature = "std")]
impl RateLimiter<MonotonicClock> {
    /// A full limiter for `quota` on a new [`MonotonicClock`].
    pub fn new(quota: Quota) -> RateLimiter<MonotonicClock> {
        RateLimiter::with_clock(quota, MonotonicClock::new())
    }
}

impl<C: Clock> RateLimiter<C> {
    /// A full limiter for `quota` reading `clock`.
    pub fn with_clock(quota: Quota, clock: C) -> RateLimiter<C> {
        RateLimiter {
            state: AtomicState::new(pack(0, 0)),
            slots: QuotaSlots::new(quota),
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
        self.reserve_at(now, n, 0).map(|_| ())
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
        self.reserve_at(now, n, saturating_nanos(max_wait))
    }

    /// The decision at a given `now`, shared by every acquiring method.
    #[inline]
    fn reserve_at(&self, now: u64, n: u32, max_wait: u64) -> Result<Reservation, AcquireError> {
        self.state.update(|word| {
            let params = self.slots.params(word);
            match gcra::reserve(tat(word), now, n, max_wait, params) {
                Ok(grant) => {
                    let after = pack(generation(word), grant.tat);
                    let reservation = Reservation {
                        permits: n,
                        ready_at: now + grant.wait,
                        wait: grant.wait,
                        before: word,
                        after,
                    };
                    Ok((after, reservation))
                }
                Err(refusal) => Err(acquire_error(refusal, n, now, params)),
            }
        })
    }

    /// Gives back the permits of `reservation` if no later decision depends on
    /// them: the state word still equals what this reservation left (no
    /// reservation or quota change came after it). Returns whether it did.
    ///
    /// Cancelling restores the state exactly as if the reservation had never
    /// been made, so it never lets the limiter admit more than its quota.
    /// Cancelling is a promise that the permits were not and will not be
    /// used. A reservation of 0 permits gives nothing back and returns
    /// `false`.
    pub fn cancel(&self, reservation: Reservation) -> bool {
        let (before, after) = reservation.words();
        reservation.permits != 0 && before != after && self.state.replace_if(after, before)
    }

    /// How many permits [`try_acquire_n`](RateLimiter::try_acquire_n) could
    /// take right now. Changes nothing; by the time the caller acts, other
    /// threads may have taken them.
    pub fn available(&self) -> u32 {
        let now = self.clock.now();
        let word = self.state.load();
        gcra::available(tat(word), now, self.slots.params(word))
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
    /// and new parameters (see [`crate::quota_slots`]).
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
        guard.write(next, new);
        let installed: Result<(), core::convert::Infallible> = self
            .state
            .update(|word| Ok((pack(next, gcra::rescale(tat(word), now, old, new)), ())));
        let Ok(()) = installed;
        drop(guard);
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// The public error for a refusal of `n` permits at `now` under `params`.
pub(crate) fn acquire_error(refusal: Refusal, n: u32, now: u64, params: Params) -> AcquireError {
    match refusal {
        Refusal::Insufficient => AcquireError::InsufficientCapacity {
            requested: n,
            burst: params.burst,
        },
        Refusal::Wait(wait) => AcquireError::RateLimited {
            wait: Duration::from_nanos(wait),
        },
        Refusal::OutOfRange => AcquireError::TimeOutOfRange { now },
    }
}
