//! [`RateController`]: what an adaptive limiter asks of a policy, and the
//! policies [`EwmaAimd`] and [`LoadBased`] ([`PercentileWindow`] has its own
//! module, for its histogram).
//!
//! A policy sees every observation through [`RateController::observe`]
//! (lock-free and allocation-free: it runs on the caller's recording path)
//! and, once per interval, proposes the next rate through
//! [`RateController::propose`]. The limiter clamps the proposal to
//! `[min_rate, max_rate]` and applies the app-limited guard; the policy
//! never sees either. Rates are permits per second as `f64`; latencies are
//! [`Duration`]s, handled as nanoseconds.
//!
//! [`PercentileWindow`]: crate::adaptive::PercentileWindow

use core::fmt;
use core::time::Duration;

use crate::error::QuotaError;
use crate::quota::saturating_nanos;
use crate::sync::{AtomicU64, Ordering};

/// What became of the request whose latency is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Completion {
    /// The downstream served it: its latency is a signal.
    Success,
    /// The downstream dropped or refused it (a timeout, a 503, a shed
    /// request): an overload signal whatever the latency.
    Dropped,
    /// The sample says nothing about the downstream's load (a client error,
    /// a cache hit); it is not counted.
    Ignored,
}

/// Why a policy proposed the rate it did.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Reason {
    /// The latency signal (p99 or EWMA) was above the threshold or target:
    /// cut.
    LatencyAbove {
        /// The signal measured.
        observed: Duration,
    },
    /// The latency signal was low: raise.
    LatencyBelow {
        /// The signal measured.
        observed: Duration,
    },
    /// The latency signal was between the raise and cut thresholds: hold.
    LatencyWithin {
        /// The signal measured.
        observed: Duration,
    },
    /// Requests were dropped in the interval: cut.
    Dropped {
        /// How many.
        count: u64,
    },
    /// The load signal was above the high mark: half the base rate.
    LoadHigh {
        /// The load read.
        load: f64,
    },
    /// The load signal was below the low mark: twice the base rate.
    LoadLow {
        /// The load read.
        load: f64,
    },
    /// The load signal was between the marks: the base rate.
    LoadNormal {
        /// The load read.
        load: f64,
    },
    /// Nothing to go on (no sample in the interval, a load that is not a
    /// number): hold.
    NoSignal,
}

/// A policy's answer at the end of an interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proposal {
    /// The rate the policy wants, in permits per second (before clamping
    /// and the app-limited guard). A rate that is not a finite positive
    /// number is treated as "hold".
    pub rate: f64,
    /// Why.
    pub reason: Reason,
}

/// A rule that moves an adaptive limiter's rate from observations.
///
/// The limiter calls [`observe`](RateController::observe) on every recorded
/// sample, from any thread, and [`propose`](RateController::propose) once
/// per [`interval`](RateController::interval), from the recording call that
/// crosses the interval's end. Calls to `propose` on one limiter never
/// overlap and are ordered after each other (acquire/release), but may
/// overlap `observe`.
pub trait RateController: Send + Sync {
    /// How often the rate may change. Read once, when the limiter is built.
    fn interval(&self) -> Duration;

    /// Takes one observation. Must not block or allocate.
    fn observe(&self, latency: Duration, outcome: Completion);

    /// Proposes the rate for the next interval from `current` (permits per
    /// second), and restarts the policy's window.
    fn propose(&self, current: f64) -> Proposal;

    /// Checks the policy's parameters; the limiter's builder calls it.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] naming the bad parameter.
    fn validate(&self) -> Result<(), QuotaError> {
        Ok(())
    }
}

/// `Err(InvalidParameter)` unless `ok`.
pub(crate) fn check(
    ok: bool,
    name: &'static str,
    requirement: &'static str,
) -> Result<(), QuotaError> {
    if ok {
        Ok(())
    } else {
        Err(QuotaError::InvalidParameter { name, requirement })
    }
}

/// See [`AdaptiveLimiter::DEFAULT_INTERVAL`](crate::AdaptiveLimiter::DEFAULT_INTERVAL).
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

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
        assert_eq!(bad(&EwmaAimd::new(MS).alpha(0.0)), "alpha");
        assert_eq!(bad(&EwmaAimd::new(MS).decrease(1.0)), "decrease");
        assert_eq!(bad(&EwmaAimd::new(MS).increase(f64::NAN)), "increase");
        assert_eq!(bad(&LoadBased::new(-1.0, || 0.5)), "base_rate");
        assert_eq!(bad(&LoadBased::new(1.0, || 0.5).low(0.9)), "low/high");
        assert!(EwmaAimd::new(MS).validate().is_ok());
    }
}
