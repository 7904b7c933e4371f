//! [`RateController`]: what an adaptive limiter asks of a policy. The
//! policies are [`EwmaAimd`] (`ewma`), [`LoadBased`] (`load`) and
//! [`PercentileWindow`] (`percentile`, with its histogram).
//!
//! A policy sees every observation through [`RateController::observe`]
//! (lock-free and allocation-free: it runs on the caller's recording path)
//! and, once per interval, proposes the next rate through
//! [`RateController::propose`]. The limiter clamps the proposal to
//! `[min_rate, max_rate]` and applies the app-limited guard; the policy
//! never sees either. Rates are permits per second as `f64`; latencies are
//! [`Duration`]s, handled as nanoseconds.
//!
//! [`EwmaAimd`]: crate::adaptive::EwmaAimd
//! [`LoadBased`]: crate::adaptive::LoadBased
//! [`PercentileWindow`]: crate::adaptive::PercentileWindow

use core::time::Duration;

use crate::error::QuotaError;

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
