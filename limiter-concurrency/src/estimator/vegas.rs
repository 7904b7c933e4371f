//! [`Vegas`]: TCP Vegas's queue estimate, against a no-load RTT that decays.
//!
//! Once per window (see the module docs of [`estimator`](crate::estimator)),
//! with `rtt` the window's mean and `rtt_noload` the no-load RTT:
//!
//! ```text
//! queue = limit · (1 − rtt_noload / rtt)          (requests queued downstream)
//! queue < alpha = 3·log10(limit)   → limit += log10(limit)  (room: grow)
//! queue > beta  = 6·log10(limit)   → limit −= log10(limit)  (queueing: shrink)
//! a dropped sample in the window   → limit −= log10(limit)
//! ```
//!
//! Raises need a busy window (`2 · max in_flight >= limit`).
//!
//! **The no-load RTT decays instead of ratcheting.** A plain minimum only
//! ever falls: after a deploy makes the service slower for good, every RTT
//! looks like queueing and the limit collapses to its floor (the defect of
//! Netflix's Vegas, which papers over it with a periodic reset that drops
//! the limit while it re-learns). Here each window's mean pulls the
//! no-load RTT down at once when lower, and otherwise lets it rise by a
//! factor `1 + decay` per window (default 1 %): a permanent slowdown is
//! learned within `ln(rtt_new / rtt_old) / decay` windows (a doubling: 70
//! windows, a second or two at typical limits), while queueing, which the
//! estimator removes within a few windows, never lasts long enough to be
//! mistaken for the new floor. No probe, nothing that pins the limit low.

use core::time::Duration;

use super::{Bounds, Estimator, Sample, Window};
use crate::error::{ConfigError, check_f64};

/// TCP Vegas on the limit, with a decaying no-load RTT.
///
/// # Examples
///
/// ```
/// use limiter_concurrency::{Bounds, Estimator, Vegas};
///
/// let vegas = Vegas::new(Bounds::new(20, 1, 1000)?).decay(0.02)?;
/// assert_eq!(vegas.limit(), 20);
/// # Ok::<(), limiter_concurrency::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Vegas {
    bounds: Bounds,
    limit: f64,
    /// ns; 0 until the first window.
    rtt_noload: f64,
    decay: f64,
    window: Window,
}

impl Vegas {
    /// Vegas within `bounds`, decay 1 % per window, windows of at least 10
    /// samples.
    pub fn new(bounds: Bounds) -> Vegas {
        Vegas {
            bounds,
            limit: f64::from(bounds.initial),
            rtt_noload: 0.0,
            decay: 0.01,
            window: Window::new(10),
        }
    }

    /// How fast the no-load RTT may rise, per window, in `(0, 1]`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] outside `(0, 1]` or NaN.
    pub fn decay(mut self, decay: f64) -> Result<Vegas, ConfigError> {
        self.decay = check_f64("decay", decay, 0.0, true, 1.0, "(0, 1]")?;
        Ok(self)
    }
}

impl Estimator for Vegas {
    fn sample(&mut self, s: Sample) -> u32 {
        let Some(w) = self.window.add(s, self.limit()) else {
            return self.limit();
        };
        let log = self.limit.log10().max(1.0);
        if w.dropped || w.mean_rtt == 0.0 {
            self.limit = self.bounds.clamp(self.limit - log);
            return self.limit();
        }
        self.rtt_noload = if self.rtt_noload == 0.0 {
            w.mean_rtt
        } else {
            w.mean_rtt.min(self.rtt_noload * (1.0 + self.decay))
        };
        let queue = self.limit * (1.0 - self.rtt_noload / w.mean_rtt);
        let busy = 2.0 * f64::from(w.max_in_flight) >= self.limit;
        if queue < 3.0 * log {
            if busy {
                self.limit = self.bounds.clamp(self.limit + log);
            }
        } else if queue > 6.0 * log {
            self.limit = self.bounds.clamp(self.limit - log);
        }
        self.limit()
    }

    fn limit(&self) -> u32 {
        self.limit as u32
    }

    fn override_limit(&mut self, limit: u32) {
        self.limit = self.bounds.clamp(f64::from(limit));
    }

    fn min_rtt(&self) -> Option<Duration> {
        (self.rtt_noload > 0.0).then(|| Duration::from_nanos(self.rtt_noload as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(v: &mut Vegas, windows: u32, rtt_ms: u64) -> u32 {
        let mut limit = v.limit();
        for _ in 0..windows {
            for _ in 0..v.limit().max(10) {
                let s = Sample {
                    rtt: Duration::from_millis(rtt_ms),
                    in_flight: v.limit(),
                    dropped: false,
                };
                limit = v.sample(s);
            }
        }
        limit
    }

    #[test]
    fn grows_without_queueing_and_shrinks_with_it() {
        let mut v = Vegas::new(Bounds::new(10, 1, 1000).unwrap());
        // Constant RTT: no queue, each window adds log10(limit) (at least 1).
        assert_eq!(feed(&mut v, 1, 10), 11);
        assert_eq!(feed(&mut v, 1, 10), 12);
        // RTT doubles: queue = 12 · (1 − 10/20) = 6, between alpha (3·1.08)
        // and beta (6·1.08): hold.
        assert_eq!(feed(&mut v, 1, 20), 12);
    }

    #[test]
    fn a_permanent_slowdown_is_learned_instead_of_collapsing_the_limit() {
        let mut v = Vegas::new(Bounds::new(40, 1, 1000).unwrap())
            .decay(0.05)
            .unwrap();
        feed(&mut v, 3, 10);
        let before = v.limit();
        // Latency quadruples for good. The limit drops while the no-load
        // RTT catches up (by 5 % a window), then grows again.
        feed(&mut v, 40, 40);
        assert!(
            v.min_rtt().unwrap() >= Duration::from_millis(39),
            "{:?}",
            v.min_rtt()
        );
        let after = feed(&mut v, 10, 40);
        assert!(
            after > 1 && after >= before,
            "limit {after} (was {before}) recovered"
        );
    }
}
