//! [`PriorityClass`]: one class's view of a shared [`PriorityLimiter`], so
//! that a class can be handed to code that expects one limit.

use alloc::sync::Arc;
use core::time::Duration;

use super::PriorityLimiter;
use crate::clock::{Clock, DefaultClock};
use crate::error::AcquireError;
use crate::reservation::Reservation;

impl<C: Clock> PriorityLimiter<C> {
    /// A limiter acting for one class, sharing this limiter.
    ///
    /// # Errors
    ///
    /// [`AcquireError::UnknownClass`] for a class past the last.
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
    /// use std::sync::Arc;
    /// let limiter = Arc::new(limiter);
    /// let background = limiter.class(1)?;
    /// assert_eq!(background.class(), 1);
    /// assert!(background.try_acquire_n(5).is_ok());
    /// assert!(background.try_acquire().is_err());
    /// assert!(limiter.class(2).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class(self: &Arc<Self>, class: usize) -> Result<PriorityClass<C>, AcquireError> {
        self.share(class, 0)?;
        Ok(PriorityClass {
            limiter: Arc::clone(self),
            class,
        })
    }
}

/// One class's view of a shared [`PriorityLimiter`], a [`Decide`](crate::Decide) with
/// `Key = ()` usable wherever one limit is expected (the async waiting
/// layer, [`Metered`](crate::Metered)).
#[derive(Debug, Clone)]
pub struct PriorityClass<C: Clock = DefaultClock> {
    pub(super) limiter: Arc<PriorityLimiter<C>>,
    pub(super) class: usize,
}

impl<C: Clock> PriorityClass<C> {
    /// The class this view acts for.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// let limiter = Arc::new(PriorityLimiter::with_clock(quota, &[1.0, 0.5], ManualClock::new())?);
    /// assert_eq!(limiter.class(0)?.class(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class(&self) -> usize {
        self.class
    }
}

/// The class's side of [`PriorityLimiter`]'s methods.
impl<C: Clock> PriorityClass<C> {
    /// Takes one permit of this class now.
    ///
    /// # Errors
    ///
    /// As [`PriorityLimiter::try_acquire_n`].
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits of this class now, all or nothing.
    ///
    /// # Errors
    ///
    /// As [`PriorityLimiter::try_acquire_n`].
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.limiter.try_acquire_n(self.class, n)
    }

    /// Claims a slot for `n` permits of this class (a future one only for
    /// class 0).
    ///
    /// # Errors
    ///
    /// As [`PriorityLimiter::reserve_n`].
    pub fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        self.limiter.reserve_n(self.class, n, max_wait)
    }

    /// Gives back a reservation as [`PriorityLimiter::cancel`] does.
    pub fn cancel(&self, reservation: Reservation) -> bool {
        PriorityLimiter::cancel(&self.limiter, reservation)
    }
}
