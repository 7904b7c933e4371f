//! [`RedisLimiterBuilder`]: every option of a [`RedisLimiter`] in one place,
//! validated once by [`build`](RedisLimiterBuilder::build).

use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use limiter_core::{Clock, Quota};
use redis::aio::ConnectionManager;

use crate::deny_cache::DenyCache;
use crate::error::RedisLimitError;
use crate::lease::Leases;
use crate::limiter::{Inner, RedisLimiter};
use crate::policy::{Breaker, FailurePolicy, LocalFallback};
use crate::script::SOURCE;
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
#[derive(Debug)]
pub struct RedisLimiterBuilder {
    conn: ConnectionManager,
    quota: Quota,
    prefix: String,
    time: TimeSource,
    call_timeout: Duration,
    retry_interval: Duration,
    policy: FailurePolicy,
    deny_cache: bool,
    lease: Option<(u32, Duration)>,
    expiry_margin: Duration,
}

impl RedisLimiterBuilder {
    pub(crate) fn new(conn: ConnectionManager, quota: Quota) -> RedisLimiterBuilder {
        RedisLimiterBuilder {
            conn,
            quota,
            prefix: "limiter".to_owned(),
            time: TimeSource::Redis,
            call_timeout: Duration::from_millis(100),
            retry_interval: Duration::from_secs(1),
            policy: FailurePolicy::default(),
            deny_cache: true,
            lease: None,
            expiry_margin: Duration::ZERO,
        }
    }

    /// The prefix of every Redis key: user key `k` lives at `{prefix:k}`.
    /// Limiters with different quotas must use different prefixes. It must
    /// not contain `{` or `}`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> RedisLimiterBuilder {
        self.prefix = prefix.into();
        self
    }

    /// Where `now` comes from (see [`TimeSource`]).
    pub fn time_source(mut self, time: TimeSource) -> RedisLimiterBuilder {
        self.time = time;
        self
    }

    /// Client-clock mode: `now` is `clock.now()` in whole µs, passed to the
    /// script, which then never calls `TIME`. All clients of a key must share
    /// the clock's epoch ([`SystemClock`](crate::SystemClock) across machines).
    pub fn client_clock(self, clock: impl Clock + 'static) -> RedisLimiterBuilder {
        self.time_source(TimeSource::Client(Arc::new(clock)))
    }

    /// How long one Redis call may take before it counts as failed (default
    /// 100 ms). A timed-out call is never retried: it may have been applied.
    pub fn call_timeout(mut self, timeout: Duration) -> RedisLimiterBuilder {
        self.call_timeout = timeout;
        self
    }

    /// How long the circuit breaker stays open after a failure before one
    /// call probes Redis again (default 1 s).
    pub fn retry_interval(mut self, interval: Duration) -> RedisLimiterBuilder {
        self.retry_interval = interval;
        self
    }

    /// What to answer while Redis is unavailable (default
    /// `Local { share: 1.0 }`).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> RedisLimiterBuilder {
        self.policy = policy;
        self
    }

    /// Whether to answer repeated requests on a denied key locally until
    /// its `retry_after` (default on; exact, see [`crate::deny_cache`]).
    pub fn deny_cache(mut self, on: bool) -> RedisLimiterBuilder {
        self.deny_cache = on;
        self
    }

    /// Lease mode: a try that finds no local permits takes up to
    /// `max_permits` from Redis in one call and keeps the rest for `ttl`
    /// (see [`crate::lease`] for the trade-off).
    pub fn lease(mut self, max_permits: u32, ttl: Duration) -> RedisLimiterBuilder {
        self.lease = Some((max_permits, ttl));
        self
    }

    /// Extra time on every key's TTL (default 0: a key expires exactly when
    /// it equals a fresh one). Only needed in client-clock mode when the
    /// client clock may run slower than Redis' (a test's manual clock):
    /// Redis expires keys on its own clock.
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
    pub fn build(self) -> Result<RedisLimiter, RedisLimitError> {
        let script_quota = ScriptQuota::new(self.quota)?;
        let invalid = |name, requirement| RedisLimitError::InvalidParameter { name, requirement };
        if self.call_timeout.is_zero() {
            return Err(invalid("call_timeout", "longer than zero"));
        }
        if self.prefix.contains(['{', '}']) {
            return Err(invalid("key_prefix", "free of `{` and `}`"));
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
            FailurePolicy::Local { share } => {
                Some(LocalFallback::new(self.quota, share, clock.clone())?)
            }
            _ => None,
        };
        let margin_ms = u64::try_from(self.expiry_margin.as_millis()).unwrap_or(u64::MAX);
        Ok(RedisLimiter::from_inner(Inner {
            conn: self.conn,
            script: redis::Script::new(SOURCE),
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
