//! [`PriorityLimiter`]: priority tiers sharing one GCRA state.
//!
//! Separate limiters per class would let low-priority traffic take what
//! high-priority traffic needs. Here every class decides on the *same* state
//! word as a [`RateLimiter`], but class `i` may admit only while it leaves at
//! least `(1 − shares[i])·burst` permits of the burst unused:
//!
//! ```text
//! headroom_i = ceil((1 − shares[i]) · burst)         permits kept for higher classes
//! usable_i   = burst − headroom_i
//! admit n    iff  max(tat, now) + n·t ≤ now + usable_i·t
//! ```
//!
//! `shares[0]` must be 1.0 (the highest class may use the whole burst) and
//! shares may not increase with the class number. With burst 10 and shares
//! `[1.0, 0.5]`, an idle limiter lets class 1 take 5 and class 0 the other 5;
//! once class 1 has taken 5 it is denied while class 0 still gets 5.
//!
//! The headroom is exact, rounded up: `usable_i = ⌊shares[i] · burst⌋` in
//! integer arithmetic, so a lower class never gets more than its share and
//! any share below 1.0 leaves class 0 at least one permit. A share written
//! as a decimal of at most nine places (0.3, 0.7, 0.999999999) is that
//! decimal, held in parts per billion (usable: one multiply and a division
//! by a constant); any other share is its exact binary value, a 53-bit
//! mantissa and a shift (usable: one multiply and a shift). Either way the
//! hot path stays in integers.
//!
//! # Starvation freedom of class 0
//!
//! A lower class can only move `tat` to at most `now + usable_i·t`, so at any
//! instant it leaves class 0 at least `headroom_i` permits. Therefore only
//! class 0 may reserve *future* slots: a lower class reserving ahead would
//! push `tat` past `now + burst·t` and make class 0 wait behind it. A lower
//! class's `reserve_n` grants only what conforms now and otherwise returns
//! `RateLimited { wait }` with the exact wait (if nothing else is admitted);
//! waiting layers sleep that long and try again.
//!
//! Files: this one (the limiter), `share` (the exact shares), `class`
//! ([`PriorityClass`]), `decide` (`Decide` for both).

use alloc::vec::Vec;
use core::time::Duration;

use crate::clock::Clock;
use crate::error::{AcquireError, QuotaError};
use crate::gcra::Params;
use crate::limiter::{Ask, RateLimiter};
use crate::quota::{Quota, saturating_nanos};
use crate::reservation::Reservation;

use crate::clock::DefaultClock;
use share::Share;

mod class;
mod decide;
mod share;

pub use class::PriorityClass;

/// A rate limiter whose burst is shared by priority classes, class 0 the
/// highest (see the module docs).
///
/// # Examples
///
/// ```
/// use limiter_core::{ManualClock, PriorityLimiter, Quota};
///
/// let quota = Quota::per_second(10)?.with_burst(10)?;
/// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], ManualClock::new())?;
/// assert!(limiter.try_acquire_n(1, 5).is_ok());
/// assert!(limiter.try_acquire_n(1, 1).is_err()); // class 1 has used its half
/// assert!(limiter.try_acquire_n(0, 5).is_ok()); // class 0 still gets the rest
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct PriorityLimiter<C: Clock = DefaultClock> {
    limiter: RateLimiter<C>,
    shares: Vec<Share>,
}

#[cfg(feature = "std")]
impl PriorityLimiter<DefaultClock> {
    /// Classes with the given `shares` of `quota`'s burst, on a new
    /// [`DefaultClock`].
    ///
    /// # Errors
    ///
    /// As [`PriorityLimiter::with_clock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{PriorityLimiter, Quota};
    ///
    /// let limiter = PriorityLimiter::new(Quota::per_second(10)?.with_burst(10)?, &[1.0, 0.5])?;
    /// assert_eq!(limiter.classes(), 2);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn new(quota: Quota, shares: &[f64]) -> Result<PriorityLimiter<DefaultClock>, QuotaError> {
        PriorityLimiter::with_clock(quota, shares, DefaultClock::default())
    }
}

impl<C: Clock> PriorityLimiter<C> {
    /// Classes with the given `shares` of `quota`'s burst, reading `clock`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] when `shares` is empty, `shares[0]`
    /// is not 1.0, a share is not in (0, 1], shares increase with the class
    /// number, or a share is so small that its class could never admit a
    /// permit under this burst.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// use limiter_core::QuotaError;
    /// assert_eq!(limiter.classes(), 2);
    /// let rising = PriorityLimiter::with_clock(quota, &[1.0, 0.5, 0.8], clock);
    /// assert!(matches!(rising, Err(QuotaError::InvalidParameter { name: "shares", .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(
        quota: Quota,
        shares: &[f64],
        clock: C,
    ) -> Result<PriorityLimiter<C>, QuotaError> {
        let invalid = |requirement| {
            Err(QuotaError::InvalidParameter {
                name: "shares",
                requirement,
            })
        };
        if shares.first() != Some(&1.0) {
            return invalid("non-empty, starting with 1.0 for class 0");
        }
        if shares
            .iter()
            .any(|s| !(s.is_finite() && *s > 0.0 && *s <= 1.0))
        {
            return invalid("each in (0, 1]");
        }
        if shares.windows(2).any(|w| w[1] > w[0]) {
            return invalid("non-increasing with the class number");
        }
        let shares: Vec<Share> = shares.iter().map(|&s| Share::of(s)).collect();
        if shares.iter().any(|s| s.usable(quota.burst()) == 0) {
            return invalid("large enough that share · burst is at least one permit");
        }
        Ok(PriorityLimiter {
            limiter: RateLimiter::with_clock(quota, clock),
            shares,
        })
    }

    /// How many classes there are.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// assert_eq!(limiter.classes(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn classes(&self) -> usize {
        self.shares.len()
    }

    fn share(&self, class: usize, n: u32) -> Result<Share, AcquireError> {
        self.shares
            .get(class)
            .copied()
            .ok_or(AcquireError::UnknownClass {
                class,
                classes: self.shares.len(),
                requested: n,
            })
    }

    /// Takes `n` permits for `class` if all are available to it now.
    ///
    /// # Errors
    ///
    /// [`AcquireError::UnknownClass`] for a class past the last;
    /// [`AcquireError::InsufficientCapacity`] if `n` exceeds the class's
    /// usable burst; [`AcquireError::RateLimited`] with the exact wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// use limiter_core::AcquireError;
    /// limiter.try_acquire_n(1, 5)?;
    /// assert!(limiter.try_acquire_n(1, 1).is_err()); // class 1 has used its half
    /// limiter.try_acquire_n(0, 5)?; // class 0 gets the rest
    /// assert!(matches!(limiter.try_acquire_n(2, 1), Err(AcquireError::UnknownClass { class: 2, .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_n(&self, class: usize, n: u32) -> Result<(), AcquireError> {
        self.reserve_n(class, n, Duration::ZERO).map(|_| ())
    }

    /// Claims a slot for `n` permits of `class`. Class 0 may claim a future
    /// slot within `max_wait`; lower classes are granted only what conforms
    /// now (see the module docs on starvation freedom).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](PriorityLimiter::try_acquire_n), with the wait
    /// compared to `max_wait` for class 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// limiter.try_acquire_n(0, 10)?;
    /// let r = limiter.reserve_n(0, 1, Duration::from_secs(1))?; // class 0 may wait
    /// assert_eq!(r.wait(), Duration::from_millis(100));
    /// assert!(limiter.reserve_n(1, 1, Duration::from_secs(1)).is_err()); // class 1 may not
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(
        &self,
        class: usize,
        n: u32,
        max_wait: Duration,
    ) -> Result<Reservation, AcquireError> {
        let share = self.share(class, n)?;
        let max_wait = if class == 0 {
            saturating_nanos(max_wait)
        } else {
            0
        };
        let now = self.limiter.clock().now();
        self.limiter
            .reserve_at(Ask::Reserve, now, n, max_wait, |p: Params| {
                share.usable(p.burst)
            })
    }

    /// Permits `class` could take now: the largest `n` for which
    /// [`try_acquire_n`](PriorityLimiter::try_acquire_n) would succeed.
    /// Changes nothing.
    ///
    /// # Errors
    ///
    /// [`AcquireError::UnknownClass`] (with `requested: 0`) for a class past
    /// the last.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// assert_eq!(limiter.available(0)?, 10);
    /// assert_eq!(limiter.available(1)?, 5);
    /// limiter.try_acquire_n(0, 6)?;
    /// assert_eq!((limiter.available(0)?, limiter.available(1)?), (4, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available(&self, class: usize) -> Result<u32, AcquireError> {
        let share = self.share(class, 0)?;
        Ok(self
            .limiter
            .available_within(|p: Params| share.usable(p.burst)))
    }

    /// Gives back a reservation if nothing has been decided since.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// let r = limiter.reserve_n(0, 4, Duration::ZERO)?;
    /// assert_eq!(limiter.available(0)?, 6);
    /// assert!(limiter.cancel(r));
    /// assert_eq!(limiter.available(0)?, 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, reservation: Reservation) -> bool {
        self.limiter.cancel(reservation)
    }

    /// The quota in force.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// assert_eq!(limiter.quota(), quota);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.limiter.quota()
    }

    /// Replaces the quota as [`RateLimiter::set_quota`] does; each class
    /// keeps its share of the new burst.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] (and no change) when the new burst
    /// is too small for some class's share to be at least one permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// limiter.set_quota(Quota::per_second(10)?.with_burst(4)?)?;
    /// assert_eq!(limiter.available(1)?, 2); // half of the new burst
    /// assert!(limiter.set_quota(Quota::per_second(10)?).is_err()); // half of 1 is no permit
    /// assert_eq!(limiter.quota().burst(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), QuotaError> {
        if self.shares.iter().any(|s| s.usable(quota.burst()) == 0) {
            return Err(QuotaError::InvalidParameter {
                name: "quota.burst",
                requirement: "large enough that every class's share of it is at least one permit",
            });
        }
        self.limiter.set_quota(quota);
        Ok(())
    }

    /// The clock this limiter reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// use limiter_core::Clock;
    /// clock.advance(Duration::from_millis(1));
    /// assert_eq!(limiter.clock().now(), 1_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        self.limiter.clock()
    }
}
