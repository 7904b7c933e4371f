//! [`EwmaAimd`]: multiplicative raise and cut on a moving average of
//! latency. Observing is one CAS loop on the EWMA's bits and a relaxed
//! count; proposing takes both once per interval.

use core::time::Duration;

use super::controller::{Completion, DEFAULT_INTERVAL, Proposal, RateController, Reason, check};
use crate::error::QuotaError;
use crate::quota::saturating_nanos;
use crate::sync::{AtomicU64, Ordering};

/// The EWMA sentinel for "no sample yet": a NaN no arithmetic produces.
const NO_EWMA: u64 = u64::MAX;

/// Multiplicative raise and cut on an exponentially weighted moving average
/// of latency: every sample moves `ewma += alpha · (latency − ewma)`; at the
/// end of each interval the rate is multiplied by `decrease` (default 0.9)
/// if the EWMA exceeds `target` or any request was dropped, by `increase`
/// (default 1.05) otherwise, and held if no sample came.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{adaptive::RateController, adaptive::EwmaAimd, adaptive::Completion};
///
/// let p = EwmaAimd::new(Duration::from_millis(100)).alpha(0.5);
/// p.observe(Duration::from_millis(80), Completion::Success);
/// p.observe(Duration::from_millis(160), Completion::Success); // ewma 120 ms
/// assert_eq!(p.propose(1000.0).rate, 900.0);
/// ```
#[derive(Debug)]
pub struct EwmaAimd {
    target: u64,
    alpha: f64,
    decrease: f64,
    increase: f64,
    interval: Duration,
    /// The EWMA in nanoseconds as `f64` bits, or `NO_EWMA`.
    ewma: AtomicU64,
    samples: AtomicU64,
    drops: AtomicU64,
}

impl EwmaAimd {
    /// A policy holding the latency EWMA at `target`, with `alpha` 0.2,
    /// `decrease` 0.9, `increase` 1.05 and an interval of
    /// [`AdaptiveLimiter::DEFAULT_INTERVAL`](crate::AdaptiveLimiter::DEFAULT_INTERVAL)
    /// (1 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{AdaptiveLimiter, adaptive::RateController, adaptive::EwmaAimd};
    ///
    /// let p = EwmaAimd::new(Duration::from_millis(100));
    /// assert_eq!(RateController::interval(&p), AdaptiveLimiter::DEFAULT_INTERVAL);
    /// assert_eq!(p.ewma(), None);
    /// ```
    pub fn new(target: Duration) -> EwmaAimd {
        EwmaAimd {
            target: saturating_nanos(target),
            alpha: 0.2,
            decrease: 0.9,
            increase: 1.05,
            interval: DEFAULT_INTERVAL,
            ewma: AtomicU64::new(NO_EWMA),
            samples: AtomicU64::new(0),
            drops: AtomicU64::new(0),
        }
    }

    /// The EWMA weight of a new sample, in `(0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::EwmaAimd, adaptive::Completion};
    ///
    /// let p = EwmaAimd::new(Duration::from_millis(100)).alpha(1.0); // last sample only
    /// p.observe(Duration::from_millis(500), Completion::Success);
    /// p.observe(Duration::from_millis(20), Completion::Success);
    /// assert_eq!(p.ewma(), Some(Duration::from_millis(20)));
    /// ```
    #[must_use]
    pub fn alpha(mut self, alpha: f64) -> EwmaAimd {
        self.alpha = alpha;
        self
    }

    /// The factor applied on a cut, in `(0, 1)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::EwmaAimd, adaptive::Completion};
    ///
    /// let p = EwmaAimd::new(Duration::from_millis(100)).decrease(0.5);
    /// p.observe(Duration::ZERO, Completion::Dropped);
    /// assert_eq!(p.propose(1000.0).rate, 500.0);
    /// ```
    #[must_use]
    pub fn decrease(mut self, decrease: f64) -> EwmaAimd {
        self.decrease = decrease;
        self
    }

    /// The factor applied on a raise, above 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::EwmaAimd, adaptive::Completion};
    ///
    /// let p = EwmaAimd::new(Duration::from_millis(100)).increase(2.0);
    /// p.observe(Duration::from_millis(10), Completion::Success);
    /// assert_eq!(p.propose(1000.0).rate, 2000.0);
    /// ```
    #[must_use]
    pub fn increase(mut self, increase: f64) -> EwmaAimd {
        self.increase = increase;
        self
    }

    /// How often the rate may change.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::EwmaAimd};
    ///
    /// let p = EwmaAimd::new(Duration::from_millis(100)).interval(Duration::from_millis(250));
    /// assert_eq!(RateController::interval(&p), Duration::from_millis(250));
    /// ```
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> EwmaAimd {
        self.interval = interval;
        self
    }

    /// The current EWMA, `None` before the first sample.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::RateController, adaptive::EwmaAimd, adaptive::Completion};
    ///
    /// let p = EwmaAimd::new(Duration::from_millis(100)).alpha(0.5);
    /// assert_eq!(p.ewma(), None);
    /// p.observe(Duration::from_millis(80), Completion::Success); // seeds it
    /// p.observe(Duration::from_millis(40), Completion::Success);
    /// assert_eq!(p.ewma(), Some(Duration::from_millis(60)));
    /// ```
    pub fn ewma(&self) -> Option<Duration> {
        // Relaxed: a snapshot of one value.
        match self.ewma.load(Ordering::Relaxed) {
            NO_EWMA => None,
            bits => Some(Duration::from_nanos(f64::from_bits(bits) as u64)),
        }
    }
}

impl RateController for EwmaAimd {
    fn interval(&self) -> Duration {
        self.interval
    }

    fn observe(&self, latency: Duration, outcome: Completion) {
        match outcome {
            Completion::Ignored => {}
            Completion::Dropped => {
                // Relaxed: a counter, drained by swap.
                self.drops.fetch_add(1, Ordering::Relaxed);
            }
            Completion::Success => {
                let x = latency.as_nanos() as f64;
                let alpha = self.alpha;
                // Relaxed: the EWMA is one value; the CAS loop makes every
                // sample's update apply to the latest EWMA.
                let _ = self
                    .ewma
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                        Some(match bits {
                            NO_EWMA => x.to_bits(),
                            bits => {
                                let e = f64::from_bits(bits);
                                (e + alpha * (x - e)).to_bits()
                            }
                        })
                    });
                // Relaxed: a counter, drained by swap.
                self.samples.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn propose(&self, current: f64) -> Proposal {
        // Relaxed: counters taken exactly once by swap.
        let drops = self.drops.swap(0, Ordering::Relaxed);
        let samples = self.samples.swap(0, Ordering::Relaxed);
        if drops > 0 {
            return Proposal {
                rate: current * self.decrease,
                reason: Reason::Dropped { count: drops },
            };
        }
        let observed = match (samples, self.ewma()) {
            (0, _) | (_, None) => {
                return Proposal {
                    rate: current,
                    reason: Reason::NoSignal,
                };
            }
            (_, Some(e)) => e,
        };
        if saturating_nanos(observed) > self.target {
            Proposal {
                rate: current * self.decrease,
                reason: Reason::LatencyAbove { observed },
            }
        } else {
            Proposal {
                rate: current * self.increase,
                reason: Reason::LatencyBelow { observed },
            }
        }
    }

    fn validate(&self) -> Result<(), QuotaError> {
        check(self.alpha > 0.0 && self.alpha <= 1.0, "alpha", "in (0, 1]")?;
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

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ewma_follows_alpha_and_decides_on_the_target() {
        let p = EwmaAimd::new(100 * MS).alpha(0.5);
        assert_eq!(p.propose(1000.0).reason, Reason::NoSignal);
        p.observe(200 * MS, Completion::Success);
        assert_eq!(p.ewma(), Some(200 * MS), "the first sample seeds it");
        p.observe(Duration::ZERO, Completion::Success);
        assert_eq!(p.ewma(), Some(100 * MS));
        p.observe(Duration::from_secs(9), Completion::Ignored);
        // 100 ms is not above the target: raise.
        let up = p.propose(1000.0);
        assert_eq!(up.rate, 1050.0);
        assert_eq!(up.reason, Reason::LatencyBelow { observed: 100 * MS });
        // The EWMA persists, but an interval without samples holds.
        assert_eq!(p.propose(1000.0).reason, Reason::NoSignal);
        p.observe(140 * MS, Completion::Success); // ewma 120 ms
        let down = p.propose(1000.0);
        assert_eq!(down.rate, 900.0);
        assert_eq!(down.reason, Reason::LatencyAbove { observed: 120 * MS });
    }

    #[test]
    fn a_drop_cuts_whatever_the_latency() {
        let p = EwmaAimd::new(100 * MS).decrease(0.5);
        p.observe(MS, Completion::Success);
        p.observe(MS, Completion::Dropped);
        p.observe(MS, Completion::Dropped);
        assert_eq!(
            p.propose(800.0),
            Proposal {
                rate: 400.0,
                reason: Reason::Dropped { count: 2 }
            }
        );
    }

    #[test]
    fn bad_parameters_are_typed_errors() {
        let bad = |p: &dyn RateController| match p.validate() {
            Err(QuotaError::InvalidParameter { name, .. }) => name,
            other => panic!("{other:?}"),
        };
        assert_eq!(bad(&EwmaAimd::new(MS).alpha(0.0)), "alpha");
        assert_eq!(bad(&EwmaAimd::new(MS).decrease(1.0)), "decrease");
        assert_eq!(bad(&EwmaAimd::new(MS).increase(f64::NAN)), "increase");
        assert!(EwmaAimd::new(MS).validate().is_ok());
    }
}
