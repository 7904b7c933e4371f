//! [`PercentileWindow`]: the p99 latency of each window against a
//! threshold.
//!
//! At the end of each interval the window's p99, read from a
//! [`LatencyHistogram`](super::histogram::LatencyHistogram) (relative error
//! below 6.25 %, always upward), decides:
//!
//! * any dropped request, or `p99 > threshold`: rate × `decrease` (0.8);
//! * `p99 < threshold / 2`: rate × `increase` (1.1);
//! * otherwise: hold. An empty window holds too.
//!
//! The window then restarts: the drain moves every counter to zero, so each
//! sample counts in exactly one window.

use core::time::Duration;

use super::controller::{Completion, Proposal, RateController, Reason, check};
use super::histogram::LatencyHistogram;
use crate::error::QuotaError;
use crate::quota::saturating_nanos;
use crate::sync::{AtomicU64, Ordering};

/// Cuts the rate by 20 % when a window's p99 latency exceeds `threshold`,
/// raises it by 10 % when the p99 is under half of it, holds otherwise.
///
/// Memory: 592 counters of 8 bytes (4.7 KB); recording is one relaxed
/// `fetch_add`. The end-of-window decision copies the counters (4.7 KB of
/// stack on the deciding thread).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{adaptive::RateController, adaptive::Completion, adaptive::PercentileWindow};
///
/// let p = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(5));
/// for _ in 0..100 {
///     p.observe(Duration::from_millis(150), Completion::Success);
/// }
/// assert_eq!(p.propose(1000.0).rate, 800.0);
/// assert_eq!(p.propose(1000.0).rate, 1000.0); // a new, empty window holds
/// ```
#[derive(Debug)]
pub struct PercentileWindow {
    threshold: u64,
    interval: Duration,
    per_mille: u32,
    decrease: f64,
    increase: f64,
    histogram: LatencyHistogram,
    drops: AtomicU64,
}

impl PercentileWindow {
    /// The default window: 5 s (windows of 5 to 30 s hold enough samples for
    /// a stable p99; `docs/adaptive.md` says what shorter ones cost).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::adaptive::PercentileWindow;
    ///
    /// assert_eq!(PercentileWindow::DEFAULT_WINDOW, Duration::from_secs(5));
    /// ```
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5);

    /// A p99 window of `interval` against `threshold`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::Completion, adaptive::PercentileWindow};
    ///
    /// let p = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(10));
    /// assert_eq!(p.interval(), Duration::from_secs(10));
    /// p.observe(Duration::from_millis(20), Completion::Success); // under half the threshold
    /// assert_eq!(p.propose(1000.0).rate, 1100.0);
    /// ```
    pub fn new(threshold: Duration, interval: Duration) -> PercentileWindow {
        PercentileWindow {
            threshold: saturating_nanos(threshold),
            interval,
            per_mille: 990,
            decrease: 0.8,
            increase: 1.1,
            histogram: LatencyHistogram::new(),
            drops: AtomicU64::new(0),
        }
    }

    /// A window of [`DEFAULT_WINDOW`](PercentileWindow::DEFAULT_WINDOW) against `threshold`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::PercentileWindow};
    ///
    /// let p = PercentileWindow::with_threshold(Duration::from_millis(100));
    /// assert_eq!(p.interval(), PercentileWindow::DEFAULT_WINDOW);
    /// ```
    pub fn with_threshold(threshold: Duration) -> PercentileWindow {
        PercentileWindow::new(threshold, PercentileWindow::DEFAULT_WINDOW)
    }

    /// The quantile compared, in thousandths (990 = p99, the default; 500 =
    /// the median).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::Completion, adaptive::PercentileWindow};
    ///
    /// // Most requests are slow: the median is slow, cut.
    /// let p = PercentileWindow::with_threshold(Duration::from_millis(100)).per_mille(500);
    /// for ms in [10, 200, 200] {
    ///     p.observe(Duration::from_millis(ms), Completion::Success);
    /// }
    /// assert_eq!(p.propose(1000.0).rate, 800.0);
    /// ```
    #[must_use]
    pub fn per_mille(mut self, per_mille: u32) -> PercentileWindow {
        self.per_mille = per_mille;
        self
    }

    /// The factor applied on a cut, in `(0, 1)` (default 0.8).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::Completion, adaptive::PercentileWindow};
    ///
    /// let p = PercentileWindow::with_threshold(Duration::from_millis(100)).decrease(0.5);
    /// p.observe(Duration::ZERO, Completion::Dropped);
    /// assert_eq!(p.propose(1000.0).rate, 500.0);
    /// ```
    #[must_use]
    pub fn decrease(mut self, decrease: f64) -> PercentileWindow {
        self.decrease = decrease;
        self
    }

    /// The factor applied on a raise, above 1 (default 1.1).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::Completion, adaptive::PercentileWindow};
    ///
    /// let p = PercentileWindow::with_threshold(Duration::from_millis(100)).increase(1.5);
    /// p.observe(Duration::from_millis(10), Completion::Success);
    /// assert_eq!(p.propose(1000.0).rate, 1500.0);
    /// ```
    #[must_use]
    pub fn increase(mut self, increase: f64) -> PercentileWindow {
        self.increase = increase;
        self
    }
}

impl RateController for PercentileWindow {
    fn interval(&self) -> Duration {
        self.interval
    }

    #[inline]
    fn observe(&self, latency: Duration, outcome: Completion) {
        match outcome {
            Completion::Success => self.histogram.record(saturating_nanos(latency)),
            // Relaxed: a counter, drained by swap.
            Completion::Dropped => drop(self.drops.fetch_add(1, Ordering::Relaxed)),
            Completion::Ignored => {}
        }
    }

    fn propose(&self, current: f64) -> Proposal {
        let window = self.histogram.drain();
        // Relaxed: a counter taken exactly once by swap.
        let drops = self.drops.swap(0, Ordering::Relaxed);
        if drops > 0 {
            return Proposal {
                rate: current * self.decrease,
                reason: Reason::Dropped { count: drops },
            };
        }
        let Some(quantile) = window.quantile(self.per_mille) else {
            return Proposal {
                rate: current,
                reason: Reason::NoSignal,
            };
        };
        let observed = Duration::from_nanos(quantile);
        if quantile > self.threshold {
            Proposal {
                rate: current * self.decrease,
                reason: Reason::LatencyAbove { observed },
            }
        } else if quantile < self.threshold / 2 {
            Proposal {
                rate: current * self.increase,
                reason: Reason::LatencyBelow { observed },
            }
        } else {
            Proposal {
                rate: current,
                reason: Reason::LatencyWithin { observed },
            }
        }
    }

    fn validate(&self) -> Result<(), QuotaError> {
        check(self.per_mille <= 1000, "per_mille", "at most 1000")?;
        check(
            self.decrease > 0.0 && self.decrease < 1.0,
            "decrease",
            "in (0, 1)",
        )?;
        check(
            self.increase > 1.0 && self.increase.is_finite(),
            "increase",
            "a finite number above 1",
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::adaptive::histogram::{bucket_high, bucket_of};

    const MS: Duration = Duration::from_millis(1);

    fn observed(ms: u64) -> Duration {
        Duration::from_nanos(bucket_high(bucket_of(ms * 1_000_000)))
    }

    #[test]
    fn p99_above_cuts_below_half_raises_between_holds() {
        let p = PercentileWindow::new(100 * MS, Duration::from_secs(1));
        // 98 fast samples and 2 slow ones: the p99 is slow.
        for _ in 0..98 {
            p.observe(10 * MS, Completion::Success);
        }
        p.observe(150 * MS, Completion::Success);
        p.observe(150 * MS, Completion::Success);
        assert_eq!(
            p.propose(1000.0),
            Proposal {
                rate: 800.0,
                reason: Reason::LatencyAbove {
                    observed: observed(150)
                }
            }
        );
        // 99 fast and 1 slow: the p99 is fast.
        for _ in 0..99 {
            p.observe(40 * MS, Completion::Success);
        }
        p.observe(Duration::from_secs(3), Completion::Success);
        let up = p.propose(640.0);
        assert_eq!(up.rate, 704.0);
        assert_eq!(
            up.reason,
            Reason::LatencyBelow {
                observed: observed(40)
            }
        );
        p.observe(70 * MS, Completion::Success);
        assert_eq!(p.propose(640.0).rate, 640.0);
    }

    #[test]
    fn drops_cut_and_ignored_samples_do_not_count() {
        let p = PercentileWindow::with_threshold(100 * MS);
        assert_eq!(p.interval(), PercentileWindow::DEFAULT_WINDOW);
        p.observe(Duration::from_secs(10), Completion::Ignored);
        assert_eq!(p.propose(500.0).reason, Reason::NoSignal);
        p.observe(MS, Completion::Dropped);
        assert_eq!(
            p.propose(500.0),
            Proposal {
                rate: 400.0,
                reason: Reason::Dropped { count: 1 }
            }
        );
        assert!(p.validate().is_ok());
        assert!(
            PercentileWindow::with_threshold(MS)
                .per_mille(1001)
                .validate()
                .is_err()
        );
    }
}
