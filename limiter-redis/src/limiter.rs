//! [`RedisLimiter`]: the script's decision behind a per-call timeout, with
//! the deny cache and leases in front of it and the failure policy behind it.
//!
//! Every acquisition takes this path, stopping at the first answer:
//!
//! 1. `n > burst`: [`RedisLimitError::InsufficientCapacity`], no call.
//! 2. The deny cache, if on: a cached denial covering the request
//!    (`Err(RateLimited)`, [`Source::DenyCache`]).
//! 3. The lease, if on and the request is a plain try: leased permits
//!    ([`Source::Lease`]).
//! 4. The circuit breaker: while open, straight to the failure policy.
//! 5. One script call under `tokio::time::timeout` ([`Source::Redis`]); a
//!    call that times out or cannot reach Redis trips the breaker and is
//!    answered by the failure policy. It is **never retried**: it may have
//!    been applied.
//!
//! Steps 2 and 3 only ever answer what Redis would have answered or spend what
//! Redis already granted, so the cache and the leases save round trips without
//! ever admitting more.

use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use limiter_core::{Clock, Quota};

use crate::admission::{Admission, Source};
use crate::connection::RedisConnection;
use crate::deny_cache::DenyCache;
use crate::error::RedisLimitError;
use crate::lease::Leases;
use crate::outage::{Breaker, LocalFallback, WhenDown};
use crate::script::{Call, Lua, Op, Reply};
use crate::time::{LocalClock, ScriptQuota};

/// A GCRA rate limiter whose state lives in Redis, shared by every process
/// that uses the same keys, prefix and quota.
///
/// Each key is one Redis string, `{prefix:key}`, holding its `tat` in µs;
/// every decision is one atomic run of one Lua script (see
/// `docs/distributed.md`). Cloning is cheap and clones share everything
/// (connection, deny cache, leases, breaker).
///
/// A grant is `Ok(`[`Admission`]`)`; a denial is
/// `Err(`[`RedisLimitError::RateLimited`]`)`, whatever answered it (Redis,
/// the deny cache, the local fallback, or fail-closed).
///
/// # Cancel safety
///
/// Dropping a pending call's future drops the request, but Redis may already
/// have applied it: the permits may be consumed. Nothing is retried and
/// nothing is refunded (see [`take`](RedisLimiter::take) for the waits).
///
/// # Examples
///
/// ```no_run
/// use core::time::Duration;
/// use limiter_core::Quota;
/// use limiter_redis::{WhenDown, RedisLimitError, RedisLimiter};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
/// let conn = redis::aio::ConnectionManager::new(client).await?;
/// let limiter = RedisLimiter::builder(conn, Quota::per_second(100)?.with_burst(20)?)
///     .key_prefix("api")
///     .call_timeout(Duration::from_millis(50))
///     .failure_policy(WhenDown::Local { share: 0.25 })
///     .build()?;
///
/// match limiter.try_acquire("user:42").await {
///     Ok(granted) => println!("200, {} left", granted.remaining),
///     Err(RedisLimitError::RateLimited { retry_after, .. }) => {
///         println!("429, retry after {retry_after:?}")
///     }
///     Err(other) => return Err(other.into()),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RedisLimiter {
    pub(crate) inner: Arc<Inner>,
}

/// Everything a limiter and its clones share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) conn: RedisConnection,
    pub(crate) script: Lua,
    /// The multi-key script (`gcra_all.lua`).
    pub(crate) script_all: Lua,
    /// The debt script (`debt.lua`).
    pub(crate) script_debt: Lua,
    pub(crate) quota: Quota,
    pub(crate) script_quota: ScriptQuota,
    pub(crate) prefix: String,
    pub(crate) clock: LocalClock,
    pub(crate) call_timeout: Duration,
    pub(crate) policy: WhenDown,
    pub(crate) breaker: Breaker,
    pub(crate) fallback: Option<LocalFallback>,
    pub(crate) deny_cache: Option<DenyCache>,
    /// Leases with their most permits per call and ttl in ns.
    pub(crate) leases: Option<(Leases, u32, u64)>,
    pub(crate) margin_ms: u64,
    pub(crate) calls: AtomicU64,
    pub(crate) failures: AtomicU64,
}

impl RedisLimiter {
    /// Takes one permit on `key` if it is available now; takes nothing
    /// otherwise.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](RedisLimiter::try_acquire_n).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(1)?.with_burst(1)?)?;
    /// let granted = limiter.try_acquire("user:42").await?;
    /// assert_eq!(granted.remaining, 0);
    /// let denied = limiter.try_acquire("user:42").await.unwrap_err();
    /// assert!(matches!(denied, RedisLimitError::RateLimited { .. }));
    /// assert!(denied.retry_after().is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_acquire(&self, key: &str) -> Result<Admission, RedisLimitError> {
        self.try_acquire_n(key, 1).await
    }

    /// Takes `n` permits on `key` if all are available now; takes none
    /// otherwise. `n == 0` is granted without consuming anything.
    ///
    /// # Errors
    ///
    /// * [`RedisLimitError::RateLimited`] if the permits are not available
    ///   now (from Redis, the deny cache, the local fallback, or fail-closed:
    ///   see its `source`); nothing was consumed.
    /// * [`RedisLimitError::InsufficientCapacity`] if `n > burst`, without a
    ///   call.
    /// * A Redis error that is not a failure to reach it (a bad reply, a
    ///   script error).
    /// * Under [`WhenDown::Error`] only, the failure itself
    ///   ([`RedisLimitError::Timeout`], [`RedisLimitError::CircuitOpen`],
    ///   [`RedisLimitError::Redis`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(1)?.with_burst(5)?)?;
    /// limiter.try_acquire_n("batch", 3).await?;
    /// match limiter.try_acquire_n("batch", 3).await {
    ///     // Only 2 left: a try is all or nothing.
    ///     Err(RedisLimitError::RateLimited { remaining, .. }) => assert_eq!(remaining, 2),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert!(matches!(
    ///     limiter.try_acquire_n("batch", 6).await,
    ///     Err(RedisLimitError::InsufficientCapacity { requested: 6, burst: 5 })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_acquire_n(&self, key: &str, n: u32) -> Result<Admission, RedisLimitError> {
        self.acquire(key, n, Duration::ZERO, true).await
    }

    /// Claims the earliest slot for `n` permits on `key` if it is at most
    /// `max_wait` away, in the script, so waiters on all machines are served
    /// in the order Redis saw them. The permits may be used `wait` after the
    /// decision ([`Admission::wait`]); this method does not sleep (the
    /// `take*` methods do).
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::RateLimited`] at once, consuming nothing, if the
    /// slot is more than `max_wait` away (its `retry_after` is the wait the
    /// slot would need); otherwise as
    /// [`try_acquire_n`](RedisLimiter::try_acquire_n).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(10)?)?;
    /// let now = limiter.reserve_n("job", 1, Duration::from_secs(1)).await?;
    /// let next = limiter.reserve_n("job", 1, Duration::from_secs(1)).await?;
    /// assert!(now.wait.is_zero());
    /// assert!(next.wait <= Duration::from_millis(100)); // the next slot
    /// tokio::time::sleep(next.wait).await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reserve_n(
        &self,
        key: &str,
        n: u32,
        max_wait: Duration,
    ) -> Result<Admission, RedisLimitError> {
        self.acquire(key, n, max_wait, false).await
    }

    /// What a try of one permit on `key` would get, writing nothing: `Ok`
    /// with the permits available, or the `RateLimited` error a try would
    /// get. Leased permits held locally are not counted, and the deny cache
    /// is not consulted.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::RateLimited`] when no permit is available (its
    /// `retry_after` is when one will be); otherwise as
    /// [`try_acquire_n`](RedisLimiter::try_acquire_n).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(1)?.with_burst(2)?)?;
    /// assert_eq!(limiter.peek("k").await?.remaining, 2);
    /// limiter.try_acquire_n("k", 2).await?;
    /// let empty = limiter.peek("k").await.unwrap_err();
    /// assert!(matches!(empty, RedisLimitError::RateLimited { remaining: 0, .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek(&self, key: &str) -> Result<Admission, RedisLimitError> {
        let inner = &self.inner;
        let (now, _) = inner.clock.script_now();
        match self.call(key, Op::Peek, 1, now).await {
            Ok(reply) => answer(reply, 0),
            Err(e) if e.is_unavailable() => match (&inner.policy, &inner.fallback) {
                (WhenDown::Local { .. }, Some(f)) => f.peek(key),
                _ => self.fail(key, 1, Duration::ZERO, e),
            },
            Err(e) => Err(e),
        }
    }

    /// Makes `key` full again: deletes its Redis key and forgets its deny
    /// cache entry, lease and local fallback state *in this limiter*.
    ///
    /// # Errors
    ///
    /// Any failure to run `DEL` ([`RedisLimitError::Timeout`],
    /// [`RedisLimitError::CircuitOpen`], [`RedisLimitError::Redis`]),
    /// whatever the failure policy.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_hour(1)?)?;
    /// limiter.try_acquire("k").await?;
    /// assert!(limiter.try_acquire("k").await.is_err());
    /// limiter.reset("k").await?;
    /// limiter.try_acquire("k").await?; // full again
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset(&self, key: &str) -> Result<(), RedisLimitError> {
        let inner = &self.inner;
        if let Some(cache) = &inner.deny_cache {
            cache.forget(key);
        }
        if let Some((leases, _, _)) = &inner.leases {
            leases.forget(key);
        }
        if let Some(f) = &inner.fallback {
            f.reset(key);
        }
        let redis_key = self.redis_key(key);
        let mut conn = inner.conn.clone();
        self.guarded(async move {
            redis::cmd("DEL")
                .arg(redis_key)
                .query_async::<()>(&mut conn)
                .await
                .map_err(RedisLimitError::from)
        })
        .await
    }

    /// The shared path of `try_acquire_n` (`lease_ok`) and `reserve_n`.
    async fn acquire(
        &self,
        key: &str,
        n: u32,
        max_wait: Duration,
        lease_ok: bool,
    ) -> Result<Admission, RedisLimitError> {
        let inner = &self.inner;
        let burst = inner.script_quota.burst;
        if n > burst {
            return Err(RedisLimitError::InsufficientCapacity {
                requested: n,
                burst,
            });
        }
        let (now, local) = inner.clock.script_now();
        let max_wait_ns = u64::try_from(max_wait.as_nanos()).unwrap_or(u64::MAX);
        if let Some(cache) = &inner.deny_cache
            && n > 0
            && let Some(hit) = cache.check(key, n, max_wait_ns, local)
        {
            return Err(RedisLimitError::RateLimited {
                retry_after: Duration::from_nanos(hit.retry_after),
                reset_after: Duration::from_nanos(hit.reset_after),
                remaining: 0,
                source: Source::DenyCache,
            });
        }
        let lease = inner.leases.as_ref().filter(|_| lease_ok && n > 0);
        if let Some((leases, _, _)) = lease
            && let Some(left) = leases.spend(key, n, local)
        {
            return Ok(Admission {
                remaining: left,
                reset_after: Duration::ZERO,
                wait: Duration::ZERO,
                source: Source::Lease,
            });
        }
        let op = match lease {
            Some((_, max, _)) => Op::Lease { max: *max },
            None => Op::Reserve {
                max_wait: max_wait_ns / 1_000,
            },
        };
        match self.call(key, op, n, now).await {
            Ok(reply) => {
                let mut extra = 0;
                if reply.allowed
                    && let Some((leases, _, ttl)) = lease
                {
                    extra = reply.granted.saturating_sub(n);
                    leases.store(key, extra, local, local.saturating_add(*ttl));
                } else if !reply.allowed
                    && let Some(cache) = &inner.deny_cache
                {
                    let retry = reply.retry_after.saturating_mul(1_000);
                    let reset = reply.reset_after.saturating_mul(1_000);
                    cache.record(key, n, local, retry, reset);
                }
                answer(reply, extra)
            }
            Err(e) if e.is_unavailable() => self.fail(key, n, max_wait, e),
            Err(e) => Err(e),
        }
    }

    /// One script call through the breaker and the timeout.
    async fn call(
        &self,
        key: &str,
        op: Op,
        n: u32,
        now: Option<u64>,
    ) -> Result<Reply, RedisLimitError> {
        let inner = &self.inner;
        let redis_key = self.redis_key(key);
        let mut conn = inner.conn.clone();
        let call = Call {
            script: &inner.script,
            key: &redis_key,
            quota: inner.script_quota,
            op,
            n,
            margin_ms: inner.margin_ms,
            now,
        };
        self.guarded(async move { call.run(&mut conn).await }).await
    }

    /// Runs `request` if the breaker allows, under the call timeout, and
    /// feeds the outcome back to the breaker.
    pub(crate) async fn guarded<T>(
        &self,
        request: impl Future<Output = Result<T, RedisLimitError>>,
    ) -> Result<T, RedisLimitError> {
        self.guarded_until(None, request).await
    }

    /// [`guarded`](Self::guarded) with the call timeout cut short at
    /// `deadline` when that comes first. A deadline already past answers
    /// [`RedisLimitError::Timeout`] (after zero) without a call and without
    /// touching the breaker (no probe is spent, no failure recorded).
    pub(crate) async fn guarded_until<T>(
        &self,
        deadline: Option<tokio::time::Instant>,
        request: impl Future<Output = Result<T, RedisLimitError>>,
    ) -> Result<T, RedisLimitError> {
        let inner = &self.inner;
        let start = tokio::time::Instant::now();
        // A call timeout no instant can hold (`Duration::MAX`) is held at
        // limiter-async's horizon (thirty years): none, in effect.
        let by_call = limiter_async::deadline_after(start, inner.call_timeout);
        let until = deadline.map_or(by_call, |d| d.min(by_call));
        if until <= start {
            return Err(RedisLimitError::Timeout {
                after: Duration::ZERO,
            });
        }
        if !inner.breaker.allow(inner.clock.now()) {
            return Err(RedisLimitError::CircuitOpen {
                retry_after: inner.breaker.remaining(inner.clock.now()),
            });
        }
        // Relaxed: a statistic.
        inner.calls.fetch_add(1, Ordering::Relaxed);
        let result = match tokio::time::timeout_at(until, request).await {
            Ok(result) => result,
            Err(_) => Err(RedisLimitError::Timeout {
                after: until - start,
            }),
        };
        match &result {
            Ok(_) => inner.breaker.record_success(),
            Err(e) if e.is_unavailable() => {
                // Relaxed: a statistic.
                inner.failures.fetch_add(1, Ordering::Relaxed);
                inner.breaker.record_failure(inner.clock.now());
            }
            // Redis answered (with an error): it is up.
            Err(_) => inner.breaker.record_success(),
        }
        result
    }

    /// Runs `request`, a caller's own Redis command (typically on a clone of
    /// the connection this limiter was built with), through this limiter's
    /// circuit breaker and call timeout, the timeout cut short at `deadline`
    /// when that comes first: what the limiter's own calls go through, for
    /// a caller that keeps other state in the same Redis (fixed-window
    /// counters, say) and wants one breaker and one deadline for both.
    ///
    /// Nothing is retried and no failure policy is applied: an
    /// unavailability ([`RedisLimitError::is_unavailable`]) is returned for
    /// the caller's own policy, and counts in
    /// [`redis_failures`](Self::redis_failures) and towards opening the
    /// breaker like the limiter's own.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::CircuitOpen`] without a call while the breaker is
    /// open; [`RedisLimitError::Timeout`] when neither the call timeout nor
    /// `deadline` saw an answer (immediately, without a call, if `deadline`
    /// has passed); [`RedisLimitError::Redis`] for the command's own error.
    ///
    /// # Cancel safety
    ///
    /// As the limiter's calls: a request whose future is dropped (or timed
    /// out) may have been applied by Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn.clone(), Quota::per_second(10)?)?;
    /// let deadline = tokio::time::Instant::now() + Duration::from_millis(10);
    /// let mut c = conn.clone();
    /// let hits: i64 = limiter
    ///     .call_guarded(Some(deadline), async move {
    ///         redis::cmd("INCR").arg("hits").query_async(&mut c).await
    ///     })
    ///     .await?;
    /// # let _ = hits;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_guarded<T>(
        &self,
        deadline: Option<tokio::time::Instant>,
        request: impl Future<Output = Result<T, redis::RedisError>>,
    ) -> Result<T, RedisLimitError> {
        self.guarded_until(deadline, async {
            request.await.map_err(RedisLimitError::from)
        })
        .await
    }

    /// The failure policy's answer to `n` permits on `key`, as of now (after
    /// the failed call: the time to the next probe counts from the answer,
    /// not from when the call was sent).
    pub(crate) fn fail(
        &self,
        key: &str,
        n: u32,
        max_wait: Duration,
        error: RedisLimitError,
    ) -> Result<Admission, RedisLimitError> {
        let inner = &self.inner;
        match (&inner.policy, &inner.fallback) {
            (WhenDown::Open, _) => Ok(Admission::open()),
            (WhenDown::Closed, _) => Err(RedisLimitError::RateLimited {
                retry_after: inner.breaker.remaining(inner.clock.now()),
                reset_after: Duration::ZERO,
                remaining: 0,
                source: Source::FailClosed,
            }),
            (WhenDown::Local { .. }, Some(f)) => f.reserve(key, n, max_wait),
            _ => Err(error),
        }
    }
}

/// The script's reply as an answer: a grant, or its denial; `extra` leased
/// permits add to a grant's `remaining`.
fn answer(reply: Reply, extra: u32) -> Result<Admission, RedisLimitError> {
    if !reply.allowed {
        return Err(RedisLimitError::RateLimited {
            retry_after: Duration::from_micros(reply.retry_after),
            reset_after: Duration::from_micros(reply.reset_after),
            remaining: reply.remaining,
            source: Source::Redis,
        });
    }
    Ok(Admission {
        remaining: reply.remaining.saturating_add(extra),
        reset_after: Duration::from_micros(reply.reset_after),
        wait: Duration::from_micros(reply.wait),
        source: Source::Redis,
    })
}
