//! [`Gradient2`]: the ratio of a long-term RTT to the current one, without
//! the creep.
//!
//! Once per window, with `short` the window's mean RTT and `long` the
//! long-term RTT:
//!
//! ```text
//! gradient = clamp(tolerance · long / short, 0.5, 1)
//! headroom = √limit · clamp((gradient − 0.7) / 0.3, 0, 1)    (busy windows only)
//! target   = limit · gradient + headroom
//! limit    = (1 − smoothing) · limit + smoothing · target
//! ```
//!
//! `gradient < 1` (the RTT rose more than `tolerance` allows over the
//! long-term one) cuts; `gradient = 1` in a busy window
//! (`2 · max in_flight >= limit`) raises by the headroom. The headroom
//! fades out linearly as the gradient falls from 1 to 0.7 instead of
//! switching off below 1: the target is a continuous function of the RTT,
//! so near its settling point the limit moves in proportion to what the
//! RTT says, not in a sawtooth of whole raises and cuts. A window with a
//! dropped sample cuts as a gradient of 0.5 would.
//!
//! **The installed limit.** The computed limit is a real number; the limit
//! installed (and returned) is an integer that follows it with a dead band:
//! it moves to `⌊limit⌋` only when the computed limit leaves
//! `[installed − 0.25, installed + 1.25]`. A computed limit hovering at a
//! whole number therefore does not flip the installed one back and forth
//! with every window's noise, which at small limits (8 servers, a limit of
//! 12) is a tenth of the limit per step.
//!
//! **Why it does not creep.** Netflix's Gradient2 moves `long` as an
//! exponential average of every window: under modest overload, `short` sits
//! just inside `tolerance`, `long` follows it up, the gradient stays 1, and
//! the headroom is added every window, so the limit and the queue grow
//! without end. Here `long` follows `short` down at once (a faster
//! downstream is believed immediately; `long` is an average of windows,
//! moved by a fifth of the difference, because a minimum of noisy window
//! means only ratchets down) and rises only on evidence that the higher RTT
//! is not queueing this limiter causes:
//!
//! * a window at low occupancy (`2 · max in_flight < limit`): so little of
//!   the limit in use cannot have queued anything (the passive no-load RTT
//!   of low-occupancy samples; no probe): `long` moves halfway to it;
//! * over the last 8 busy windows the in-flight count moved by at least
//!   25 % and the RTT did not move with it (its elasticity in the in-flight
//!   count, the least-squares slope scaled by the means, below 0.3):
//!   queueing grows with the in-flight count, a slower downstream does not.
//!   A window whose RTT is more than twice the mean of those kept starts the
//!   history afresh: the windows before such a step are of another
//!   downstream (fewer servers, a slower one), and pairing them with the
//!   windows after it would read the step itself as "the RTT rose while the
//!   in-flight count did not" and learn the new queue as the baseline.
//!
//! Queueing that the estimator itself caused is therefore never learned as
//! the baseline, and a genuine slowdown is learned within about 8 windows
//! of the cuts it causes. The [`DriftGuard`](crate::DriftGuard) adds the
//! throughput check on top.

use core::time::Duration;
use std::collections::VecDeque;

use super::{Bounds, Estimator, Sample, Window};
use crate::error::{ConfigError, check_f64};

/// Gradient of long-term to current RTT, without the creep.
///
/// # Examples
///
/// ```
/// use limiter_concurrency::{Bounds, Estimator, Gradient2};
///
/// let g = Gradient2::new(Bounds::new(20, 4, 500)?).tolerance(1.2)?.smoothing(0.3)?;
/// assert_eq!(g.limit(), 20);
/// # Ok::<(), limiter_concurrency::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gradient2 {
    bounds: Bounds,
    limit: f64,
    /// ns; 0 until the first window.
    long: f64,
    tolerance: f64,
    smoothing: f64,
    /// The limit installed: `limit` with a dead band (see the module doc).
    installed: u32,
    window: Window,
    /// The last busy windows' (mean in-flight, short RTT).
    history: VecDeque<(f64, f64)>,
}

/// Busy windows kept to tell queueing from a slower downstream.
const HISTORY: usize = super::HISTORY;

/// How far one window moves the long-term RTT when it moves.
const LONG_WEIGHT: f64 = 0.2;

/// The gradient below which no headroom is added (it grows linearly to
/// `√limit` at a gradient of 1).
const HEADROOM_FROM: f64 = 0.7;

/// A window whose RTT is this many times the mean of the kept history is a
/// step of the downstream: the history starts afresh.
const STEP: f64 = 2.0;

/// How far below the installed limit, and above it plus one, the computed
/// limit must go before the installed limit moves.
const DEAD_BAND: f64 = 0.25;

/// Samples a window holds at least (more when `2 · limit` is more).
const MIN_WINDOW: u32 = 60;

impl Gradient2 {
    /// Gradient2 within `bounds`: tolerance 1.25, smoothing 0.2, windows
    /// of `max(60, 2 · limit)` samples.
    pub fn new(bounds: Bounds) -> Gradient2 {
        Gradient2 {
            bounds,
            limit: f64::from(bounds.initial),
            long: 0.0,
            tolerance: 1.25,
            smoothing: 0.2,
            installed: bounds.initial,
            window: Window::new(MIN_WINDOW),
            history: VecDeque::new(),
        }
    }

    /// How much the RTT may rise over the long-term RTT before the limit is
    /// cut, in `[1, 10]`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] outside `[1, 10]` or NaN.
    pub fn tolerance(mut self, tolerance: f64) -> Result<Gradient2, ConfigError> {
        self.tolerance = check_f64("tolerance", tolerance, 1.0, false, 10.0, "[1, 10]")?;
        Ok(self)
    }

    /// How far each window moves the limit toward its target, in `(0, 1]`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] outside `(0, 1]` or NaN.
    pub fn smoothing(mut self, smoothing: f64) -> Result<Gradient2, ConfigError> {
        self.smoothing = check_f64("smoothing", smoothing, 0.0, true, 1.0, "(0, 1]")?;
        Ok(self)
    }
}

impl Gradient2 {
    /// Installs the computed limit (within the bounds, so `⌊limit⌋` is too).
    fn install(&mut self) {
        self.installed = self.limit as u32;
    }
}

impl Estimator for Gradient2 {
    fn sample(&mut self, s: Sample) -> u32 {
        let Some(w) = self.window.add(s, 2 * self.limit()) else {
            return self.limit();
        };
        if w.dropped || w.mean_rtt == 0.0 {
            self.limit = self.bounds.clamp(self.limit * (1.0 - self.smoothing * 0.5));
            self.install();
            return self.limit();
        }
        let short = w.mean_rtt;
        let busy = 2.0 * f64::from(w.max_in_flight) >= self.limit;
        if self.long == 0.0 || !busy {
            // The first window, or one at low occupancy (our own
            // concurrency cannot have queued it): the downstream's latency.
            self.long = if self.long == 0.0 {
                short
            } else {
                self.long + 0.5 * (short - self.long)
            };
            self.history.clear();
        } else {
            if !self.history.is_empty() {
                let mean =
                    self.history.iter().map(|&(_, r)| r).sum::<f64>() / self.history.len() as f64;
                if short > STEP * mean {
                    self.history.clear();
                }
            }
            if self.history.len() == HISTORY {
                self.history.pop_front();
            }
            self.history.push_back((w.mean_in_flight, short));
            // Lower RTTs are believed at once (an average, not a minimum: a
            // minimum of noisy windows only ratchets down); higher ones only
            // when they do not move with the limit.
            if short < self.long || super::unqueued(&self.history, HISTORY) {
                self.long += LONG_WEIGHT * (short - self.long);
            }
        }
        let gradient = (self.tolerance * self.long / short).clamp(0.5, 1.0);
        let headroom = if busy {
            self.limit.sqrt() * ((gradient - HEADROOM_FROM) / (1.0 - HEADROOM_FROM)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let target = self.limit * gradient + headroom;
        self.limit = self
            .bounds
            .clamp((1.0 - self.smoothing) * self.limit + self.smoothing * target);
        let installed = f64::from(self.installed);
        if self.limit < installed - DEAD_BAND || self.limit > installed + 1.0 + DEAD_BAND {
            self.install();
        }
        self.limit()
    }

    fn limit(&self) -> u32 {
        self.installed
    }

    fn override_limit(&mut self, limit: u32) {
        self.limit = self.bounds.clamp(f64::from(limit));
        self.install();
        self.history.clear();
    }

    fn min_rtt(&self) -> Option<Duration> {
        (self.long > 0.0).then(|| Duration::from_nanos(self.long as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One window of `limit` samples of `rtt` at in-flight `in_flight`.
    fn window(g: &mut Gradient2, rtt: Duration, in_flight: u32) -> u32 {
        let n = (2 * g.limit()).max(MIN_WINDOW);
        let mut limit = 0;
        for _ in 0..n {
            limit = g.sample(Sample {
                rtt,
                in_flight,
                dropped: false,
            });
        }
        limit
    }

    #[test]
    fn modest_overload_does_not_creep() {
        // A downstream with 16 servers of 10 ms: past 16 in flight, the RTT
        // grows in proportion (a closed queue), so the gradient at a limit
        // L is 1.25 · 16 / L. The limit must settle where the cut equals
        // the headroom, L · (1 − g) = √L · (g − 0.7) / 0.3, between 23 and
        // 24, and stay there, not grow window after window.
        let mut g = Gradient2::new(Bounds::new(8, 1, 10_000).unwrap());
        let mut limits = Vec::new();
        for _ in 0..400 {
            let l = g.limit();
            let rtt_ms = 10.0 * (f64::from(l) / 16.0).max(1.0);
            limits.push(window(
                &mut g,
                Duration::from_micros((rtt_ms * 1000.0) as u64),
                l,
            ));
        }
        let tail = &limits[300..];
        let (lo, hi) = (tail.iter().min().unwrap(), tail.iter().max().unwrap());
        assert!(
            *hi <= 24,
            "settled where the cut meets the headroom: {lo}..={hi}"
        );
        assert!(hi - lo <= 1, "held within one permit: {lo}..={hi}");
        assert!(*lo >= 14, "kept the downstream busy: {lo}..={hi}");
    }

    #[test]
    fn a_doubled_service_time_is_learned() {
        let mut g = Gradient2::new(Bounds::new(16, 1, 10_000).unwrap());
        for _ in 0..20 {
            window(&mut g, Duration::from_millis(10), 8);
        }
        assert_eq!(g.min_rtt(), Some(Duration::from_millis(10)));
        // Twice as slow for good, at low occupancy (no queueing): halfway
        // per window, the limit is not cut.
        let before = g.limit();
        window(&mut g, Duration::from_millis(20), 4);
        assert_eq!(g.min_rtt(), Some(Duration::from_millis(15)));
        for _ in 0..20 {
            window(&mut g, Duration::from_millis(20), 4);
        }
        assert!(
            g.min_rtt().unwrap().abs_diff(Duration::from_millis(20)) < Duration::from_micros(10)
        );
        assert_eq!(g.limit(), before);
    }

    #[test]
    fn a_slowdown_under_overload_is_learned_from_cuts_that_do_not_lower_the_rtt() {
        let mut g = Gradient2::new(Bounds::new(32, 1, 10_000).unwrap());
        for _ in 0..20 {
            window(&mut g, Duration::from_millis(10), 32);
        }
        let settled = g.limit();
        // Busy throughout, and twice as slow whatever the limit: the cuts
        // do not lower the RTT, so it is not queueing.
        let mut lowest = settled;
        for _ in 0..30 {
            let l = g.limit();
            lowest = lowest.min(window(&mut g, Duration::from_millis(20), l));
        }
        assert!(
            g.min_rtt().unwrap() > Duration::from_millis(18),
            "{:?}",
            g.min_rtt()
        );
        assert!(
            lowest >= settled / 4,
            "cut to {lowest} from {settled} before learning"
        );
        assert!(g.limit() >= lowest, "grows again once learned");
    }

    #[test]
    fn bad_parameters_are_typed_errors() {
        let b = Bounds::new(8, 1, 100).unwrap();
        assert!(Gradient2::new(b).smoothing(f64::NAN).is_err());
        assert!(Gradient2::new(b).smoothing(0.0).is_err());
        assert!(Gradient2::new(b).tolerance(0.9).is_err());
        assert!(Gradient2::new(b).tolerance(f64::INFINITY).is_err());
    }
}
