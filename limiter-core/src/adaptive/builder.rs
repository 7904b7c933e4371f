//! [`AdaptiveBuilder`]: the rates, burst and clock of an
//! [`AdaptiveLimiter`], validated once by [`build`](AdaptiveBuilder::build).

use super::adjustment::AdjustmentLog;
use super::controller::check;
use super::{AdaptiveLimiter, RateController};
use crate::clock::{Clock, DefaultClock};
use crate::error::QuotaError;
use crate::limiter::RateLimiter;
use crate::quota::{MAX_SPAN, Quota, saturating_nanos};
use crate::sync::AtomicU64;

/// Builds an [`AdaptiveLimiter`]; see [`AdaptiveLimiter::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct AdaptiveBuilder<P, C> {
    policy: P,
    clock: C,
    min_rate: Option<f64>,
    max_rate: Option<f64>,
    burst: u32,
}

impl<P: RateController> AdaptiveLimiter<P, DefaultClock> {
    /// A builder for a limiter driven by `policy`, on a new
    /// [`DefaultClock`] unless [`clock`](AdaptiveBuilder::clock) says
    /// otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{AdaptiveLimiter, adaptive::EwmaAimd};
    ///
    /// let adaptive = AdaptiveLimiter::builder(EwmaAimd::new(Duration::from_millis(50)))
    ///     .max_rate(200.0)
    ///     .build()?;
    /// assert_eq!(adaptive.current_rate(), 200.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(policy: P) -> AdaptiveBuilder<P, DefaultClock> {
        AdaptiveBuilder::with_clock(policy, DefaultClock::default())
    }
}

impl<P: RateController, C: Clock> AdaptiveBuilder<P, C> {
    /// A builder for a limiter driven by `policy` reading `clock` (the
    /// constructor without `std`).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, ManualClock::new())
    ///     .max_rate(50.0)
    ///     .build()?;
    /// assert_eq!(adaptive.limiter().clock().now(), 0);
    /// # use limiter_core::Clock;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(policy: P, clock: C) -> AdaptiveBuilder<P, C> {
        AdaptiveBuilder {
            policy,
            clock,
            min_rate: None,
            max_rate: None,
            burst: 1,
        }
    }

    /// The lowest rate, in permits per second (default: 1, or `max_rate`
    /// if that is lower).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let builder = AdaptiveBuilder::with_clock(policy, ManualClock::new()).max_rate(50.0);
    /// assert_eq!(builder.build()?.min_rate(), 1.0);
    /// # let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let builder = AdaptiveBuilder::with_clock(policy, ManualClock::new()).max_rate(50.0);
    /// assert_eq!(builder.min_rate(10.0).build()?.min_rate(), 10.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn min_rate(mut self, per_second: f64) -> Self {
        self.min_rate = Some(per_second);
        self
    }

    /// The highest rate and the starting one, in permits per second
    /// (required).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow, QuotaError};
    ///
    /// let policy = || PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let missing = AdaptiveBuilder::with_clock(policy(), ManualClock::new()).build();
    /// assert!(matches!(missing, Err(QuotaError::InvalidParameter { name: "max_rate", .. })));
    /// let adaptive = AdaptiveBuilder::with_clock(policy(), ManualClock::new())
    ///     .max_rate(50.0)
    ///     .build()?;
    /// assert_eq!(adaptive.max_rate(), 50.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_rate(mut self, per_second: f64) -> Self {
        self.max_rate = Some(per_second);
        self
    }

    /// The burst at every rate (default 1).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, ManualClock::new())
    ///     .max_rate(10.0)
    ///     .burst(3)
    ///     .build()?;
    /// assert_eq!(adaptive.limiter().available(), 3);
    /// assert!(adaptive.try_acquire_n(3).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }

    /// Reads `clock` instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{AdaptiveLimiter, Clock, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveLimiter::builder(policy)
    ///     .max_rate(10.0)
    ///     .clock(ManualClock::starting_at(7))
    ///     .build()?;
    /// assert_eq!(adaptive.limiter().clock().now(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> AdaptiveBuilder<P, C2> {
        AdaptiveBuilder {
            policy: self.policy,
            clock,
            min_rate: self.min_rate,
            max_rate: self.max_rate,
            burst: self.burst,
        }
    }

    /// The limiter, full, at `max_rate`; its first interval starts now.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] for a missing `max_rate`, a
    /// `min_rate` above it, an interval of zero or beyond
    /// [`MAX_SPAN`], or bad policy parameters; the errors of
    /// [`Quota::from_rate`] and [`Quota::with_burst`] when either end of
    /// the range cannot be a quota with this burst.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::QuotaError;
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let inverted = AdaptiveBuilder::with_clock(policy, ManualClock::new())
    ///     .min_rate(100.0)
    ///     .max_rate(10.0)
    ///     .build();
    /// assert!(matches!(inverted, Err(QuotaError::InvalidParameter { name: "min_rate", .. })));
    /// ```
    pub fn build(self) -> Result<AdaptiveLimiter<P, C>, QuotaError> {
        let Some(max_rate) = self.max_rate else {
            return Err(QuotaError::InvalidParameter {
                name: "max_rate",
                requirement: "set with `max_rate`",
            });
        };
        let min_rate = self
            .min_rate
            .unwrap_or(if max_rate < 1.0 { max_rate } else { 1.0 });
        let top = Quota::from_rate(max_rate)?.with_burst(self.burst)?;
        Quota::from_rate(min_rate)?.with_burst(self.burst)?;
        check(min_rate <= max_rate, "min_rate", "at most max_rate")?;
        let interval = saturating_nanos(self.policy.interval());
        check(
            interval > 0 && interval <= MAX_SPAN,
            "interval",
            "above zero and at most MAX_SPAN",
        )?;
        self.policy.validate()?;
        let start = self.clock.now().min(MAX_SPAN);
        Ok(AdaptiveLimiter {
            limiter: RateLimiter::with_clock(top, self.clock),
            policy: self.policy,
            min_rate,
            max_rate,
            burst: self.burst,
            interval,
            rate: AtomicU64::new(max_rate.to_bits()),
            window: AtomicU64::new(start),
            admitted: AtomicU64::new(0),
            decisions: AdjustmentLog::new(),
        })
    }
}
