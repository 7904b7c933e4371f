//! [`TwoTierLimiter`]: a per-instance cap decided in process, then the
//! global quota decided on Redis, all or nothing.
//!
//! Every acquisition takes this path:
//!
//! 1. The **local tier**, a `limiter_keyed::KeyedLimiter` (one lock-free GCRA
//!    per key, this instance's cap), reserves the permits. A refusal is
//!    answered at once, [`Source::InstanceCap`], without calling Redis.
//! 2. The **global tier**, a [`RedisLimiter`], decides with its usual path
//!    (deny cache, leases, breaker, failure policy).
//! 3. If the global tier refuses (or fails), the local reservation is
//!    cancelled, so the instance's cap is not charged for a request that
//!    was not admitted.
//!
//! Invariants: an admitted request was admitted by both tiers, so each
//! instance stays under its cap and the fleet under the global quota (or
//! under the failure policy's answer while Redis is unavailable); a request
//! refused by either tier charges neither (the local give-back is exact when
//! no other decision on the key lands in between; otherwise its permit stays
//! spent, the strict side). A call whose future is dropped during the Redis
//! call keeps its local permit (it may have been admitted globally).
//!
//! When it pays, against leases (the other way to spare Redis): see
//! `docs/distributed.md`, "Two tiers or leases".

use core::time::Duration;

use limiter_core::{AcquireError, Quota};
use limiter_keyed::{KeyedError, KeyedLimiter, WhenFull};

use crate::admission::{Admission, Source};
use crate::error::RedisLimitError;
use crate::limiter::RedisLimiter;
use crate::time::LocalClock;

/// A per-instance cap in process in front of a global quota on Redis: a
/// request is admitted only if both admit it, and a local permit is given
/// back when Redis refuses.
///
/// The local tier counts on the global limiter's local clock (a monotonic
/// clock, or the client clock in client-clock mode). It tracks at most
/// [`KeyedLimiter::DEFAULT_MAX_KEYS`](limiter_keyed::KeyedLimiter::DEFAULT_MAX_KEYS)
/// keys and, when full, forgets the one with the least debt (a key it
/// forgets comes back with its whole local burst; the global tier still
/// holds it).
///
/// # Examples
///
/// ```no_run
/// use limiter_core::Quota;
/// use limiter_redis::{RedisLimitError, RedisLimiter, Source, TwoTierLimiter};
///
/// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
/// // 1,000/s per key for the fleet; 300/s per key on this instance.
/// let global = RedisLimiter::new(conn, Quota::per_second(1_000)?.with_burst(100)?)?;
/// let limiter = TwoTierLimiter::new(global, Quota::per_second(300)?.with_burst(30)?)?;
/// match limiter.try_acquire("user:42").await {
///     Ok(granted) => println!("allowed by {:?}", granted.source),
///     Err(RedisLimitError::RateLimited { source: Source::InstanceCap, .. }) => {
///         println!("this instance's share is spent; Redis was not asked")
///     }
///     Err(other) => println!("{other}"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TwoTierLimiter {
    local: KeyedLimiter<String, LocalClock>,
    global: RedisLimiter,
}

impl TwoTierLimiter {
    /// A two-tier limiter: `local` per key on this instance, in front of
    /// `global`.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::InvalidParameter`] if the local quota cannot make
    /// a keyed limiter (it always can for a valid `Quota`).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimiter, TwoTierLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let global = RedisLimiter::new(conn, Quota::per_second(100)?.with_burst(20)?)?;
    /// let limiter = TwoTierLimiter::new(global, Quota::per_second(25)?.with_burst(5)?)?;
    /// assert_eq!(limiter.local_quota().burst(), 5);
    /// assert_eq!(limiter.local_available("k"), 5); // nothing asked of Redis yet
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(global: RedisLimiter, local: Quota) -> Result<TwoTierLimiter, RedisLimitError> {
        let local = KeyedLimiter::builder(local)
            .when_full(WhenFull::EvictLeastRecent)
            .clock(global.inner.clock.clone())
            .build()
            .map_err(|_| RedisLimitError::InvalidParameter {
                name: "local quota",
                requirement: "a quota a keyed limiter accepts",
            })?;
        Ok(TwoTierLimiter { local, global })
    }

    /// Takes one permit on `key` from both tiers, or from neither.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](TwoTierLimiter::try_acquire_n).
    pub async fn try_acquire(&self, key: &str) -> Result<Admission, RedisLimitError> {
        self.try_acquire_n(key, 1).await
    }

    /// Takes `n` permits on `key` now from both tiers, or from neither.
    ///
    /// # Errors
    ///
    /// * [`RedisLimitError::RateLimited`] with [`Source::InstanceCap`] when
    ///   this instance's cap refuses (no Redis call), with its exact wait.
    /// * [`RedisLimitError::InsufficientCapacity`] when `n` exceeds either
    ///   tier's burst.
    /// * Otherwise whatever the global [`RedisLimiter::try_acquire_n`]
    ///   answers (its denials and failures), after the local permits were
    ///   given back.
    pub async fn try_acquire_n(&self, key: &str, n: u32) -> Result<Admission, RedisLimitError> {
        self.decide(key, n, Duration::ZERO).await
    }

    /// Claims `n` permits on `key` at a slot at most `max_wait` away on both
    /// tiers, or on neither; the grant's `wait` is the longer of the two.
    /// It does not sleep.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](TwoTierLimiter::try_acquire_n), with the slot
    /// allowed `max_wait`.
    pub async fn reserve_n(
        &self,
        key: &str,
        n: u32,
        max_wait: Duration,
    ) -> Result<Admission, RedisLimitError> {
        self.decide(key, n, max_wait).await
    }

    /// Permits this instance's cap would grant `key` now.
    pub fn local_available(&self, key: &str) -> u32 {
        self.local.available(&key.to_owned())
    }

    /// The per-instance quota of every key.
    pub fn local_quota(&self) -> Quota {
        self.local.quota()
    }

    /// The global tier (its counters: [`RedisLimiter::redis_calls`]).
    pub fn global(&self) -> &RedisLimiter {
        &self.global
    }

    async fn decide(
        &self,
        key: &str,
        n: u32,
        max_wait: Duration,
    ) -> Result<Admission, RedisLimitError> {
        let owned = key.to_owned();
        let local = match self.local.reserve_n(&owned, n, max_wait) {
            Ok(r) => r,
            Err(e) => return Err(self.local_refusal(&owned, e)),
        };
        let global = if max_wait.is_zero() {
            self.global.try_acquire_n(key, n).await
        } else {
            self.global.reserve_n(key, n, max_wait).await
        };
        match global {
            Ok(mut admission) => {
                admission.wait = admission.wait.max(local.wait());
                admission.remaining = admission.remaining.min(self.local.available(&owned));
                Ok(admission)
            }
            Err(e) => {
                // Refused (or failed) globally: this instance gives its
                // permits back.
                let _ = self.local.cancel(&owned, local);
                Err(e)
            }
        }
    }

    fn local_refusal(&self, key: &String, error: KeyedError) -> RedisLimitError {
        match error {
            KeyedError::Limited(AcquireError::RateLimited { wait }) => {
                let quota = self.local.quota_of(key);
                let remaining = self.local.available(key);
                let missing = quota.burst() - remaining.min(quota.burst());
                RedisLimitError::RateLimited {
                    retry_after: wait,
                    reset_after: quota.period() * missing,
                    remaining,
                    source: Source::InstanceCap,
                }
            }
            KeyedError::Limited(AcquireError::InsufficientCapacity { requested, burst }) => {
                RedisLimitError::InsufficientCapacity { requested, burst }
            }
            other => RedisLimitError::LocalTier(other),
        }
    }
}
