//! A fixed, lock-free, log-linear histogram of latencies: one `AtomicU64`
//! counter per bucket, no allocation, no lock.
//!
//! # Buckets
//!
//! Values are nanoseconds. Values below 16 have a bucket each (exact). A
//! value `v ≥ 16` with highest set bit `e` (`2^e ≤ v < 2^(e+1)`) falls in
//! octave `e`, which is split into 16 equal sub-buckets of width
//! `2^(e-4)`: the next four bits of `v` after its highest one pick the
//! sub-bucket. Octaves run from `e = 4` to `e = 39`, so values up to
//! `2^40 − 1` ns (about 18 minutes) are resolved and larger ones are counted
//! in the last bucket.
//!
//! That is `16 + 36 · 16 = 592` buckets, 4,736 bytes of counters.
//!
//! # Relative error
//!
//! A percentile is reported as the *highest* value of the bucket it falls
//! in, so it never under-reports: for a true value `v ≥ 16` the report `r`
//! satisfies `v ≤ r < v · (1 + 1/16)`, a relative error below 6.25 %
//! (exact below 16 ns; saturated at `2^40 − 1` ns above).
//!
//! # Concurrency
//!
//! [`LatencyHistogram::record`] is one relaxed `fetch_add`. [`drain`]
//! (`LatencyHistogram::drain`) moves every counter into a snapshot with
//! `swap(0)`, so every sample is counted in exactly one snapshot even while
//! other threads keep recording: a sample recorded during a drain lands
//! either in this snapshot or in the next.

use crate::sync::{AtomicU64, Ordering};

/// Sub-buckets per octave, as a power of two.
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// The first octave above the exact buckets.
const FIRST_EXP: u32 = SUB_BITS;
/// One past the last resolved octave: values from `2^LAST_EXP` saturate.
const LAST_EXP: u32 = 40;
/// How many buckets there are.
pub(crate) const BUCKETS: usize = SUB + (LAST_EXP - FIRST_EXP) as usize * SUB;
/// The largest value reported: the top of the last bucket.
pub(crate) const MAX_VALUE: u64 = (1 << LAST_EXP) - 1;

/// The bucket of `nanos`.
#[inline]
pub(crate) fn bucket_of(nanos: u64) -> usize {
    if nanos < SUB as u64 {
        return nanos as usize;
    }
    let v = nanos.min(MAX_VALUE);
    let e = 63 - v.leading_zeros();
    let sub = ((v >> (e - SUB_BITS)) as usize) & (SUB - 1);
    SUB + (e - FIRST_EXP) as usize * SUB + sub
}

/// The highest value that falls in `bucket`.
pub(crate) fn bucket_high(bucket: usize) -> u64 {
    if bucket < SUB {
        return bucket as u64;
    }
    let e = (bucket - SUB) as u32 / SUB as u32 + FIRST_EXP;
    let sub = ((bucket - SUB) % SUB) as u64;
    let width = 1u64 << (e - SUB_BITS);
    ((SUB as u64 + sub) << (e - SUB_BITS)) + width - 1
}

/// Counters of latencies in log-linear buckets.
#[derive(Debug)]
pub(crate) struct LatencyHistogram {
    counts: [AtomicU64; BUCKETS],
}

impl LatencyHistogram {
    pub(crate) fn new() -> LatencyHistogram {
        LatencyHistogram {
            counts: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Counts one sample of `nanos`.
    #[inline]
    pub(crate) fn record(&self, nanos: u64) {
        // Relaxed: a counter; the drain's swap reads every increment exactly
        // once whatever the order, and nothing else is published with it.
        self.counts[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
    }

    /// Moves every count into a snapshot and restarts at zero.
    pub(crate) fn drain(&self) -> Snapshot {
        let mut counts = [0u64; BUCKETS];
        for (out, c) in counts.iter_mut().zip(self.counts.iter()) {
            // Relaxed: as in `record`; swap takes each increment exactly once.
            *out = c.swap(0, Ordering::Relaxed);
        }
        Snapshot { counts }
    }
}

/// The counts of one window, taken by [`LatencyHistogram::drain`].
#[derive(Debug)]
pub(crate) struct Snapshot {
    counts: [u64; BUCKETS],
}

impl Snapshot {
    /// How many samples the window holds.
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &c| a.saturating_add(c))
    }

    /// The `per_mille`/1000 quantile as the highest value of its bucket
    /// (the smallest bucket whose cumulative count reaches
    /// `ceil(total · per_mille / 1000)`), or `None` for an empty window.
    pub(crate) fn quantile(&self, per_mille: u32) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = (u128::from(total) * u128::from(per_mille))
            .div_ceil(1000)
            .max(1);
        let mut seen = 0u128;
        for (bucket, &c) in self.counts.iter().enumerate() {
            seen += u128::from(c);
            if seen >= rank {
                return Some(bucket_high(bucket));
            }
        }
        Some(MAX_VALUE)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_in_order() {
        assert_eq!(BUCKETS, 592);
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(15), 15);
        assert_eq!(bucket_of(16), 16);
        assert_eq!(bucket_of(MAX_VALUE), BUCKETS - 1);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_high(BUCKETS - 1), MAX_VALUE);
        // Each bucket starts one past the previous one's top.
        for b in 1..BUCKETS {
            let low = bucket_high(b - 1) + 1;
            assert_eq!(bucket_of(low), b, "low end of {b}");
            assert_eq!(bucket_of(bucket_high(b)), b, "high end of {b}");
        }
    }

    #[test]
    fn relative_error_is_below_one_sixteenth() {
        let mut v = 16u64;
        while v < MAX_VALUE {
            let r = bucket_high(bucket_of(v));
            assert!(r >= v && (r - v) * 16 < v, "{v} reported as {r}");
            v = v * 3 / 2 + 7;
        }
        assert_eq!(bucket_high(bucket_of(150_000_000)), 150_994_943);
    }

    #[test]
    fn quantiles_and_drain() {
        let h = LatencyHistogram::new();
        assert_eq!(h.drain().quantile(990), None);
        for _ in 0..99 {
            h.record(10);
        }
        h.record(1_000_000);
        let s = h.drain();
        assert_eq!(s.total(), 100);
        assert_eq!(s.quantile(990), Some(10));
        assert_eq!(s.quantile(1000), Some(bucket_high(bucket_of(1_000_000))));
        assert_eq!(h.drain().total(), 0, "drained to zero");
        h.record(3);
        assert_eq!(h.drain().quantile(0), Some(3));
    }
}
