//! The Redis side of a rule set, in one place: one lazy connection per URL
//! and TLS settings (kept across reloads; it connects on first use and
//! reconnects by itself, to the current master for a Sentinel URL) and the
//! `RedisLimiter` of a `backend: redis` rule.
//!
//! Redis support is the `redis` feature (on by default). Without it the
//! rules file is still parsed and checked the same way, and a rule set
//! holding a `backend: redis` rule is refused when it is built, with a
//! typed error that names the feature; nothing else of the crate changes.

use std::collections::HashMap;

use limiter_rules::Problem;
#[cfg(feature = "redis")]
use limiter_rules::{RedisSpec, WhenRedisDown};

/// A connection to one Redis endpoint: one server or a Sentinel master.
#[cfg(feature = "redis")]
pub(crate) type Conn = limiter_redis::RedisConnection;

/// A connection to one Redis URL: none exists without the `redis`
/// feature.
#[cfg(not(feature = "redis"))]
#[derive(Clone)]
pub(crate) enum Conn {}

/// The connections of a rule set, by URL and TLS settings.
pub(crate) type Conns = HashMap<String, Conn>;

/// The connection of `spec` (its URL and TLS files), made (lazily) on
/// first use and shared by every rule with the same URL and TLS settings.
#[cfg(feature = "redis")]
pub(crate) fn connection(conns: &mut Conns, spec: &RedisSpec) -> Result<Conn, Problem> {
    use limiter_redis::{EndpointError, RedisEndpoint, RedisTls};

    let id = format!("{} {:?}", spec.url, spec.tls);
    if let Some(c) = conns.get(&id) {
        return Ok(c.clone());
    }
    let problem = |e: EndpointError| match e {
        EndpointError::InvalidUrl { reason } => Problem::InvalidRedisUrl { message: reason },
        other => Problem::InvalidValue {
            reason: other.to_string(),
            expected: "readable PEM files: a CA certificate, a client certificate and its key"
                .into(),
        },
    };
    let mut endpoint = RedisEndpoint::parse(&spec.url).map_err(problem)?;
    if let Some(tls) = &spec.tls {
        let files = RedisTls::from_files(
            tls.ca_file.as_deref(),
            tls.cert_file.as_deref(),
            tls.key_file.as_deref(),
        )
        .map_err(problem)?;
        endpoint =
            endpoint.with_tls(files.skip_hostname_verification(tls.skip_hostname_verification));
    }
    let conn = endpoint.connect_lazy().map_err(problem)?;
    conns.insert(id, conn.clone());
    Ok(conn)
}

/// Without the `redis` feature: the typed refusal of a `backend: redis`
/// rule.
#[cfg(not(feature = "redis"))]
pub(crate) fn connection(
    _conns: &mut Conns,
    _spec: &limiter_rules::RedisSpec,
) -> Result<Conn, Problem> {
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
    limiter_redis::RedisLimiter::builder_with_connection(conn, quota)
        .key_prefix(spec.key_prefix.clone())
        .failure_policy(match spec.failure_policy {
            WhenRedisDown::Open => limiter_redis::WhenDown::Open,
            WhenRedisDown::Closed => limiter_redis::WhenDown::Closed,
            WhenRedisDown::Local { share } => limiter_redis::WhenDown::Local { share },
            WhenRedisDown::Error => limiter_redis::WhenDown::Error,
        })
        .call_timeout(spec.timeout)
        .build()
}
