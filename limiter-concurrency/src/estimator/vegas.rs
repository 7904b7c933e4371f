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
//! no-load RTT down at once when lower, and lets it rise by a factor
//! `1 + decay` per window (default 1 %) when the window shows that the
//! higher RTT is not queueing of ours: a window at low occupancy, or busy
//! windows whose RTT does not move with the limit (elasticity below 0.3
//! over the last 8, see [`Gradient2`](crate::Gradient2)). A permanent
//! slowdown is learned within `ln(rtt_new / rtt_old) / decay` windows of
//! such evidence (a doubling: 70 windows); queueing, whose RTT grows with
//! the limit, is never mistaken for the new floor (an unconditional decay
//! would let the floor climb after the queue it measures). No probe,
//! nothing that pins the limit low.

use core::time::Duration;
use std::collections::VecDeque;

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
    /// The last busy windows' (limit, mean RTT).
    history: VecDeque<(f64, f64)>,
}

impl Vegas {
    /// Vegas within `bounds`, decay 1 % per window, windows of at least 30
    /// samples.
    pub fn new(bounds: Bounds) -> Vegas {
        Vegas {
            bounds,
            limit: f64::from(bounds.initial),
            rtt_noload: 0.0,
            decay: 0.01,
            window: Window::new(30),
            history: VecDeque::new(),
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
        let busy = 2.0 * f64::from(w.max_in_flight) >= self.limit;
        if busy {
            if self.history.len() == super::HISTORY {
                self.history.pop_front();
            }
            self.history.push_back((w.mean_in_flight, w.mean_rtt));
        } else {
            self.history.clear();
        }
        // Falls at once; rises by `decay` a window when the window shows no
        // queueing of ours (low occupancy, or an RTT that does not move
        // with the limit).
        self.rtt_noload = if self.rtt_noload == 0.0 {
            w.mean_rtt
        } else if !busy || super::unqueued(&self.history, super::HISTORY) {
            w.mean_rtt.min(self.rtt_noload * (1.0 + self.decay))
        } else {
            w.mean_rtt.min(self.rtt_noload)
        };
        let queue = self.limit * (1.0 - self.rtt_noload / w.mean_rtt);
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
            for _ in 0..v.limit().max(30) {
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
        // RTT quadruples: queue = 12 · (1 − 10/40) = 9, above beta: the
        // limit shrinks by log10(12) = 1.08, to 10.92 (10 whole permits).
        assert_eq!(feed(&mut v, 1, 40), 10);
        assert_eq!(v.min_rtt(), Some(Duration::from_millis(10)));
    }

    #[test]
    fn a_window_without_a_success_is_a_loss_and_no_rtt() {
        let mut v = Vegas::new(Bounds::new(10, 1, 1000).unwrap());
        let mut limit = v.limit();
        for _ in 0..30 {
            limit = v.sample(Sample {
                rtt: Duration::from_millis(5),
                in_flight: 10,
                dropped: true,
            });
        }
        // Cut by log10(10) = 1; the empty window's mean (0) is never taken
        // as an RTT, so there is still no no-load RTT.
        assert_eq!(limit, 9);
        assert_eq!(v.min_rtt(), None);
    }

    #[test]
    fn a_bad_decay_is_a_typed_error() {
        let b = Bounds::new(10, 1, 1000).unwrap();
        for bad in [f64::NAN, f64::INFINITY, 0.0, -0.1, 1.5] {
            match Vegas::new(b).decay(bad) {
                Err(ConfigError::OutOfRange { name, range, .. }) => {
                    assert_eq!((name, range), ("decay", "(0, 1]"), "{bad}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(Vegas::new(b).decay(1.0).is_ok());
    }

    #[test]
    fn a_permanent_slowdown_is_learned_instead_of_collapsing_the_limit() {
        let mut v = Vegas::new(Bounds::new(40, 1, 1000).unwrap())
            .decay(0.05)
            .unwrap();
        feed(&mut v, 3, 10);
        let before = v.limit();
        // Latency quadruples for good. The limit drops, and the cuts do not
        // lower the RTT, so the no-load RTT rises (by 5 % a window while 8
        // busy windows show it) instead of staying at 10 ms, where it would
        // pin the limit to its floor; the limit stops falling once Vegas's
        // queue estimate is inside [alpha, beta], where it holds (and the
        // no-load RTT, shown nothing more, stays where it got to: Vegas
        // learns only while its limit moves; see docs/concurrency.md).
        let mut lowest = before;
        for _ in 0..100 {
            lowest = lowest.min(feed(&mut v, 1, 40));
        }
        let learned = v.min_rtt().unwrap();
        assert!(learned > Duration::from_millis(20), "{learned:?}");
        let after = v.limit();
        // queue = limit · (1 − noload / 40) within beta = 6 · log10(limit).
        let queue = f64::from(after) * (1.0 - learned.as_secs_f64() * 1e3 / 40.0);
        assert!(
            after >= 10 && after >= lowest,
            "limit {after} (lowest {lowest}, was {before})"
        );
        assert!(
            queue <= 6.0 * f64::from(after).log10().max(1.0) + 1.0,
            "queue {queue}"
        );
    }
}
