//! [`WarmUpBuilder`]: a [`WarmUpLimiter`] with a cold factor or a clock of
//! the caller's choice.

use core::time::Duration;

use super::WarmUpLimiter;
use crate::clock::Clock;
use crate::error::QuotaError;
use crate::quota::Quota;

/// Builds a [`WarmUpLimiter`] with a cold factor other than
/// [`DEFAULT_COLD_FACTOR`](WarmUpLimiter::DEFAULT_COLD_FACTOR); see
/// [`WarmUpLimiter::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct WarmUpBuilder<C> {
    quota: Quota,
    warm_up: Duration,
    cold_factor: f64,
    clock: C,
}

impl<C: Clock> WarmUpBuilder<C> {
    /// A builder for a limiter warming up to `quota` over `warm_up`, reading
    /// `clock` (the constructor without `std`).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpBuilder, WarmUpLimiter};
    ///
    /// let limiter =
    ///     WarmUpBuilder::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())
    ///         .build()?;
    /// let plain = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())?;
    /// assert_eq!(limiter.max_permits(), plain.max_permits());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn with_clock(quota: Quota, warm_up: Duration, clock: C) -> WarmUpBuilder<C> {
        WarmUpBuilder {
            quota,
            warm_up,
            cold_factor: WarmUpLimiter::DEFAULT_COLD_FACTOR,
            clock,
        }
    }

    /// The cold interval as a multiple of the stable one (default
    /// [`DEFAULT_COLD_FACTOR`](WarmUpLimiter::DEFAULT_COLD_FACTOR), 3):
    /// finite and at least 1, checked by [`build`](WarmUpBuilder::build).
    /// 1 means no warm-up at all.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpBuilder};
    ///
    /// let limiter = WarmUpBuilder::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())
    ///     .cold_factor(1.0)
    ///     .build()?;
    /// assert!(limiter.try_acquire().is_ok());
    /// // No warm-up: the second request waits the stable interval, 500 ms.
    /// let wait = limiter.reserve_n(1, Duration::MAX)?.wait();
    /// assert_eq!(wait, Duration::from_millis(500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cold_factor(mut self, cold_factor: f64) -> WarmUpBuilder<C> {
        self.cold_factor = cold_factor;
        self
    }

    /// Reads `clock` instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{Clock, ManualClock, Quota, WarmUpLimiter};
    ///
    /// let limiter = WarmUpLimiter::builder(Quota::per_second(2)?, Duration::from_secs(4))
    ///     .clock(ManualClock::starting_at(5))
    ///     .build()?;
    /// assert_eq!(limiter.clock().now(), 5);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> WarmUpBuilder<C2> {
        WarmUpBuilder {
            quota: self.quota,
            warm_up: self.warm_up,
            cold_factor: self.cold_factor,
            clock,
        }
    }

    /// The limiter, cold.
    ///
    /// # Errors
    ///
    /// As [`WarmUpLimiter::with_clock`], and
    /// [`QuotaError::InvalidParameter`] naming `cold_factor` unless it is
    /// finite and at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, QuotaError, WarmUpBuilder};
    ///
    /// let built = WarmUpBuilder::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())
    ///     .cold_factor(0.5)
    ///     .build();
    /// assert!(matches!(built, Err(QuotaError::InvalidParameter { name: "cold_factor", .. })));
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn build(self) -> Result<WarmUpLimiter<C>, QuotaError> {
        WarmUpLimiter::assemble(self.quota, self.warm_up, self.cold_factor, self.clock)
    }
}
