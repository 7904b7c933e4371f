//! [`RedisLimiterBuilder`]: every option of a [`RedisLimiter`] in one place,
//! validated once by [`build`](RedisLimiterBuilder::build).

use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use limiter_core::{Clock, Quota, clock::MAX_SPAN};

use crate::connection::RedisConnection;
use crate::deny_cache::DenyCache;
use crate::error::RedisLimitError;
use crate::lease::Leases;
use crate::limiter::{Inner, RedisLimiter};
use crate::outage::{Breaker, LocalFallback, WhenDown};
use crate::script::{Call, Lua};
use crate::time::{LocalClock, ScriptQuota, TimeSource};

/// Options for a [`RedisLimiter`]; start from [`RedisLimiter::builder`].
///
/// | option | default |
/// |---|---|
/// | [`key_prefix`](Self::key_prefix) | `"limiter"` |
/// | [`time_source`](Self::time_source) / [`client_clock`](Self::client_clock) | Redis' `TIME` |
/// | [`call_timeout`](Self::call_timeout) | 100 ms |
/// | [`retry_interval`](Self::retry_interval) (circuit breaker) | 1 s |
/// | [`failure_policy`](Self::failure_policy) | `Local { share: 1.0 }` |
/// | [`deny_cache`](Self::deny_cache) | on |
/// | [`lease`](Self::lease) | off |
/// | [`expiry_margin`](Self::expiry_margin) | 0 |
///
/// Nothing is validated or connected until [`build`](Self::build).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::Quota;
/// use limiter_redis::{WhenDown, RedisLimiter};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
/// // Lazy: connects on the first call, so this example needs no server.
/// let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
/// let limiter = RedisLimiter::builder(conn, Quota::per_second(100)?.with_burst(20)?)
///     .key_prefix("api")
///     .call_timeout(Duration::from_millis(50))
///     .failure_policy(WhenDown::Local { share: 0.25 })
///     .lease(5, Duration::from_millis(50))
///     .build()?;
/// # let _ = limiter;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct RedisLimiterBuilder {
    conn: RedisConnection,
    quota: Quota,
    prefix: String,
    time: TimeSource,
    call_timeout: Duration,
    retry_interval: Duration,
    policy: WhenDown,
    deny_cache: bool,
    lease: Option<(u32, Duration)>,
    expiry_margin: Duration,
}

impl RedisLimiterBuilder {
    pub(crate) fn new(conn: RedisConnection, quota: Quota) -> RedisLimiterBuilder {
        RedisLimiterBuilder {
            conn,
            quota,
            prefix: "limiter".to_owned(),
            time: TimeSource::Redis,
            call_timeout: Duration::from_millis(100),
            retry_interval: Duration::from_secs(1),
            policy: WhenDown::default(),
            deny_cache: true,
            lease: None,
            expiry_margin: Duration::ZERO,
        }
    }

    /// The prefix of every Redis key: user key `k` lives at `{prefix:k}`.
    /// Limiters with different quotas must use different prefixes. It must
    /// not contain `{` or `}`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let quota = Quota::per_second(10)?;
    /// let limiter = RedisLimiter::builder(conn.clone(), quota).key_prefix("search").build()?;
    /// assert_eq!(limiter.redis_key("u1"), "{search:u1}");
    /// // Braces would break the Cluster hash tag.
    /// assert!(matches!(
    ///     RedisLimiter::builder(conn, quota).key_prefix("a{b}").build(),
    ///     Err(RedisLimitError::InvalidParameter { name: "key_prefix", .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> RedisLimiterBuilder {
        self.prefix = prefix.into();
        self
    }

    /// Where `now` comes from (see [`TimeSource`]; default
    /// [`TimeSource::Redis`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimiter, SystemClock, TimeSource};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let limiter = RedisLimiter::builder(conn, Quota::per_second(10)?)
    ///     .time_source(TimeSource::Client(Arc::new(SystemClock)))
    ///     .build()?;
    /// # let _ = limiter;
    /// # Ok(())
    /// # }
    /// ```
    pub fn time_source(mut self, time: TimeSource) -> RedisLimiterBuilder {
        self.time = time;
        self
    }

    /// Client-clock mode: `now` is `clock.now()` in whole µs, passed to the
    /// script, which then never calls `TIME`. All clients of a key must share
    /// the clock's epoch ([`SystemClock`](crate::SystemClock) across machines).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimiter, SystemClock};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// // For deployments that forbid `TIME` in scripts; keep the clients NTP-synced.
    /// let limiter = RedisLimiter::builder(conn, Quota::per_second(10)?)
    ///     .client_clock(SystemClock)
    ///     .build()?;
    /// # let _ = limiter;
    /// # Ok(())
    /// # }
    /// ```
    pub fn client_clock(self, clock: impl Clock + 'static) -> RedisLimiterBuilder {
        self.time_source(TimeSource::Client(Arc::new(clock)))
    }

    /// How long one Redis call may take before it counts as failed (default
    /// 100 ms). A timed-out call is never retried: it may have been applied.
    /// It must be longer than zero; a timeout no instant can hold
    /// (`Duration::MAX`) means none: calls wait for Redis (or for a
    /// caller's deadline).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let quota = Quota::per_second(10)?;
    /// let limiter = RedisLimiter::builder(conn.clone(), quota)
    ///     .call_timeout(Duration::from_millis(20))
    ///     .build()?;
    /// # let _ = limiter;
    /// assert!(matches!(
    ///     RedisLimiter::builder(conn, quota).call_timeout(Duration::ZERO).build(),
    ///     Err(RedisLimitError::InvalidParameter { name: "call_timeout", .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn call_timeout(mut self, timeout: Duration) -> RedisLimiterBuilder {
        self.call_timeout = timeout;
        self
    }

    /// How long the circuit breaker stays open after a failure before one
    /// call probes Redis again (default 1 s). Meanwhile the failure policy
    /// answers, and [`RedisLimitError::CircuitOpen`] (under
    /// [`WhenDown::Error`]) carries the time left.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let limiter = RedisLimiter::builder(conn, Quota::per_second(10)?)
    ///     .retry_interval(Duration::from_millis(250))
    ///     .build()?;
    /// # let _ = limiter;
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_interval(mut self, interval: Duration) -> RedisLimiterBuilder {
        self.retry_interval = interval;
        self
    }

    /// What to answer while Redis is unavailable (default
    /// `Local { share: 1.0 }`); the table on [`WhenDown`] says which to
    /// pick. `share` must be in `(0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::{WhenDown, RedisLimitError, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let quota = Quota::per_second(10)?;
    /// let strict = RedisLimiter::builder(conn.clone(), quota)
    ///     .failure_policy(WhenDown::Closed)
    ///     .build()?;
    /// # let _ = strict;
    /// assert!(matches!(
    ///     RedisLimiter::builder(conn, quota)
    ///         .failure_policy(WhenDown::Local { share: 0.0 })
    ///         .build(),
    ///     Err(RedisLimitError::InvalidParameter { name: "share", .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn failure_policy(mut self, policy: WhenDown) -> RedisLimiterBuilder {
        self.policy = policy;
        self
    }

    /// Whether to answer repeated requests on a denied key locally until
    /// its `retry_after` (default on). A cached denial is
    /// [`RedisLimitError::RateLimited`] with
    /// [`Source::DenyCache`](crate::Source::DenyCache) and costs no round
    /// trip; it never changes an answer.
    ///
    /// # Why it is exact for GCRA
    ///
    /// A denial of `n` permits at Redis' `now` with `retry_after = R` means
    /// `max(tat, now) + n·t − (now + tau + t) = R`. Until `now + R`, `tat` can
    /// only grow (every grant moves it forward; only
    /// [`reset`](RedisLimiter::reset) or expiry at `tat` move it back), so
    /// every request for `m ≥ n` permits with a wait allowance below what
    /// remains of `R` would be denied by Redis too. The cache answers exactly
    /// those, and nothing else: a smaller request, or a reservation allowed
    /// to wait past the deadline, goes to Redis.
    ///
    /// The entry's deadline is `sent + R`, with `sent` the local time read
    /// *before* the call: Redis decided no earlier than that, so the cache
    /// never outlives the true `now + R` and never denies what Redis would
    /// grant. At worst it lapses up to one round trip early, and Redis
    /// answers.
    ///
    /// A cached denial reports `remaining: 0` and the `retry_after` and
    /// `reset_after` left of Redis' answer.
    ///
    /// Caveat: a `reset` made through *another* limiter instance does not
    /// clear this instance's cache; its entries still lapse by their
    /// deadlines, and until then deny (never over-admit).
    ///
    /// Memory: at most 16,384 keys; when full, lapsed entries are dropped,
    /// and a new denial that still does not fit is not cached.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// // Every denial asks Redis, as when each call must see a `reset` made elsewhere.
    /// let limiter = RedisLimiter::builder(conn, Quota::per_second(10)?)
    ///     .deny_cache(false)
    ///     .build()?;
    /// # let _ = limiter;
    /// # Ok(())
    /// # }
    /// ```
    pub fn deny_cache(mut self, on: bool) -> RedisLimiterBuilder {
        self.deny_cache = on;
        self
    }

    /// Lease mode: a plain try that finds no local permits asks Redis, in
    /// one call, for its `n` permits **plus up to `max_permits − n` more
    /// that are available now**, and keeps the extra ones for `ttl`, so a
    /// hot key costs one round trip per `max_permits` permits instead of one
    /// per permit. Permits spent locally are granted with
    /// [`Source::Lease`](crate::Source::Lease). Default: off.
    ///
    /// `max_permits` must be between 1 and the burst, and `ttl` longer than
    /// zero. [`reserve_n`](RedisLimiter::reserve_n), the `take*` waits and
    /// [`peek`](RedisLimiter::peek) always go to Redis; `peek` does not count
    /// leased permits.
    ///
    /// # The trade-off
    ///
    /// Leased permits are *consumed in Redis* when leased, so the cluster
    /// never admits more than the quota: every permit spent locally was
    /// granted by the script first. What leases cost is accuracy the other
    /// way:
    ///
    /// * **stranded permits**: a lease that is not spent before it expires
    ///   (or a request for more permits than the lease holds, which drops the
    ///   remainder and asks Redis afresh) is lost; other clients were denied
    ///   them;
    /// * **shifted admissions**: a permit leased at `s` may be spent up to
    ///   `ttl` later, so in a window the admissions can include up to
    ///   `max_permits` permits earned before it. Over any interval from the
    ///   key's start, the total never exceeds `burst + elapsed / t`.
    ///
    /// Use leases for hot keys on few instances, with `max_permits` well
    /// under the burst and a `ttl` of about `max_permits · t`; do not use
    /// them when many instances share a key at a rate near its quota. At
    /// most 16,384 keys hold a lease at once (when full, expired leases are
    /// dropped; a lease that still does not fit is not kept, its permits
    /// stranded, never over-spent).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// // 1,000 permits/s: one round trip per 20 permits, each lease spent within 20 ms.
    /// let quota = Quota::per_second(1_000)?.with_burst(100)?;
    /// let limiter = RedisLimiter::builder(conn.clone(), quota)
    ///     .lease(20, Duration::from_millis(20))
    ///     .build()?;
    /// # let _ = limiter;
    /// // A lease larger than the burst is refused.
    /// assert!(matches!(
    ///     RedisLimiter::builder(conn, quota).lease(101, Duration::from_millis(20)).build(),
    ///     Err(RedisLimitError::InvalidParameter { .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease(mut self, max_permits: u32, ttl: Duration) -> RedisLimiterBuilder {
        self.lease = Some((max_permits, ttl));
        self
    }

    /// Extra time on every key's TTL (default 0: a key expires exactly when
    /// it equals a fresh one). Only needed in client-clock mode when the
    /// client clock may run slower than Redis' (a test's manual clock):
    /// Redis expires keys on its own clock. At most
    /// [`MAX_SPAN`](limiter_core::clock::MAX_SPAN) (2^60 ns, about 36.5 years), so
    /// that the script's TTL stays an exact integer; a longer one is
    /// rejected by [`build`](Self::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_redis::RedisLimiter;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// // A test's manual clock stands still while Redis' expiry clock runs.
    /// let clock = ManualClock::starting_at(1_000_000_000_000);
    /// let limiter = RedisLimiter::builder(conn, Quota::per_second(10)?)
    ///     .client_clock(clock.clone())
    ///     .expiry_margin(Duration::from_secs(60))
    ///     .build()?;
    /// # let _ = limiter;
    /// # Ok(())
    /// # }
    /// ```
    pub fn expiry_margin(mut self, margin: Duration) -> RedisLimiterBuilder {
        self.expiry_margin = margin;
        self
    }

    /// The limiter.
    ///
    /// # Errors
    ///
    /// * [`RedisLimitError::UnsupportedQuota`]: the period is not whole µs.
    /// * [`RedisLimitError::InvalidParameter`]: a zero call timeout, a prefix
    ///   with `{` or `}`, a lease of 0 or more than `burst` permits or with a
    ///   zero ttl, or a `share` outside `(0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let limiter = RedisLimiter::builder(conn.clone(), Quota::per_second(10)?).build()?;
    /// assert_eq!(limiter.redis_calls(), 0); // building calls nothing
    /// assert!(matches!(
    ///     RedisLimiter::builder(conn, Quota::per_second(3)?).build(),
    ///     Err(RedisLimitError::UnsupportedQuota { .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn build(self) -> Result<RedisLimiter, RedisLimitError> {
        let script_quota = ScriptQuota::new(self.quota)?;
        let invalid = |name, requirement| RedisLimitError::InvalidParameter { name, requirement };
        if self.call_timeout.is_zero() {
            return Err(invalid("call_timeout", "longer than zero"));
        }
        if self.prefix.contains(['{', '}']) {
            return Err(invalid("key_prefix", "free of `{` and `}`"));
        }
        // The script adds the margin (ms) to a TTL below 2^53 / 1000 ms; at
        // most 2^60 ns ≈ 1.15e12 ms keeps the sum an exact integer that
        // Redis accepts for `PX`.
        if self.expiry_margin.as_nanos() > u128::from(MAX_SPAN) {
            return Err(invalid("expiry_margin", "at most MAX_SPAN (2^60 ns)"));
        }
        let leases = match self.lease {
            None => None,
            Some((max, ttl)) => {
                if max == 0 || max > self.quota.burst() {
                    return Err(invalid("lease max_permits", "between 1 and the burst"));
                }
                if ttl.is_zero() {
                    return Err(invalid("lease ttl", "longer than zero"));
                }
                let ttl = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
                Some((Leases::default(), max, ttl))
            }
        };
        let clock = LocalClock::new(&self.time);
        let fallback = match self.policy {
            WhenDown::Local { share } => {
                Some(LocalFallback::new(self.quota, share, clock.clone())?)
            }
            _ => None,
        };
        // At most 2^60 ns, checked above: fits.
        let margin_ms = self.expiry_margin.as_millis() as u64;
        Ok(RedisLimiter::from_inner(Inner {
            conn: self.conn,
            script: Lua::new(Call::SOURCE),
            script_all: Lua::new(crate::multi::SOURCE),
            script_debt: Lua::new(crate::debt::SOURCE),
            quota: self.quota,
            script_quota,
            prefix: self.prefix,
            clock,
            call_timeout: self.call_timeout,
            policy: self.policy,
            breaker: Breaker::new(self.retry_interval),
            fallback,
            deny_cache: self.deny_cache.then(DenyCache::default),
            leases,
            margin_ms,
            calls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }))
    }
}
