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

//!
//! Files: this one (the type and the plain try's fast path), `reserve`
//! (the full decision and reservations), `cancel` (giving permits back and
//! refunds), `change` (the quota in force and hot changes).

use core::time::Duration;

use once_cell::race::OnceBox;

use crate::change_lock::ChangeLock;
use crate::clock::{Clock, DefaultClock, Epoch};
use crate::error::AcquireError;
use crate::gcra::{self, Params, Refusal};
use crate::identity::Owner;
use crate::quota::Quota;
use crate::quota_versions::{QuotaVersions, generation, pack, tat};
#[cfg(feature = "std")]
use crate::refunds::Pending;
use crate::state::AtomicState;

mod cancel;
mod change;
mod reserve;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use change::moved_tat;

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
        // loom does not model `OnceBox`'s publication: make the block before
        // the limiter is shared; the models check the word and slots.
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

    /// A plain try on the first quota: one load, the decision, one CAS.
    /// `None` after a quota change or a lost CAS; `try_contended` answers.
    /// Generation 0 is never rewritten, so no version check follows the CAS.
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

    /// The full decision on a fresh reading: after a lost CAS the old one
    /// may refuse what conforms now.
    #[cold]
    #[inline(never)]
    fn try_contended(&self, n: u32) -> Result<(), AcquireError> {
        self.reserve_at(Ask::Try, self.clock.now(), n, 0, |p| p.burst)
            .map(|_| ())
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
