//! The Redis side of a rule set, in one place: one lazy connection per URL
//! (kept across reloads; it connects on first use and reconnects by
//! itself) and the `RedisLimiter` of a `backend: redis` rule.
//!
//! Redis support is the `redis` feature (on by default). Without it the
//! rules file is still parsed and checked the same way, and a rule set
//! holding a `backend: redis` rule is refused when it is built, with a
//! typed error that names the feature; nothing else of the crate changes.

use std::collections::HashMap;

use limiter_rules::Problem;
#[cfg(feature = "redis")]
use limiter_rules::{FailurePolicy, RedisSpec};

/// A connection to one Redis URL.
#[cfg(feature = "redis")]
pub(crate) type Conn = redis::aio::ConnectionManager;

/// A connection to one Redis URL: none exists without the `redis`
/// feature.
#[cfg(not(feature = "redis"))]
#[derive(Clone)]
pub(crate) enum Conn {}

/// The connections of a rule set, by URL.
pub(crate) type Conns = HashMap<String, Conn>;

/// The connection to `url`, made (lazily) on first use.
#[cfg(feature = "redis")]
pub(crate) fn connection(conns: &mut Conns, url: &str) -> Result<Conn, Problem> {
    use redis::aio::ConnectionManagerConfig;

    if let Some(c) = conns.get(url) {
        return Ok(c.clone());
    }
    let invalid = |e: redis::RedisError| Problem::InvalidRedisUrl {
        message: e.to_string(),
    };
    let client = redis::Client::open(url).map_err(invalid)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(std::time::Duration::from_secs(1)))
        .set_number_of_retries(2);
    let conn = Conn::new_lazy_with_config(client, config).map_err(invalid)?;
    conns.insert(url.to_owned(), conn.clone());
    Ok(conn)
}

/// Without the `redis` feature: the typed refusal of a `backend: redis`
/// rule.
#[cfg(not(feature = "redis"))]
pub(crate) fn connection(_conns: &mut Conns, _url: &str) -> Result<Conn, Problem> {
    Err(no_redis())
}

/// What a `backend: redis` rule is told by a build without the `redis`
/// feature.
#[cfg(not(feature = "redis"))]
pub(crate) fn no_redis() -> Problem {
    Problem::InvalidValue {
        reason: "this build has no Redis support (limiter-config without its `redis` feature)"
            .into(),
        expected:
            "`backend: local`, or limiter-config built with its `redis` feature (on by default)"
                .into(),
    }
}

/// The limiter of a `backend: redis` rule on `conn`.
#[cfg(feature = "redis")]
pub(crate) fn redis_limiter(
    conn: Conn,
    quota: limiter_core::Quota,
    spec: &RedisSpec,
) -> Result<limiter_redis::RedisLimiter, limiter_redis::RedisLimitError> {
    limiter_redis::RedisLimiter::builder(conn, quota)
        .key_prefix(spec.key_prefix.clone())
        .failure_policy(match spec.failure_policy {
            FailurePolicy::Open => limiter_redis::FailurePolicy::Open,
            FailurePolicy::Closed => limiter_redis::FailurePolicy::Closed,
            FailurePolicy::Local { share } => limiter_redis::FailurePolicy::Local { share },
            FailurePolicy::Error => limiter_redis::FailurePolicy::Error,
        })
        .call_timeout(spec.timeout)
        .build()
}
