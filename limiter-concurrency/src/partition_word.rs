//! The partition word of a [`PartitionedLimiter`](crate::PartitionedLimiter):
//! the limit and each partition's count in one `u128`, and the admission
//! decision on it as a pure function (the CAS loop that installs its result
//! is in `partition`).
//!
//! ```text
//!  127            96 95        72 71        48 47        24 23         0
//! +----------------+------------+------------+------------+------------+
//! |  limit (32)    |   n3 (24)  |   n2 (24)  |   n1 (24)  |   n0 (24)  |
//! +----------------+------------+------------+------------+------------+
//! ```
//!
//! `n_i` is the permits partition `i` holds. Partition `i`'s share is
//! `g_i = ⌊limit · share_i⌋` and its reserve `r_i = ⌈g_i · reserve⌉`;
//! [`admit`] allows one more permit to partition `i` when, after it,
//! `Σ n_j <= limit` and `Σ max(r_j, n_j) <= limit` (the argument is in the
//! `partition` module's documentation).

/// The most partitions a [`PartitionedLimiter`](crate::PartitionedLimiter) holds.
pub const MAX_PARTITIONS: usize = 4;

/// The largest limit of a [`PartitionedLimiter`](crate::PartitionedLimiter) (a count is 24 bits).
pub const MAX_PARTITIONED_LIMIT: u32 = (1 << 24) - 1;

const COUNT_BITS: u32 = 24;
const COUNT_MASK: u128 = (1 << COUNT_BITS) - 1;
const LIMIT_SHIFT: u32 = 96;

/// A word with `limit` and no permit held.
pub(crate) fn new(limit: u32) -> u128 {
    u128::from(limit) << LIMIT_SHIFT
}

/// `w` with one more permit counted for partition `i`, whatever the rule
/// says (the decision is [`admit`]).
pub(crate) fn plus_one(w: u128, i: usize) -> u128 {
    w + (1u128 << (COUNT_BITS * i as u32))
}

/// `w` with one permit of partition `i` given back. Partition `i` must
/// hold one.
pub(crate) fn minus_one(w: u128, i: usize) -> u128 {
    debug_assert!(count(w, i) > 0);
    w - (1u128 << (COUNT_BITS * i as u32))
}

/// The permits partition `i` holds.
pub(crate) fn count(w: u128, i: usize) -> u32 {
    ((w >> (COUNT_BITS * i as u32)) & COUNT_MASK) as u32
}

/// The limit.
pub(crate) fn limit_of(w: u128) -> u32 {
    (w >> LIMIT_SHIFT) as u32
}

/// `w` with `limit` in place of its limit (the counts kept).
pub(crate) fn with_limit(w: u128, limit: u32) -> u128 {
    (w & ((1u128 << LIMIT_SHIFT) - 1)) | (u128::from(limit) << LIMIT_SHIFT)
}

/// Share of a partition at `limit`.
pub(crate) fn guaranteed(limit: u32, share: f64) -> u32 {
    // share in (0, 1] and limit < 2^24: exact enough, never above limit.
    (f64::from(limit) * share).floor() as u32
}

/// The part of a share that is never lent.
pub(crate) fn reserved(limit: u32, share: f64, reserve: f64) -> u32 {
    (f64::from(guaranteed(limit, share)) * reserve).ceil() as u32
}

/// The admission decision for partition `i` on word `w`: the next word, or
/// `None`.
pub(crate) fn admit(w: u128, i: usize, shares: &[f64], reserve: f64) -> Option<u128> {
    let limit = limit_of(w);
    let mut total: u64 = 0;
    let mut reserved: u64 = 0;
    for (j, &share) in shares.iter().enumerate() {
        let n = u64::from(count(w, j)) + u64::from(j == i);
        total += n;
        reserved += n.max(u64::from(self::reserved(limit, share, reserve)));
    }
    (total <= u64::from(limit) && reserved <= u64::from(limit)).then(|| plus_one(w, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sequential reading of the rule, for comparison.
    fn model_admits(counts: &[u32], limit: u32, shares: &[f64], reserve: f64, i: usize) -> bool {
        let mut c = counts.to_vec();
        c[i] += 1;
        let total: u32 = c.iter().sum();
        let kept: u32 = c
            .iter()
            .zip(shares)
            .map(|(&n, &s)| n.max(((f64::from(limit) * s).floor() * reserve).ceil() as u32))
            .sum();
        total <= limit && kept <= limit
    }

    #[test]
    fn every_small_state_matches_the_model_and_keeps_guarantees() {
        let shares = [0.5, 0.3, 0.2];
        // Every state up to a limit of 10 (4 under miri, which is slow).
        let max = if cfg!(miri) { 4 } else { 10 };
        for reserve in [0.0, 0.5, 1.0] {
            for limit in 1..=max {
                for a in 0..=limit {
                    for b in 0..=limit - a {
                        for c in 0..=limit - a - b {
                            let w = new(limit)
                                | u128::from(a)
                                | (u128::from(b) << 24)
                                | (u128::from(c) << 48);
                            for i in 0..3 {
                                let got = admit(w, i, &shares, reserve).is_some();
                                assert_eq!(
                                    got,
                                    model_admits(&[a, b, c], limit, &shares, reserve, i)
                                );
                                let g = reserved(limit, shares[i], reserve);
                                // The guarantee holds in every state the rule
                                // admits into (all but those a cut leaves).
                                let reachable = [a, b, c]
                                    .iter()
                                    .zip(&shares)
                                    .map(|(&n, &s)| n.max(reserved(limit, s, reserve)))
                                    .sum::<u32>()
                                    <= limit;
                                if reachable && [a, b, c][i] < g {
                                    assert!(
                                        got,
                                        "below its reserve {g}, partition {i} is admitted"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
