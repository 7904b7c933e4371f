//! Making a [`RedisLimiter`] and reading what it is: the constructors on
//! one server ([`ConnectionManager`]) or any [`RedisConnection`] (one server
//! or a Redis Cluster), and the accessors (quota, counters, cluster or not).
//!
//! `new` and `builder` keep taking a `ConnectionManager`, as they always
//! did; `with_connection` and `builder_with_connection` take either kind.
//! Building validates the options and connects to nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use limiter_core::Quota;
use redis::aio::ConnectionManager;

use crate::builder::RedisLimiterBuilder;
use crate::connection::RedisConnection;
use crate::error::RedisLimitError;
use crate::limiter::{Inner, RedisLimiter};

impl RedisLimiter {
    /// A limiter for `quota` on `conn` with the defaults: prefix `"limiter"`,
    /// Redis' `TIME`, a 100 ms call timeout, a 1 s breaker interval, the deny
    /// cache on, no leases, and [`WhenDown::Local`](crate::WhenDown::Local) with `share = 1.0`.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::UnsupportedQuota`] if the quota's period is not a
    /// whole number of microseconds (see [`quota_in_micros`](crate::quota_in_micros)).
    ///
    /// # Examples
    ///
    /// Building connects to nothing (the connection manager here is lazy):
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let limiter = RedisLimiter::new(conn.clone(), Quota::per_second(10)?)?;
    /// assert_eq!(limiter.quota(), Quota::per_second(10)?);
    /// // 333,333,334 ns is not whole µs: rejected, not rounded.
    /// assert!(matches!(
    ///     RedisLimiter::new(conn, Quota::per_second(3)?),
    ///     Err(RedisLimitError::UnsupportedQuota { .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(conn: ConnectionManager, quota: Quota) -> Result<RedisLimiter, RedisLimitError> {
        RedisLimiter::builder(conn, quota).build()
    }

    /// [`new`](RedisLimiter::new) on any [`RedisConnection`]: one server
    /// ([`ConnectionManager`]) or a Redis Cluster
    /// (`redis::cluster_async::ClusterConnection`), with the same defaults.
    /// One type serves both; only multi-key decisions
    /// ([`try_acquire_all`](RedisLimiter::try_acquire_all)) see the
    /// difference: on a cluster their keys must share a hash tag.
    ///
    /// # Errors
    ///
    /// As [`new`](RedisLimiter::new).
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
    /// // A ConnectionManager or a ClusterConnection: the same call.
    /// let limiter = RedisLimiter::with_connection(conn, Quota::per_second(10)?)?;
    /// assert!(!limiter.is_cluster());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_connection(
        conn: impl Into<RedisConnection>,
        quota: Quota,
    ) -> Result<RedisLimiter, RedisLimitError> {
        RedisLimiter::builder_with_connection(conn, quota).build()
    }

    /// [`builder`](RedisLimiter::builder) on any [`RedisConnection`] (one
    /// server or a cluster).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::{WhenDown, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let limiter = RedisLimiter::builder_with_connection(conn, Quota::per_second(10)?)
    ///     .failure_policy(WhenDown::Closed)
    ///     .build()?;
    /// # let _ = limiter;
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder_with_connection(
        conn: impl Into<RedisConnection>,
        quota: Quota,
    ) -> RedisLimiterBuilder {
        RedisLimiterBuilder::new(conn.into(), quota)
    }

    /// Whether this limiter runs on a Redis Cluster.
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
    /// assert!(!RedisLimiter::new(conn, Quota::per_second(10)?)?.is_cluster());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_cluster(&self) -> bool {
        self.inner.conn.is_cluster()
    }

    /// A builder to set the prefix, clock, timeout, failure policy, deny
    /// cache and leases (see [`RedisLimiterBuilder`] for the defaults).
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
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let limiter = RedisLimiter::builder(conn, Quota::per_second(100)?.with_burst(20)?)
    ///     .key_prefix("api")
    ///     .call_timeout(Duration::from_millis(50))
    ///     .failure_policy(WhenDown::Local { share: 0.25 })
    ///     .build()?;
    /// assert_eq!(limiter.redis_key("user:42"), "{api:user:42}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(conn: ConnectionManager, quota: Quota) -> RedisLimiterBuilder {
        RedisLimiterBuilder::new(conn.into(), quota)
    }

    pub(crate) fn from_inner(inner: Inner) -> RedisLimiter {
        RedisLimiter {
            inner: Arc::new(inner),
        }
    }

    /// The quota every key is limited to.
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
    /// let quota = Quota::per_second(50)?.with_burst(10)?;
    /// let limiter = RedisLimiter::new(conn, quota)?;
    /// assert_eq!(limiter.quota().burst(), 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn quota(&self) -> Quota {
        self.inner.quota
    }

    /// How many calls this limiter (and its clones) sent to Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_hour(1)?)?;
    /// assert_eq!(limiter.redis_calls(), 0);
    /// limiter.try_acquire("k").await?;
    /// let _denied = limiter.try_acquire("k").await; // Redis denies
    /// let _cached = limiter.try_acquire("k").await; // the deny cache denies
    /// assert_eq!(limiter.redis_calls(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_calls(&self) -> u64 {
        // Relaxed: a statistic, ordered with nothing.
        self.inner.calls.load(Ordering::Relaxed)
    }

    /// How many of those calls failed to reach Redis or timed out (each one
    /// opened the circuit breaker).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(10)?)?;
    /// let _ = limiter.try_acquire("k").await;
    /// if limiter.redis_failures() > 0 {
    ///     eprintln!("Redis unreachable: answered by the failure policy");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_failures(&self) -> u64 {
        // Relaxed: a statistic, ordered with nothing.
        self.inner.failures.load(Ordering::Relaxed)
    }
}
