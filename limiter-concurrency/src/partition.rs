//! [`PartitionedLimiter`]: one concurrency limit shared by partitions with
//! guaranteed shares (live 90 % / batch 10 %), borrowing idle share, all in
//! one atomic word.
//!
//! # The rule
//!
//! The limit and every partition's count live in one `u128` (the layout
//! and the admission decision as pure functions are in `partition_word`).
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
use crate::partition_word::{self as word, admit, count, limit_of, with_limit};
pub use crate::partition_word::{MAX_PARTITIONED_LIMIT, MAX_PARTITIONS};
use crate::sync::{AtomicU128, Ordering};

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
            state: AtomicU128::new(word::new(limit)),
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
            let next = word::plus_one(cur, partition);
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
            let next = word::minus_one(w, partition);
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
            .map_or(0, |&s| word::guaranteed(self.limit(), s))
    }

    /// The part of `partition`'s share never lent: admitted at once
    /// whatever the others hold.
    pub fn reserved(&self, partition: usize) -> u32 {
        self.shares
            .get(partition)
            .map_or(0, |&s| word::reserved(self.limit(), s, self.reserve))
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
