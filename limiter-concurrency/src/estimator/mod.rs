//! Estimators: what the limit should be, learned from the permits' outcomes.
//!
//! Every permit finished with an [`Outcome`] becomes a [`Sample`]: how long
//! the work took (`rtt`), how many permits were in flight when it was
//! admitted, the limit then, and whether the work was dropped (an error, a
//! timeout, a downstream 429 or 503). An [`Estimator`] turns the stream of
//! samples into a limit within its `[min_limit, max_limit]`; the limiter
//! installs a changed limit with one CAS
//! ([`set_limit`](crate::ConcurrencyLimiter::set_limit)'s path: a cut
//! revokes nothing, a raise wakes exactly the waiters it admits).
//!
//! | estimator | signal | moves the limit when |
//! |---|---|---|
//! | [`Aimd`] | loss (dropped work, or `rtt` above a timeout) | +1 per sample while busy; × `backoff` on a loss |
//! | [`Vegas`] | queueing delay: `rtt` against a no-load `rtt` that decays | estimated queue below `alpha` / above `beta` |
//! | [`Gradient2`] | the ratio of a long-term to a short-term `rtt` | the gradient falls below 1 (cut) or stays at 1 while busy (raise) |
//!
//! Each delay-based estimator is guarded by a [`DriftGuard`]: Little's law
//! gives the throughput of each window of samples (`in_flight / rtt`); when
//! the limit rose over recent windows but the throughput did not, the
//! extra concurrency only queues, and the guard cuts the limit back to
//! where the throughput stopped growing and stops further raises until the
//! throughput grows again. None probes: the no-load and long-term RTTs are
//! learned passively from samples, so no window ever pins the limit low.
//!
//! Time in samples is durations only; an estimator reads no clock, so the
//! same series of samples gives the same limits (the simulator and the tests
//! rely on it).

mod aimd;
mod drift;
mod gradient;
mod vegas;

use core::fmt;
use core::time::Duration;

pub use aimd::Aimd;
pub use drift::DriftGuard;
pub use gradient::Gradient2;
pub use vegas::Vegas;

use crate::error::{ConfigError, check_limit};

/// How the work a permit covered ended (given to
/// [`Permit::finish`](crate::Permit::finish)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done, in this time.
    Success(Duration),
    /// Dropped by overload: an error, a timeout, a downstream 429/503
    /// (after this time).
    Dropped(Duration),
    /// Not a signal (a client error, a cancelled call): the estimator does
    /// not see it. Dropping a permit without finishing it means this.
    Ignore,
}

/// One finished permit, as an estimator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// How long the work took.
    pub rtt: Duration,
    /// Permits in flight when this one was admitted (itself included).
    pub in_flight: u32,
    /// Whether the work was dropped by overload.
    pub dropped: bool,
}

/// A limit learned from samples.
pub trait Estimator: Send + fmt::Debug {
    /// Takes one sample; returns the limit it now recommends.
    fn sample(&mut self, sample: Sample) -> u32;
    /// The limit recommended now.
    fn limit(&self) -> u32;
    /// Moves the limit to `limit` (clamped to the estimator's bounds), as a
    /// guard wrapping the estimator decides; later samples move it on from
    /// there.
    fn override_limit(&mut self, limit: u32);
    /// The estimator's no-load (minimum) RTT, where it keeps one.
    fn min_rtt(&self) -> Option<Duration> {
        None
    }
}

impl<E: Estimator + ?Sized> Estimator for Box<E> {
    fn sample(&mut self, sample: Sample) -> u32 {
        (**self).sample(sample)
    }
    fn limit(&self) -> u32 {
        (**self).limit()
    }
    fn override_limit(&mut self, limit: u32) {
        (**self).override_limit(limit);
    }
    fn min_rtt(&self) -> Option<Duration> {
        (**self).min_rtt()
    }
}

/// The bounds every estimator keeps its limit in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The limit it starts at.
    pub initial: u32,
    /// The lowest limit it recommends.
    pub min: u32,
    /// The highest limit it recommends.
    pub max: u32,
}

impl Bounds {
    /// Checks `1 <= min <= initial <= max <= MAX_LIMIT`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`], [`ConfigError::LimitTooLarge`],
    /// [`ConfigError::MinAboveMax`] or [`ConfigError::InitialOutOfBounds`].
    pub fn new(initial: u32, min: u32, max: u32) -> Result<Bounds, ConfigError> {
        check_limit("min_limit", min)?;
        check_limit("max_limit", max)?;
        check_limit("initial_limit", initial)?;
        if min > max {
            return Err(ConfigError::MinAboveMax { min, max });
        }
        if initial < min || initial > max {
            return Err(ConfigError::InitialOutOfBounds { initial, min, max });
        }
        Ok(Bounds { initial, min, max })
    }

    pub(crate) fn clamp(&self, limit: f64) -> f64 {
        limit.clamp(f64::from(self.min), f64::from(self.max))
    }
}

/// One window's worth of samples, aggregated: the delay-based estimators
/// update once per window (one "round" of the limit), which averages away
/// the noise of single samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WindowStats {
    /// Mean RTT of the successful samples, in ns (0 when none succeeded).
    pub(crate) mean_rtt: f64,
    /// Mean in-flight count at admission.
    pub(crate) mean_in_flight: f64,
    /// Largest in-flight count at admission.
    pub(crate) max_in_flight: u32,
    /// Whether any sample was dropped.
    pub(crate) dropped: bool,
}

/// Collects samples into windows of `max(min_samples, limit)` samples.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    min_samples: u32,
    count: u32,
    successes: u32,
    rtt_sum: f64,
    in_flight_sum: f64,
    max_in_flight: u32,
    dropped: bool,
}

impl Window {
    pub(crate) fn new(min_samples: u32) -> Window {
        Window {
            min_samples,
            count: 0,
            successes: 0,
            rtt_sum: 0.0,
            in_flight_sum: 0.0,
            max_in_flight: 0,
            dropped: false,
        }
    }

    /// Adds a sample; the window's stats when it is complete at `limit`.
    pub(crate) fn add(&mut self, s: Sample, limit: u32) -> Option<WindowStats> {
        self.count += 1;
        self.in_flight_sum += f64::from(s.in_flight);
        self.max_in_flight = self.max_in_flight.max(s.in_flight);
        if s.dropped {
            self.dropped = true;
        } else {
            self.successes += 1;
            self.rtt_sum += s.rtt.as_nanos() as f64;
        }
        if self.count < self.min_samples.max(limit) {
            return None;
        }
        let stats = WindowStats {
            mean_rtt: if self.successes > 0 {
                self.rtt_sum / f64::from(self.successes)
            } else {
                0.0
            },
            mean_in_flight: self.in_flight_sum / f64::from(self.count),
            max_in_flight: self.max_in_flight,
            dropped: self.dropped,
        };
        *self = Window::new(self.min_samples);
        Some(stats)
    }
}

/// Elasticity of the second value in the first over the pairs: the
/// least-squares slope, scaled by the means, `(Δy / y) / (Δx / x)`. About 1
/// when `y` grows in proportion to `x`, about 0 when it does not move with
/// it; 0 when `x` is constant.
pub(crate) fn elasticity(pairs: &std::collections::VecDeque<(f64, f64)>) -> f64 {
    let n = pairs.len() as f64;
    let (mx, my) = pairs
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x / n, b + y / n));
    let (mut cov, mut vx) = (0.0, 0.0);
    for &(x, y) in pairs {
        cov += (x - mx) * (y - my);
        vx += (x - mx) * (x - mx);
    }
    if vx == 0.0 || my == 0.0 {
        0.0
    } else {
        cov / vx * mx / my
    }
}

/// Busy windows the delay-based estimators keep to tell queueing from a
/// slower downstream.
pub(crate) const HISTORY: usize = 8;

/// Whether a full history of busy windows' `(limit, rtt)` shows the limit
/// moving by at least 25 % without the RTT following it (elasticity below
/// 0.3): the RTT is the downstream's, not queueing the limit causes.
pub(crate) fn unqueued(history: &std::collections::VecDeque<(f64, f64)>, full: usize) -> bool {
    if history.len() < full {
        return false;
    }
    let (lo, hi) = history
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &(l, _)| {
            (lo.min(l), hi.max(l))
        });
    hi >= lo * 1.25 && elasticity(history) < 0.3
}
