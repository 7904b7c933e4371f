//! Distributed GCRA rate limiting on Redis: every decision on a key is one
//! atomic run of one Lua script, so any number of processes share a quota
//! exactly.
//!
//! # Which type do I use
//!
//! | you need | use |
//! |---|---|
//! | one quota per key shared by many processes or machines | [`RedisLimiter`] ([`RedisLimiter::new`], or [`RedisLimiter::builder`] for options) |
//! | fewer round trips for keys that are hammered while exhausted | the deny cache, on by default ([`RedisLimiterBuilder::deny_cache`]): exact, never changes an answer |
//! | fewer round trips for hot keys that are mostly admitted, on few instances | leases ([`RedisLimiterBuilder::lease`]): never over the quota, at the price of stranded permits |
//! | a per-instance cap in process in front of the global quota, so an instance over its share does not call Redis | [`TwoTierLimiter`] |
//! | several limits at once, all or nothing (per user *and* route *and* global) | [`RedisLimiter::try_acquire_all`] / [`RedisLimiter::reserve_all`]: one script call |
//! | a Redis Cluster | [`RedisLimiter::with_connection`] with a `ClusterConnection` ([`RedisConnection`]) |
//! | Redis Sentinel, TLS, an ACL user, or a connection from a URL | [`RedisEndpoint`] (`redis+sentinel://…`, `rediss://…`, [`RedisTls`]), then [`RedisLimiter::with_connection`] |
//! | limits that hold roughly through a Redis outage | [`WhenDown::Local`] (the default), `share = 1/instances` |
//! | availability over limits during an outage | [`WhenDown::Open`] |
//! | limits over availability during an outage | [`WhenDown::Closed`] (denies with [`Source::FailClosed`]) |
//! | your own outage handling | [`WhenDown::Error`] (the failure is returned) |
//! | a quota whose period is not whole microseconds | [`quota_in_micros`] (rounds the period up) |
//! | one process only | `limiter_core::RateLimiter` or `limiter_async::AsyncLimiter`: no Redis needed |
//!
//! A grant is `Ok(`[`Admission`]`)`; a denial is always
//! `Err(`[`RedisLimitError::RateLimited`]`)` with `retry_after`,
//! `reset_after` and the [`Source`] that answered, and
//! [`RedisLimitError::retry_after`] gives the retry time of any error without
//! matching. The operations are those of the other limiters of this
//! workspace: `try_acquire(_n)`, `reserve_n`, `take(_n)`,
//! `take(_n)_timeout`, `take(_n)_until`, and `peek` for "how many now".
//!
//! # Example
//!
//! ```no_run
//! use limiter_core::Quota;
//! use limiter_redis::{RedisLimitError, RedisLimiter};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1:6379/")?;
//! let conn = redis::aio::ConnectionManager::new(client).await?;
//! let limiter = RedisLimiter::new(conn, Quota::per_second(10)?.with_burst(5)?)?;
//! match limiter.try_acquire("user:42").await {
//!     Ok(granted) => println!("allowed, {} left", granted.remaining),
//!     Err(RedisLimitError::RateLimited { retry_after, source, .. }) => {
//!         println!("denied by {source:?}, retry after {retry_after:?}")
//!     }
//!     Err(other) => return Err(other.into()),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Units and names
//!
//! On Redis, time is integer **microseconds** (exact in Lua's doubles until
//! the year 2255, hence at most 1,000,000 permits per second per key; a
//! quota's period must be whole µs). Locally, time is nanoseconds since the
//! limiter was built. The GCRA names are those of `limiter-core`: `t`
//! (emission interval), `tau = t · (burst − 1)` (tolerance), `tat`
//! (theoretical arrival time). `docs/distributed.md` has the script, its math,
//! clocks, cluster keys, failure policies and measurements.
//!
//! # Cancel safety
//!
//! Nothing is refunded. A call whose future is dropped may already have been
//! applied on Redis; a `take*` dropped during its sleep leaves its slot
//! consumed on Redis (see [`RedisLimiter::take`]).

mod admission;
mod builder;
mod connection;
mod construct;
mod debt;
mod decide;
mod deny_cache;
mod endpoint;
mod endpoint_url;
mod error;
mod keys;
mod lease;
mod limiter;
mod multi;
mod outage;
mod script;
mod sentinel;
mod take;
mod time;
mod tls;
mod two_tier;

pub use admission::{Admission, Source};
pub use builder::RedisLimiterBuilder;
pub use connection::RedisConnection;
pub use endpoint::RedisEndpoint;
pub use error::EndpointError;
pub use error::RedisLimitError;
pub use limiter::RedisLimiter;
pub use outage::WhenDown;
pub use sentinel::SentinelConnection;
pub use time::{SystemClock, TimeSource, quota_in_micros};
pub use tls::RedisTls;
pub use two_tier::TwoTierLimiter;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
