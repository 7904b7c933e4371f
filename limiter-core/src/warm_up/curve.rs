//! The warm-up curve (Guava's `SmoothWarmingUp`) in nanoseconds and
//! permits, and the state word's packing: pure functions of their inputs,
//! unit-tested without threads.

use crate::error::QuotaError;

const FRACTION: f64 = (1u64 << 32) as f64;

/// The warm-up curve, in nanoseconds and permits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Curve {
    pub(super) stable: f64,
    pub(super) cold: f64,
    pub(super) threshold: f64,
    pub(super) max: f64,
    pub(super) slope: f64,
    pub(super) cool_down: f64,
}

impl Curve {
    pub(super) fn new(period: u64, warm_up: u64, cold_factor: f64) -> Result<Curve, QuotaError> {
        if !(cold_factor.is_finite() && cold_factor >= 1.0) {
            return Err(QuotaError::InvalidParameter {
                name: "cold_factor",
                requirement: "a finite number ≥ 1",
            });
        }
        let (stable, w) = (period as f64, warm_up as f64);
        let cold = cold_factor * stable;
        let threshold = 0.5 * w / stable;
        let max = threshold + 2.0 * w / (stable + cold);
        if max > f64::from(1u32 << 31) {
            return Err(QuotaError::InvalidParameter {
                name: "warm_up",
                requirement: "short enough that warm_up / period stays under 2^31 stored permits",
            });
        }
        Ok(Curve {
            stable,
            cold,
            threshold,
            max,
            slope: (cold - stable) / (max - threshold),
            cool_down: w / max,
        })
    }

    /// The interval of the stored permit `p` permits above the threshold
    /// (Guava's `permitsToTime`).
    pub(super) fn permits_to_time(&self, p: f64) -> f64 {
        self.stable + p * self.slope
    }

    /// The state `(next_free, stored)` of `word` as seen at limiter time
    /// `now`: idle time since `next_free` refilled into stored permits.
    pub(super) fn refill(&self, word: u128, now: u64) -> (u64, f64) {
        let (next_free, stored) = unpack(word);
        if now > next_free {
            let stored = (stored + (now - next_free) as f64 / self.cool_down).min(self.max);
            (now, stored)
        } else {
            (next_free, stored)
        }
    }

    /// `next_free` and stored permits after a request for `n` permits that
    /// proceeds at `next_free` with `stored` permits: it spends
    /// `min(n, stored)` of them and pays the stable interval for the rest.
    /// Saturates at `u64::MAX`, which is out of every range.
    pub(super) fn spend(&self, next_free: u64, stored: f64, n: u32) -> (u64, f64) {
        let spend = f64::from(n).min(stored);
        let cost = self.stored_cost(stored, spend) + self.stable * (f64::from(n) - spend);
        (next_free.saturating_add(ceil_nanos(cost)), stored - spend)
    }

    /// Nanoseconds that spending `take` of `stored` permits costs (Guava's
    /// `storedPermitsToWaitTime`, in the same order of operations): the
    /// integral of the interval from `stored − take` to `stored`.
    pub(super) fn stored_cost(&self, stored: f64, mut take: f64) -> f64 {
        let above = stored - self.threshold;
        let mut cost = 0.0;
        if above > 0.0 {
            let take_above = above.min(take);
            let length = self.permits_to_time(above) + self.permits_to_time(above - take_above);
            cost = take_above * length / 2.0;
            take -= take_above;
        }
        cost + self.stable * take
    }
}

/// `(next_free, stored)` packed into the 128-bit word.
pub(super) fn pack(next_free: u64, stored: f64) -> u128 {
    // `as` saturates; stored ≤ 2^31, so stored·2^32 < 2^63.
    (u128::from(next_free) << 64) | u128::from((stored * FRACTION) as u64)
}

pub(super) fn unpack(word: u128) -> (u64, f64) {
    ((word >> 64) as u64, (word as u64) as f64 / FRACTION)
}

/// Rounds a non-negative cost up to whole nanoseconds, saturating.
pub(super) fn ceil_nanos(x: f64) -> u64 {
    let floor = x as u64;
    if (floor as f64) < x {
        floor.saturating_add(1)
    } else {
        floor
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn guavas_curve_for_two_per_second_and_four_seconds() {
        let c = Curve::new(500_000_000, 4_000_000_000, 3.0).unwrap();
        assert_eq!((c.threshold, c.max, c.cold), (4.0, 8.0, 1.5e9));
        assert_eq!(c.slope, 2.5e8);
        assert_eq!(c.stored_cost(8.0, 1.0), 1.375e9);
        assert_eq!(c.stored_cost(5.0, 2.0), 0.625e9 + 0.5e9);
        assert_eq!(c.cool_down, 5e8);
    }

    #[test]
    fn the_word_round_trips() {
        assert_eq!(unpack(pack(123, 7.25)), (123, 7.25));
        assert_eq!(ceil_nanos(2.0), 2);
        assert_eq!(ceil_nanos(2.000_001), 3);
    }
}
