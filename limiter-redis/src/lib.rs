//! Distributed GCRA rate limiting on Redis: every decision on a key is one
//! atomic run of one Lua script, so any number of processes share a quota
//! exactly.
//!
//! # Map of the crate
//!
//! | module | one job |
//! |---|---|
//! | `gcra.lua` | the decision on Redis: integer µs, exact admission test, TTL at `tat` |
//! | `script` | loading and calling the script (`EVALSHA`, reload on `NOSCRIPT`), its reply |
//! | `time` | µs quotas, [`TimeSource`] (Redis `TIME` or a client clock), [`SystemClock`] |
//! | `limiter` | [`RedisLimiter`]: cache → lease → breaker → script → failure policy |
//! | `builder` | [`RedisLimiterBuilder`]: every option, validated once |
//! | `take` | `take` / `take_with_timeout`: reserve in the script, then sleep |
//! | [`deny_cache`] | local denials until Redis' `retry_after`, exact for GCRA |
//! | [`lease`] | permits taken in bulk and spent locally |
//! | `policy` | [`FailurePolicy`], the circuit breaker, the per-key local fallback |
//! | `decision`, `error` | [`Decision`] and [`Source`], [`RedisLimitError`] |
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
//! # Example
//!
//! ```no_run
//! use limiter_core::Quota;
//! use limiter_redis::RedisLimiter;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1:6379/")?;
//! let conn = redis::aio::ConnectionManager::new(client).await?;
//! let limiter = RedisLimiter::new(conn, Quota::per_second(10)?.with_burst(5)?)?;
//! let decision = limiter.try_acquire("user:42").await?;
//! println!("allowed: {}, remaining: {}", decision.allowed, decision.remaining);
//! # Ok(())
//! # }
//! ```

mod builder;
mod decision;
pub mod deny_cache;
mod error;
pub mod lease;
mod limiter;
mod policy;
mod script;
mod take;
mod time;

pub use builder::RedisLimiterBuilder;
pub use decision::{Decision, Source};
pub use error::RedisLimitError;
pub use limiter::RedisLimiter;
pub use policy::FailurePolicy;
pub use time::{SystemClock, TimeSource, quota_in_micros};
