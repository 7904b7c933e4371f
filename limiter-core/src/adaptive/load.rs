//! [`LoadBased`]: a rate from a load signal the caller supplies, read once
//! per interval; observations are ignored.

use core::fmt;
use core::time::Duration;

use super::controller::{Completion, DEFAULT_INTERVAL, Proposal, RateController, Reason, check};
use crate::error::QuotaError;

/// Rate from a load signal the caller supplies (CPU, queue depth, pool use)
/// in `[0, 1]`: read at the end of each interval, a load above `high`
/// (default 0.8) proposes half the base rate, below `low` (default 0.3)
/// twice the base rate, otherwise the base rate. Latencies are ignored;
/// record calls (or [`tick`](crate::AdaptiveLimiter::tick)) only drive the
/// interval.
///
/// # Examples
///
/// ```
/// use limiter_core::{adaptive::RateController, adaptive::LoadBased};
///
/// let p = LoadBased::new(500.0, || 0.9);
/// assert_eq!(p.propose(500.0).rate, 250.0);
/// ```
pub struct LoadBased<F> {
    base_rate: f64,
    load: F,
    high: f64,
    low: f64,
    interval: Duration,
}

impl<F: Fn() -> f64 + Send + Sync> LoadBased<F> {
    /// A policy around `base_rate` permits per second reading `load`.
    /// The marks are 0.8 and 0.3 and the interval is
    /// [`AdaptiveLimiter::DEFAULT_INTERVAL`](crate::AdaptiveLimiter::DEFAULT_INTERVAL)
    /// (1 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{AdaptiveLimiter, adaptive::RateController, adaptive::LoadBased};
    ///
    /// let p = LoadBased::new(500.0, || 0.5);
    /// assert_eq!(RateController::interval(&p), AdaptiveLimiter::DEFAULT_INTERVAL);
    /// assert_eq!(p.propose(123.0).rate, 500.0); // normal load: the base rate
    /// ```
    pub fn new(base_rate: f64, load: F) -> LoadBased<F> {
        LoadBased {
            base_rate,
            load,
            high: 0.8,
            low: 0.3,
            interval: DEFAULT_INTERVAL,
        }
    }

    /// The load above which the rate is halved.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{adaptive::RateController, adaptive::LoadBased};
    ///
    /// let p = LoadBased::new(500.0, || 0.7).high(0.6);
    /// assert_eq!(p.propose(500.0).rate, 250.0);
    /// ```
    #[must_use]
    pub fn high(mut self, high: f64) -> LoadBased<F> {
        self.high = high;
        self
    }

    /// The load below which the rate is doubled.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{adaptive::RateController, adaptive::LoadBased};
    ///
    /// let p = LoadBased::new(500.0, || 0.4).low(0.5);
    /// assert_eq!(p.propose(500.0).rate, 1000.0);
    /// ```
    #[must_use]
    pub fn low(mut self, low: f64) -> LoadBased<F> {
        self.low = low;
        self
    }

    /// How often the load is read.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::LoadBased};
    ///
    /// let p = LoadBased::new(500.0, || 0.5).interval(Duration::from_secs(10));
    /// assert_eq!(RateController::interval(&p), Duration::from_secs(10));
    /// ```
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> LoadBased<F> {
        self.interval = interval;
        self
    }
}

impl<F> fmt::Debug for LoadBased<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadBased")
            .field("base_rate", &self.base_rate)
            .field("high", &self.high)
            .field("low", &self.low)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl<F: Fn() -> f64 + Send + Sync> RateController for LoadBased<F> {
    fn interval(&self) -> Duration {
        self.interval
    }

    fn observe(&self, _latency: Duration, _outcome: Completion) {}

    fn propose(&self, current: f64) -> Proposal {
        let load = (self.load)();
        let (rate, reason) = if !load.is_finite() {
            (current, Reason::NoSignal)
        } else if load > self.high {
            (self.base_rate * 0.5, Reason::LoadHigh { load })
        } else if load < self.low {
            (self.base_rate * 2.0, Reason::LoadLow { load })
        } else {
            (self.base_rate, Reason::LoadNormal { load })
        };
        Proposal { rate, reason }
    }

    fn validate(&self) -> Result<(), QuotaError> {
        check(
            self.base_rate.is_finite() && self.base_rate > 0.0,
            "base_rate",
            "a finite number of permits per second above 0",
        )?;
        check(
            self.low >= 0.0 && self.low <= self.high && self.high <= 1.0,
            "low/high",
            "0 ≤ low ≤ high ≤ 1",
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{AtomicU64, Ordering};

    #[test]
    fn load_marks_pick_half_double_or_base() {
        let load = AtomicU64::new(0.9f64.to_bits());
        let p = LoadBased::new(500.0, || f64::from_bits(load.load(Ordering::Relaxed)));
        assert_eq!(p.propose(123.0).rate, 250.0);
        load.store(0.1f64.to_bits(), Ordering::Relaxed);
        assert_eq!(p.propose(123.0).rate, 1000.0);
        load.store(0.5f64.to_bits(), Ordering::Relaxed);
        assert_eq!(
            p.propose(123.0),
            Proposal {
                rate: 500.0,
                reason: Reason::LoadNormal { load: 0.5 }
            }
        );
        load.store(f64::NAN.to_bits(), Ordering::Relaxed);
        assert_eq!(p.propose(123.0).rate, 123.0);
    }

    #[test]
    fn bad_parameters_are_typed_errors() {
        let bad = |p: &dyn RateController| match p.validate() {
            Err(QuotaError::InvalidParameter { name, .. }) => name,
            other => panic!("{other:?}"),
        };
        assert_eq!(bad(&LoadBased::new(-1.0, || 0.5)), "base_rate");
        assert_eq!(bad(&LoadBased::new(1.0, || 0.5).low(0.9)), "low/high");
    }
}
