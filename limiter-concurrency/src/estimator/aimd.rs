//! [`Aimd`]: additive increase, multiplicative decrease, on loss signals.
//!
//! The signal is loss only: a dropped sample (an error, a downstream
//! 429/503) or one slower than `timeout`. Each successful sample taken while
//! the limit is in use (`2 · in_flight >= limit`, so an idle caller does not
//! inflate the limit it never reaches) adds `1 / limit`, about one permit per
//! round; each loss multiplies the limit by `backoff`, at most once per
//! round (the losses of one overload episode arrive together and would
//! otherwise cut it to the floor).
//!
//! Failure mode: it finds the limit by causing loss, so it runs at the edge
//! where requests start timing out; where latency matters, use a delay
//! signal ([`Vegas`](crate::Vegas), [`Gradient2`](crate::Gradient2)).

use core::time::Duration;

use super::{Bounds, Estimator, Sample};
use crate::error::{ConfigError, check_f64};

/// Additive increase, multiplicative decrease on loss.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_concurrency::{Aimd, Bounds, Estimator, Sample};
///
/// let mut aimd = Aimd::new(Bounds::new(10, 1, 100)?).backoff(0.5)?;
/// let drop = Sample { rtt: Duration::from_millis(5), in_flight: 10, dropped: true };
/// assert_eq!(aimd.sample(drop), 5);
/// # Ok::<(), limiter_concurrency::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Aimd {
    bounds: Bounds,
    limit: f64,
    backoff: f64,
    timeout: Duration,
    /// Samples until another loss may cut again.
    cooldown: u32,
}

impl Aimd {
    /// AIMD within `bounds`, backoff 0.9, timeout 5 s.
    pub fn new(bounds: Bounds) -> Aimd {
        Aimd {
            bounds,
            limit: f64::from(bounds.initial),
            backoff: 0.9,
            timeout: Duration::from_secs(5),
            cooldown: 0,
        }
    }

    /// The factor a loss multiplies the limit by, in `[0.5, 1)`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] outside `[0.5, 1)` or NaN.
    pub fn backoff(mut self, backoff: f64) -> Result<Aimd, ConfigError> {
        let b = check_f64("backoff", backoff, 0.5, false, 1.0, "[0.5, 1)")?;
        if b >= 1.0 {
            return Err(ConfigError::OutOfRange {
                name: "backoff",
                value: b,
                range: "[0.5, 1)",
            });
        }
        self.backoff = b;
        Ok(self)
    }

    /// A successful sample slower than this counts as a loss.
    pub fn timeout(mut self, timeout: Duration) -> Aimd {
        self.timeout = timeout;
        self
    }
}

impl Estimator for Aimd {
    fn sample(&mut self, s: Sample) -> u32 {
        self.cooldown = self.cooldown.saturating_sub(1);
        if s.dropped || s.rtt > self.timeout {
            if self.cooldown == 0 {
                self.limit = self.bounds.clamp((self.limit * self.backoff).floor());
                self.cooldown = self.limit as u32;
            }
        } else if 2 * u64::from(s.in_flight) >= self.limit as u64 {
            self.limit = self.bounds.clamp(self.limit + 1.0 / self.limit);
        }
        self.limit()
    }

    fn limit(&self) -> u32 {
        self.limit as u32
    }

    fn override_limit(&mut self, limit: u32) {
        self.limit = self.bounds.clamp(f64::from(limit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(ms: u64, in_flight: u32) -> Sample {
        Sample {
            rtt: Duration::from_millis(ms),
            in_flight,
            dropped: false,
        }
    }

    #[test]
    fn grows_one_per_round_while_busy_and_halves_once_per_round() {
        let mut a = Aimd::new(Bounds::new(4, 1, 100).unwrap())
            .backoff(0.5)
            .unwrap();
        // 4 busy samples at limit 4 add 4 · 1/4.x: just under one permit.
        for _ in 0..5 {
            a.sample(ok(10, 4));
        }
        assert_eq!(a.limit(), 5);
        // An idle caller (1 in flight of 5) does not raise it.
        for _ in 0..50 {
            a.sample(ok(10, 1));
        }
        assert_eq!(a.limit(), 5);
        // A timeout is a loss: 5 → 2; the burst of losses right after it
        // (within one round of 2 samples) does not cut again.
        let slow = Sample {
            rtt: Duration::from_secs(6),
            in_flight: 5,
            dropped: false,
        };
        assert_eq!(a.sample(slow), 2);
        assert_eq!(a.sample(slow), 2);
        assert_eq!(a.sample(slow), 1);
        assert_eq!(a.sample(slow), 1, "never below min_limit");
    }

    #[test]
    fn bad_backoff_is_a_typed_error() {
        let b = Bounds::new(4, 1, 100).unwrap();
        assert!(matches!(
            Aimd::new(b).backoff(f64::NAN),
            Err(ConfigError::OutOfRange {
                name: "backoff",
                ..
            })
        ));
        assert!(Aimd::new(b).backoff(1.0).is_err());
        assert!(Aimd::new(b).backoff(0.4).is_err());
    }
}
