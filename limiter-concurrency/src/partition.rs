//! [`PartitionedLimiter`]: one concurrency limit shared by partitions with
//! guaranteed shares (live 90 % / batch 10 %), borrowing idle share, all in
//! one atomic word.
//!
//! # The partition word
//!
//! ```text
//!  127            96 95        72 71        48 47        24 23         0
//! +----------------+------------+------------+------------+------------+
//! |  limit (32)    |   n3 (24)  |   n2 (24)  |   n1 (24)  |   n0 (24)  |
//! +----------------+------------+------------+------------+------------+
//! ```
//!
//! `n_i` is the permits partition `i` holds. Partition `i`'s share is
//! `g_i = ⌊limit · share_i⌋`; the shares add up to at most 1, so
//! `Σ g_i <= limit`. Of its share, a partition keeps a reserve
//! `r_i = ⌈g_i · reserve⌉` (`reserve` in `[0, 1]`, default ½) that is never
//! lent; the rest of an idle share is lent to partitions that want more. An
//! admission to partition `i` is one CAS, allowed when, after it,
//!
//! * `Σ n_j <= limit` (the global limit), and
//! * `Σ max(r_j, n_j) <= limit` (every other partition's idle reserve stays
//!   free for it).
//!
//! A partition below its reserve always passes the second test without
//! changing the sum, and then `Σ n_j < limit` (the sum of maxima exceeds the
//! sum of counts by at least `r_i - n_i > 0`), so **a partition below its
//! reserve is always admitted at once**; between its reserve and its share
//! it is admitted whenever the global limit has room, and lent share comes
//! back as borrowers release (no permit is revoked). `reserve = 1` lends
//! nothing (strict shares), `reserve = 0` lends everything (one global
//! limit with per-partition accounting). Because both tests read the
//! one word the CAS replaces, no interleaving admits more than the limit
//! (the check-then-act race of a per-partition counter beside a global one
//! cannot happen). A limit cut revokes nothing; releases bring the counts
//! down.

use core::fmt;

use crate::error::{ConfigError, NoPermit, check_f64};
use crate::sync::{AtomicU128, Ordering};

/// The most partitions a [`PartitionedLimiter`] holds.
pub const MAX_PARTITIONS: usize = 4;

/// The largest limit of a [`PartitionedLimiter`] (a count is 24 bits).
pub const MAX_PARTITIONED_LIMIT: u32 = (1 << 24) - 1;

const COUNT_BITS: u32 = 24;
const COUNT_MASK: u128 = (1 << COUNT_BITS) - 1;
const LIMIT_SHIFT: u32 = 96;

fn count(w: u128, i: usize) -> u32 {
    ((w >> (COUNT_BITS * i as u32)) & COUNT_MASK) as u32
}

fn limit_of(w: u128) -> u32 {
    (w >> LIMIT_SHIFT) as u32
}

fn with_limit(w: u128, limit: u32) -> u128 {
    (w & ((1u128 << LIMIT_SHIFT) - 1)) | (u128::from(limit) << LIMIT_SHIFT)
}

/// Share of a partition at `limit`.
fn guaranteed(limit: u32, share: f64) -> u32 {
    // share in (0, 1] and limit < 2^24: exact enough, never above limit.
    (f64::from(limit) * share).floor() as u32
}

/// The part of a share that is never lent.
fn reserved(limit: u32, share: f64, reserve: f64) -> u32 {
    (f64::from(guaranteed(limit, share)) * reserve).ceil() as u32
}

/// The admission decision for partition `i` on word `w`: the next word, or
/// `None`.
fn admit(w: u128, i: usize, shares: &[f64], reserve: f64) -> Option<u128> {
    let limit = limit_of(w);
    let mut total: u64 = 0;
    let mut reserved: u64 = 0;
    for (j, &share) in shares.iter().enumerate() {
        let n = u64::from(count(w, j)) + u64::from(j == i);
        total += n;
        reserved += n.max(u64::from(self::reserved(limit, share, reserve)));
    }
    (total <= u64::from(limit) && reserved <= u64::from(limit))
        .then(|| w + (1u128 << (COUNT_BITS * i as u32)))
}

/// Why a partition got no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionRefusal {
    /// No permit is free for this partition now.
    NoPermit(NoPermit),
    /// There is no partition with this index.
    UnknownPartition(usize),
}

impl fmt::Display for PartitionRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionRefusal::NoPermit(n) => n.fmt(f),
            PartitionRefusal::UnknownPartition(i) => write!(f, "no partition {i}"),
        }
    }
}

impl std::error::Error for PartitionRefusal {}

/// A concurrency limit divided into partitions with guaranteed shares.
///
/// # Examples
///
/// ```
/// use limiter_concurrency::PartitionedLimiter;
///
/// // Strict shares: live holds 9 of 10 for itself, batch 1.
/// let limiter = PartitionedLimiter::with_reserve(10, &[0.9, 0.1], 1.0)?;
/// let batch: Vec<_> = (0..1).map(|_| limiter.try_acquire(1).unwrap()).collect();
/// assert!(limiter.try_acquire(1).is_err()); // the other 9 are live's
/// let live: Vec<_> = (0..9).map(|_| limiter.try_acquire(0).unwrap()).collect();
/// assert_eq!(limiter.in_flight(), 10);
/// # drop((batch, live));
/// # Ok::<(), limiter_concurrency::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct PartitionedLimiter {
    state: AtomicU128,
    shares: Vec<f64>,
    reserve: f64,
    #[cfg(loom)]
    broken: crate::loom_hooks::Broken,
}

impl PartitionedLimiter {
    /// A limit of `limit` divided into partitions with these shares (each
    /// in `(0, 1]`, adding up to at most 1). Partition `i` is `shares[i]`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`], [`ConfigError::PartitionedLimitTooLarge`],
    /// [`ConfigError::PartitionCount`], [`ConfigError::OutOfRange`] for a
    /// share outside `(0, 1]` or NaN, [`ConfigError::PartitionShares`] when
    /// they add up to more than 1.
    pub fn new(limit: u32, shares: &[f64]) -> Result<PartitionedLimiter, ConfigError> {
        PartitionedLimiter::with_reserve(limit, shares, 0.5)
    }

    /// As [`new`](Self::new), keeping `reserve` of each share unlent
    /// (`1`: strict shares, `0`: lend everything).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), and [`ConfigError::OutOfRange`] for a
    /// `reserve` outside `[0, 1]` or NaN.
    pub fn with_reserve(
        limit: u32,
        shares: &[f64],
        reserve: f64,
    ) -> Result<PartitionedLimiter, ConfigError> {
        check_partitioned_limit(limit)?;
        let reserve = check_f64("reserve", reserve, 0.0, false, 1.0, "[0, 1]")?;
        if shares.is_empty() || shares.len() > MAX_PARTITIONS {
            return Err(ConfigError::PartitionCount {
                count: shares.len(),
            });
        }
        for &s in shares {
            check_f64("share", s, 0.0, true, 1.0, "(0, 1]")?;
        }
        let sum: f64 = shares.iter().sum();
        // A small tolerance: 0.9 + 0.1 is not exactly 1 in binary.
        if sum > 1.0 + 1e-9 {
            return Err(ConfigError::PartitionShares { sum });
        }
        Ok(PartitionedLimiter {
            state: AtomicU128::new(u128::from(limit) << LIMIT_SHIFT),
            shares: shares.to_vec(),
            reserve,
            #[cfg(loom)]
            broken: crate::loom_hooks::Broken::None,
        })
    }

    #[cfg(loom)]
    #[doc(hidden)]
    pub fn __loom_broken(
        limit: u32,
        shares: &[f64],
        reserve: f64,
        broken: crate::loom_hooks::Broken,
    ) -> Result<PartitionedLimiter, ConfigError> {
        let mut l = PartitionedLimiter::with_reserve(limit, shares, reserve)?;
        l.broken = broken;
        Ok(l)
    }

    /// The fault of [`Broken::PartitionCheckThenAdd`](crate::loom_hooks::Broken):
    /// the decision on one reading, the increment on another.
    #[cfg(loom)]
    fn check_then_add(&self, partition: usize) -> bool {
        let w = self.state.load(Ordering::Relaxed);
        if admit(w, partition, &self.shares, self.reserve).is_none() {
            return false;
        }
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            let next = cur + (1u128 << (COUNT_BITS * partition as u32));
            match self
                .state
                .compare_exchange_weak(cur, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// A permit for `partition` now. One CAS (see the module docs).
    ///
    /// # Errors
    ///
    /// [`PartitionRefusal::UnknownPartition`] for an index past the last;
    /// [`PartitionRefusal::NoPermit`] when the global limit or another
    /// partition's idle guaranteed share leaves no room.
    pub fn try_acquire(&self, partition: usize) -> Result<PartitionPermit<'_>, PartitionRefusal> {
        if partition >= self.shares.len() {
            return Err(PartitionRefusal::UnknownPartition(partition));
        }
        #[cfg(loom)]
        if self.broken == crate::loom_hooks::Broken::PartitionCheckThenAdd {
            let w = self.state.load(Ordering::Relaxed);
            return if self.check_then_add(partition) {
                Ok(PartitionPermit {
                    limiter: self,
                    partition,
                })
            } else {
                Err(PartitionRefusal::NoPermit(NoPermit {
                    limit: limit_of(w),
                    in_flight: self.total(w),
                }))
            };
        }
        // Relaxed: only the CAS decides.
        let mut w = self.state.load(Ordering::Relaxed);
        loop {
            let Some(next) = admit(w, partition, &self.shares, self.reserve) else {
                return Err(PartitionRefusal::NoPermit(NoPermit {
                    limit: limit_of(w),
                    in_flight: self.total(w),
                }));
            };
            // Acquire: the holder sees the previous holder's work.
            match self
                .state
                .compare_exchange_weak(w, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Ok(PartitionPermit {
                        limiter: self,
                        partition,
                    });
                }
                Err(actual) => w = actual,
            }
        }
    }

    fn release(&self, partition: usize) {
        // Relaxed: only the CAS decides.
        let mut w = self.state.load(Ordering::Relaxed);
        loop {
            let next = w - (1u128 << (COUNT_BITS * partition as u32));
            // Release: the holder's work happens-before the next admission.
            match self
                .state
                .compare_exchange_weak(w, next, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => w = actual,
            }
        }
    }

    /// Sets the global limit (the guaranteed shares follow it); returns the
    /// previous one. A cut revokes no permit.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`] or [`ConfigError::PartitionedLimitTooLarge`].
    pub fn set_limit(&self, limit: u32) -> Result<u32, ConfigError> {
        check_partitioned_limit(limit)?;
        // Relaxed: only the CAS decides.
        let mut w = self.state.load(Ordering::Relaxed);
        loop {
            // AcqRel: orders like a release and an admission.
            match self.state.compare_exchange_weak(
                w,
                with_limit(w, limit),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(limit_of(w)),
                Err(actual) => w = actual,
            }
        }
    }

    /// The global limit.
    pub fn limit(&self) -> u32 {
        // Acquire: informational reads see the holders' writes.
        limit_of(self.state.load(Ordering::Acquire))
    }

    /// Permits held by all partitions.
    pub fn in_flight(&self) -> u32 {
        // Acquire: as `limit`.
        self.total(self.state.load(Ordering::Acquire))
    }

    /// Permits held by `partition` (0 for an unknown one).
    pub fn partition_in_flight(&self, partition: usize) -> u32 {
        if partition >= self.shares.len() {
            return 0;
        }
        // Acquire: as `limit`.
        count(self.state.load(Ordering::Acquire), partition)
    }

    /// `partition`'s share at the current limit: what it may hold whenever
    /// the global limit has room, whatever the others do.
    pub fn guaranteed(&self, partition: usize) -> u32 {
        self.shares
            .get(partition)
            .map_or(0, |&s| guaranteed(self.limit(), s))
    }

    /// The part of `partition`'s share never lent: admitted at once
    /// whatever the others hold.
    pub fn reserved(&self, partition: usize) -> u32 {
        self.shares
            .get(partition)
            .map_or(0, |&s| reserved(self.limit(), s, self.reserve))
    }

    /// How many partitions there are.
    pub fn partitions(&self) -> usize {
        self.shares.len()
    }

    fn total(&self, w: u128) -> u32 {
        (0..self.shares.len()).map(|j| count(w, j)).sum()
    }
}

fn check_partitioned_limit(limit: u32) -> Result<u32, ConfigError> {
    if limit == 0 {
        Err(ConfigError::ZeroLimit { name: "limit" })
    } else if limit > MAX_PARTITIONED_LIMIT {
        Err(ConfigError::PartitionedLimitTooLarge { value: limit })
    } else {
        Ok(limit)
    }
}

/// A permit of one partition; dropping it releases it.
#[derive(Debug)]
#[must_use = "dropping a permit releases it at once"]
pub struct PartitionPermit<'a> {
    limiter: &'a PartitionedLimiter,
    partition: usize,
}

impl PartitionPermit<'_> {
    /// The partition this permit counts against.
    pub fn partition(&self) -> usize {
        self.partition
    }
}

impl Drop for PartitionPermit<'_> {
    fn drop(&mut self) {
        self.limiter.release(self.partition);
    }
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
                            let w = (u128::from(limit) << LIMIT_SHIFT)
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
