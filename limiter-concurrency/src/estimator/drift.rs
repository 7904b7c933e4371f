//! [`DriftGuard`]: stops raises that buy no throughput.
//!
//! A delay-based estimator compares the RTT with a baseline it learns; if the
//! baseline drifts up with the queue (Uber's "ever-drifting target
//! latency"), the limit grows and only adds queueing. The guard watches the
//! outcome instead of the latency: per window, Little's law gives the
//! throughput the window achieved, `X = mean in_flight / mean rtt`. Over the
//! last 16 windows it keeps `(limit, X)`, and at most every 8 windows
//! decides: when the limit spread over
//! them by at least 10 % and the throughput's elasticity in the limit (the
//! least-squares slope scaled by the means: 1 when throughput grows in
//! proportion, 0 when it does not move) is below 0.3, more concurrency bought
//! no throughput (Uber's covariance check, made scale-free), it moves the limit back to the smallest limit whose
//! window reached 95 % of the best throughput seen (the knee), and starts
//! its history afresh. Otherwise it does nothing: the inner estimator
//! decides.

use core::time::Duration;
use std::collections::VecDeque;

use super::{Estimator, Sample, Window};

/// Wraps an estimator; cuts the limit back to the knee when raises stop
/// buying throughput.
///
/// # Examples
///
/// ```
/// use limiter_concurrency::{Bounds, DriftGuard, Estimator, Gradient2};
///
/// let guarded = DriftGuard::new(Gradient2::new(Bounds::new(10, 1, 1000)?));
/// assert_eq!(guarded.limit(), 10);
/// # Ok::<(), limiter_concurrency::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct DriftGuard<E> {
    inner: E,
    window: Window,
    history: VecDeque<(f64, f64)>,
    capacity: usize,
    /// Windows recorded since the last cut.
    since_cut: usize,
    /// The knee of the last cut and the best throughput then.
    last: Option<(f64, f64)>,
    cuts: u64,
}

/// Windows a decision needs since the last cut.
const DECIDE_AFTER: usize = 8;

impl<E: Estimator> DriftGuard<E> {
    /// Guards `inner`, deciding on the last 16 windows, at most once every 8.
    pub fn new(inner: E) -> DriftGuard<E> {
        DriftGuard {
            inner,
            window: Window::new(10),
            history: VecDeque::new(),
            capacity: 2 * DECIDE_AFTER,
            since_cut: 0,
            last: None,
            cuts: 0,
        }
    }

    /// The guarded estimator.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// How many times the guard cut the limit back.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    fn check(&mut self) -> Option<u32> {
        if self.since_cut < DECIDE_AFTER {
            return None;
        }
        let (lo, hi) = self
            .history
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &(l, _)| {
                (lo.min(l), hi.max(l))
            });
        if hi < lo * 1.1 || super::elasticity(&self.history) >= 0.3 {
            return None;
        }
        let best = self.history.iter().map(|&(_, x)| x).fold(0.0, f64::max);
        let knee = self
            .history
            .iter()
            .filter(|&&(_, x)| x >= 0.95 * best)
            .map(|&(l, _)| l)
            .fold(f64::MAX, f64::min);
        // The knee of the last cut stands unless throughput has grown since.
        let knee = match self.last {
            Some((last_knee, last_best)) if best <= 1.05 * last_best => knee.min(last_knee),
            _ => knee,
        };
        self.last = Some((knee, best));
        (knee < hi).then_some(knee as u32)
    }
}

impl<E: Estimator> Estimator for DriftGuard<E> {
    fn sample(&mut self, s: Sample) -> u32 {
        let limit = self.inner.sample(s);
        if let Some(w) = self.window.add(s, limit)
            && w.mean_rtt > 0.0
        {
            if self.history.len() == self.capacity {
                self.history.pop_front();
            }
            self.history
                .push_back((f64::from(limit), w.mean_in_flight / w.mean_rtt));
            self.since_cut += 1;
            if let Some(knee) = self.check() {
                self.inner.override_limit(knee);
                self.since_cut = 0;
                self.cuts += 1;
            }
        }
        self.inner.limit()
    }

    fn limit(&self) -> u32 {
        self.inner.limit()
    }

    fn override_limit(&mut self, limit: u32) {
        self.inner.override_limit(limit);
    }

    fn min_rtt(&self) -> Option<Duration> {
        self.inner.min_rtt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Estimator;

    /// An estimator that only ever raises: the drifting baseline at its worst.
    /// One permit more every 10 samples, whatever they say.
    #[derive(Debug)]
    struct Creeper(u32, u32);
    impl Estimator for Creeper {
        fn sample(&mut self, _: Sample) -> u32 {
            self.1 += 1;
            if self.1.is_multiple_of(10) {
                self.0 += 1;
            }
            self.0
        }
        fn limit(&self) -> u32 {
            self.0
        }
        fn override_limit(&mut self, limit: u32) {
            self.0 = limit;
        }
    }

    #[test]
    fn cuts_a_creeping_limit_back_to_the_knee() {
        // 20 servers of 10 ms: throughput 2 per ms at most; past 20 in
        // flight the RTT grows in proportion and the throughput stays.
        let mut g = DriftGuard::new(Creeper(10, 0));
        let mut peaks = [0u32; 2];
        for i in 0..40_000 {
            let l = g.limit();
            peaks[i / 20_000] = peaks[i / 20_000].max(l);
            let rtt = 10.0 * (f64::from(l) / 20.0).max(1.0);
            g.sample(Sample {
                rtt: Duration::from_micros((rtt * 1e3) as u64),
                in_flight: l,
                dropped: false,
            });
        }
        // It rises 10 % a window and the guard decides every 8 windows, so
        // it peaks at about 1.1^8 = 2.1 times the knee, and no higher later:
        // the creep does not ratchet from one cut to the next.
        assert!(g.cuts() >= 20, "{} cuts", g.cuts());
        assert!(peaks[0] <= 60 && peaks[1] <= peaks[0], "peaks {peaks:?}");
    }
}
