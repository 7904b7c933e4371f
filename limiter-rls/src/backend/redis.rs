//! The Redis backends (one server or a Cluster), shared by every replica.
//!
//! [`RedisGcra`] is limiter-redis's [`RedisLimiter`] and its one-script
//! multi-key decision (`try_acquire_all_until`): all keys of a request are
//! charged or none, in one round trip, with its circuit breaker, timeout
//! and [`WhenDown`]. A peek is the same script with every
//! `n = 0` (it writes nothing). On a Cluster every key of a domain carries
//! the hash tag `{domain}` so a request's keys meet in one slot (a domain's
//! counters then live on one shard). A reset time is the script's
//! `tat − now`, exact to the microsecond (the unit the key's `tat` is kept
//! in), never rounded to emission intervals. A charge past the limit is
//! limiter-redis's capped debt (`charge_after_until`, one script call per
//! part), then a peek for the states.
//!
//! [`RedisFixed`] keeps envoyproxy/ratelimit's keys and values bit for bit
//! (`CACHE_KEY_PREFIX + domain_key_value_…_ + window_start`, `INCRBY`,
//! `EXPIRE unit`), so Go and Rust replicas can share counters during a
//! migration. One script checks every key before it increments any (theirs
//! increments unconditionally, so a refused request charges here nothing
//! and there everything). Their keys have no hash tag, so on a Cluster each
//! key is decided by its own script call in request order, and a refusal
//! takes back (`DECRBY`) what the earlier calls added: all or nothing, not
//! atomic across keys. Every script call goes through a [`RedisLimiter`]'s
//! circuit breaker and timeout ([`RedisLimiter::call_guarded`]), the one
//! breaker of the workspace: after a failure, calls skip Redis for the
//! breaker interval (1 s) but one probe; on failure the same
//! [`WhenDown`] answers (`Local` from a [`MemoryFixed`]).
//!
//! # One deadline per request
//!
//! A decision may take several calls (a charge, then a read and a charge
//! again when something refused, and on a Cluster one call per key). Every
//! call of one request shares the request's deadline (`REDIS_TIMEOUT`
//! after it began, 10 ms by default, half of Envoy's 20 ms): a call is cut
//! short there, and a call after it is not made, the failure policy
//! answering at once. So a dead, paused or blackholed Redis costs a request
//! at most the budget, whatever the number of calls.

use core::time::Duration;
use std::collections::HashMap;

use limiter_core::Quota;
use limiter_redis::{RedisConnection, RedisLimitError, RedisLimiter, Source, WhenDown};
use redis::Script;
use tokio::time::Instant;

use super::memory::{MemoryFixed, MemoryGcra, debt_cap};
use super::{BackendError, Charge, CounterStore, Part, PartState};
use crate::window::{self, UnixClock};
use limiter_core::Clock;

/// Distinct `(key, quota, n)` of a call, and each part's index among them.
type Merged = (Vec<(String, Quota, u32)>, Vec<usize>);

/// GCRA on Redis; see the module docs.
#[derive(Debug)]
pub struct RedisGcra {
    limiter: RedisLimiter,
    cluster: bool,
    policy: WhenDown,
}

impl RedisGcra {
    /// A backend on `conn`: keys under `prefix`, each call bounded by
    /// `timeout` (and by its request's deadline), `policy` answering while
    /// Redis cannot.
    ///
    /// # Errors
    ///
    /// limiter-redis's builder errors (a prefix with braces).
    pub fn new(
        conn: RedisConnection,
        prefix: &str,
        timeout: Duration,
        policy: WhenDown,
    ) -> Result<RedisGcra, BackendError> {
        RedisGcra::build(conn, prefix, timeout, policy, None::<UnixClock>)
    }

    /// As [`new`](RedisGcra::new), with `now` read from `clock` on this
    /// side (whole µs, passed to the script) instead of Redis' `TIME`: for
    /// exact tests under a manual clock. Every replica sharing the keys
    /// must share the clock's epoch.
    ///
    /// # Errors
    ///
    /// As [`new`](RedisGcra::new).
    pub fn with_clock(
        conn: RedisConnection,
        prefix: &str,
        timeout: Duration,
        policy: WhenDown,
        clock: impl Clock + 'static,
    ) -> Result<RedisGcra, BackendError> {
        RedisGcra::build(conn, prefix, timeout, policy, Some(clock))
    }

    fn build(
        conn: RedisConnection,
        prefix: &str,
        timeout: Duration,
        policy: WhenDown,
        clock: Option<impl Clock + 'static>,
    ) -> Result<RedisGcra, BackendError> {
        let cluster = conn.is_cluster();
        let quota = Quota::per_second(1).map_err(|e| BackendError(e.to_string()))?;
        let mut builder = RedisLimiter::builder_with_connection(conn, quota)
            .key_prefix(if prefix.is_empty() { "rls" } else { prefix })
            .call_timeout(timeout)
            .failure_policy(policy)
            .deny_cache(false);
        if let Some(clock) = clock {
            builder = builder.client_clock(clock);
        }
        let limiter = builder.build().map_err(|e| BackendError(e.to_string()))?;
        Ok(RedisGcra {
            limiter,
            cluster,
            policy,
        })
    }

    /// How many calls failed (for the `redis_error` stat).
    pub fn failures(&self) -> u64 {
        self.limiter.redis_failures()
    }

    /// Parts merged by key (one descriptor twice in a request adds up),
    /// with their quotas, and each part's index in the merged list.
    fn merged(&self, parts: &[Part], peek: bool) -> Result<Merged, BackendError> {
        let mut list: Vec<(String, Quota, u32)> = Vec::with_capacity(parts.len());
        let mut at: HashMap<(String, crate::config::LimitSpec), usize> = HashMap::new();
        let mut index = Vec::with_capacity(parts.len());
        for p in parts {
            let q = limiter_redis::quota_in_micros(MemoryGcra::<UnixClock>::quota(p.limit)?)
                .map_err(|e| BackendError(e.to_string()))?;
            let n = if peek { 0 } else { p.hits };
            let tail = format!(
                "{}{}/{}",
                p.key,
                p.limit.requests_per_unit,
                p.limit.unit.name()
            );
            let key = if self.cluster {
                let domain = p.key.get(..p.domain_len).unwrap_or("");
                format!("{{{domain}}}{tail}")
            } else {
                tail
            };
            match at.get(&(key.clone(), p.limit)) {
                Some(&i) => {
                    list[i].2 = list[i].2.saturating_add(n);
                    index.push(i);
                }
                None => {
                    at.insert((key.clone(), p.limit), list.len());
                    index.push(list.len());
                    list.push((key, q, n));
                }
            }
        }
        Ok((list, index))
    }

    async fn call(
        &self,
        parts: &[Part],
        peek: bool,
        deadline: Instant,
    ) -> Result<Option<Vec<PartState>>, BackendError> {
        if peek && parts.iter().any(|p| p.limit.requests_per_unit == 0) {
            // A limit of 0 holds no state on Redis: answered here.
            let counted: Vec<Part> = parts
                .iter()
                .filter(|p| p.limit.requests_per_unit > 0)
                .cloned()
                .collect();
            let mut states = match Box::pin(self.call(&counted, true, deadline)).await? {
                Some(s) => s.into_iter(),
                None => Vec::new().into_iter(),
            };
            return Ok(Some(
                parts
                    .iter()
                    .map(|p| {
                        if p.limit.requests_per_unit == 0 {
                            MemoryGcra::<UnixClock>::never(p.limit)
                        } else {
                            states
                                .next()
                                .unwrap_or(MemoryGcra::<UnixClock>::never(p.limit))
                        }
                    })
                    .collect(),
            ));
        }
        let (list, index) = self.merged(parts, peek)?;
        if list.iter().any(|(_, q, n)| *n > q.burst()) {
            return Ok(None);
        }
        let refs: Vec<(&str, Quota, u32)> =
            list.iter().map(|(k, q, n)| (k.as_str(), *q, *n)).collect();
        match self.limiter.try_acquire_all_until(&refs, deadline).await {
            Ok(admissions) => Ok(Some(
                index
                    .iter()
                    .zip(parts)
                    .map(|(&i, p)| {
                        let a = admissions[i];
                        let redis = matches!(a.source, Source::Redis);
                        PartState {
                            // Fail-open knows no count: the whole limit
                            // remains (as the fixed window's), so a
                            // check-only descriptor passes too.
                            remaining: if matches!(a.source, Source::FailOpen) {
                                p.limit.requests_per_unit
                            } else {
                                a.remaining
                            },
                            reset: a.reset_after,
                            degraded: !redis,
                            exceeded: redis
                                && MemoryGcra::<UnixClock>::exceeded(a.reset_after, list[i].1),
                        }
                    })
                    .collect(),
            )),
            Err(RedisLimitError::RateLimited { source, .. }) if peek => Ok(Some(
                // Under `Closed` a peek is refused too: nothing remains.
                parts
                    .iter()
                    .map(|_| PartState {
                        remaining: 0,
                        reset: Duration::ZERO,
                        degraded: !matches!(source, Source::Redis),
                        // Closed: a check is refused too.
                        exceeded: true,
                    })
                    .collect(),
            )),
            Err(RedisLimitError::RateLimited { .. }) => Ok(None),
            Err(e) => Err(BackendError(e.to_string())),
        }
    }
}

impl CounterStore for RedisGcra {
    fn store(&self) -> &'static str {
        "redis"
    }

    async fn try_all(&self, parts: &[Part], deadline: Instant) -> Result<Charge, BackendError> {
        Ok(match self.call(parts, false, deadline).await? {
            Some(states) => Charge::Granted(states),
            None => Charge::Refused,
        })
    }

    async fn peek(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        Ok(self.call(parts, true, deadline).await?.unwrap_or_default())
    }

    async fn charge_over(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        let counted: Vec<Part> = parts
            .iter()
            .filter(|p| p.limit.requests_per_unit > 0)
            .cloned()
            .collect();
        let (list, index) = self.merged(&counted, false)?;
        let mut caps = vec![Duration::ZERO; list.len()];
        for (&i, p) in index.iter().zip(&counted) {
            caps[i] = debt_cap(p.limit, list[i].1);
        }
        for ((key, quota, n), &cap) in list.iter().zip(&caps) {
            if *n == 0 {
                continue;
            }
            let charged = self
                .limiter
                .charge_after_until(key, *quota, u64::from(*n), cap, deadline)
                .await;
            match charged {
                Ok(_) => {}
                Err(e) if e.is_unavailable() && !matches!(self.policy, WhenDown::Error) => {
                    tracing::warn!(error = %e, "redis failed; a charge past the limit is lost");
                }
                Err(e) => return Err(BackendError(e.to_string())),
            }
        }
        self.peek(parts, deadline).await
    }
}

/// The fixed-window script: KEYS are counters; ARGV[1] is 1 to charge, 0
/// to read, 2 to charge even past the limit; then per key: expiry seconds,
/// hits, limit. Every count is read before any is incremented, and with 1
/// nothing is incremented unless every key fits. Reply: `{fits (0|1),
/// count_1, …}` (the counts after the charge when charged).
const FIXED_SCRIPT: &str = r"
local charge = ARGV[1] == '1' or ARGV[1] == '2'
local fits = 1
local counts = {}
for i = 1, #KEYS do
  local j = 2 + 3 * (i - 1)
  local c = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  counts[i] = c
  if c + tonumber(ARGV[j + 1]) > tonumber(ARGV[j + 2]) then
    fits = 0
  end
end
if charge and (fits == 1 or ARGV[1] == '2') then
  for i = 1, #KEYS do
    local j = 2 + 3 * (i - 1)
    counts[i] = redis.call('INCRBY', KEYS[i], ARGV[j + 1])
    redis.call('EXPIRE', KEYS[i], ARGV[j])
  end
end
local reply = { fits }
for i = 1, #KEYS do
  reply[#reply + 1] = counts[i]
end
return reply
";

/// Fixed windows on Redis; see the module docs.
#[derive(Debug)]
pub struct RedisFixed {
    conn: RedisConnection,
    /// Only for its circuit breaker and timeout (`call_guarded`).
    guard: RedisLimiter,
    prefix: String,
    policy: WhenDown,
    fallback: MemoryFixed,
    clock: UnixClock,
    script: Script,
}

impl RedisFixed {
    /// A backend on `conn` with envoyproxy/ratelimit's key `prefix`
    /// (`CACHE_KEY_PREFIX`, may be empty), each call bounded by `timeout`
    /// (and by its request's deadline), `policy` answering while Redis
    /// cannot.
    ///
    /// # Errors
    ///
    /// limiter-redis's builder errors (none for these arguments).
    pub fn new(
        conn: RedisConnection,
        prefix: &str,
        timeout: Duration,
        policy: WhenDown,
        max_keys: usize,
    ) -> Result<RedisFixed, BackendError> {
        let quota = Quota::per_second(1).map_err(|e| BackendError(e.to_string()))?;
        // Its own policy is never asked (`failed` answers here, with fixed
        // windows): `Error` keeps it from building a GCRA fallback.
        let guard = RedisLimiter::builder_with_connection(conn.clone(), quota)
            .call_timeout(timeout)
            .failure_policy(WhenDown::Error)
            .deny_cache(false)
            .build()
            .map_err(|e| BackendError(e.to_string()))?;
        Ok(RedisFixed {
            conn,
            guard,
            prefix: prefix.to_owned(),
            policy,
            fallback: MemoryFixed::new(UnixClock::new(), max_keys),
            clock: UnixClock::new(),
            script: Script::new(FIXED_SCRIPT),
        })
    }

    /// How many calls failed (timed out, could not reach Redis).
    pub fn failures(&self) -> u64 {
        self.guard.redis_failures()
    }

    /// The Redis keys of `parts` now.
    pub fn keys(&self, parts: &[Part], now: u64) -> Vec<String> {
        parts
            .iter()
            .map(|p| {
                let d = p.limit.unit.seconds().unwrap_or(1);
                window::cache_key(&self.prefix, &p.key, window::window_start(now, d))
            })
            .collect()
    }

    async fn run(
        &self,
        parts: &[Part],
        keys: &[String],
        mode: Mode,
        deadline: Instant,
    ) -> Result<Vec<u64>, String> {
        let mut inv = self.script.prepare_invoke();
        inv.arg(mode as u8);
        for (p, k) in parts.iter().zip(keys) {
            inv.key(k);
            inv.arg(p.limit.unit.seconds().unwrap_or(1))
                .arg(p.hits)
                .arg(p.limit.requests_per_unit);
        }
        let call = async {
            match &self.conn {
                RedisConnection::Single(c) => inv.invoke_async::<Vec<u64>>(&mut c.clone()).await,
                RedisConnection::Cluster(c) => inv.invoke_async::<Vec<u64>>(&mut c.clone()).await,
                _ => Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "unknown connection",
                ))),
            }
        };
        match self.guard.call_guarded(Some(deadline), call).await {
            Ok(reply) if reply.len() == keys.len() + 1 => Ok(reply),
            Ok(_) => Err("unexpected script reply".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn decr(&self, part: &Part, key: &str, deadline: Instant) {
        let mut cmd = redis::cmd("DECRBY");
        cmd.arg(key).arg(part.hits);
        let call = async {
            match &self.conn {
                RedisConnection::Single(c) => cmd.query_async::<i64>(&mut c.clone()).await,
                RedisConnection::Cluster(c) => cmd.query_async::<i64>(&mut c.clone()).await,
                _ => Ok(0),
            }
        };
        // A give-back that fails (or finds the deadline past) leaves the
        // count higher: stricter.
        let _ = self.guard.call_guarded(Some(deadline), call).await;
    }

    fn states(&self, parts: &[Part], counts: &[u64], now: u64) -> Vec<PartState> {
        parts
            .iter()
            .zip(counts)
            .map(|(p, &c)| PartState {
                remaining: u32::try_from(u64::from(p.limit.requests_per_unit).saturating_sub(c))
                    .unwrap_or(u32::MAX),
                reset: window::until_window_end(now, p.limit.unit.seconds().unwrap_or(1)),
                degraded: false,
                exceeded: c > u64::from(p.limit.requests_per_unit),
            })
            .collect()
    }

    async fn failed(
        &self,
        parts: &[Part],
        mode: Mode,
        why: String,
        deadline: Instant,
    ) -> Result<Option<Vec<PartState>>, BackendError> {
        tracing::warn!(error = %why, "redis failed; answering by the failure policy");
        metrics::counter!("rls_redis_errors_total").increment(1);
        // Open: the whole limit remains; closed: nothing, a check refused.
        let degraded = |open: bool| {
            parts
                .iter()
                .map(|p| PartState {
                    remaining: if open { p.limit.requests_per_unit } else { 0 },
                    reset: Duration::ZERO,
                    degraded: true,
                    exceeded: !open,
                })
                .collect()
        };
        match self.policy {
            WhenDown::Open => Ok(Some(degraded(true))),
            WhenDown::Closed if mode == Mode::Charge => Ok(None),
            WhenDown::Closed => Ok(Some(degraded(false))),
            WhenDown::Local { .. } => {
                let r = match mode {
                    Mode::Charge => match self.fallback.try_all(parts, deadline).await? {
                        Charge::Granted(s) => Some(s),
                        Charge::Refused => None,
                    },
                    Mode::Read => Some(self.fallback.peek(parts, deadline).await?),
                    Mode::Over => Some(self.fallback.charge_over(parts, deadline).await?),
                };
                Ok(r.map(|s| {
                    s.into_iter()
                        .map(|s| PartState {
                            degraded: true,
                            ..s
                        })
                        .collect()
                }))
            }
            _ => Err(BackendError(why)),
        }
    }

    async fn call(
        &self,
        parts: &[Part],
        mode: Mode,
        deadline: Instant,
    ) -> Result<Option<Vec<PartState>>, BackendError> {
        let now = self.clock.now();
        let keys = self.keys(parts, now);
        if !self.conn.is_cluster() {
            return match self.run(parts, &keys, mode, deadline).await {
                Ok(reply) if reply[0] == 1 || mode != Mode::Charge => {
                    Ok(Some(self.states(parts, &reply[1..], now)))
                }
                Ok(_) => Ok(None),
                Err(why) => self.failed(parts, mode, why, deadline).await,
            };
        }
        let mut counts = Vec::with_capacity(parts.len());
        for (i, (p, k)) in parts.iter().zip(&keys).enumerate() {
            match self
                .run(
                    std::slice::from_ref(p),
                    std::slice::from_ref(k),
                    mode,
                    deadline,
                )
                .await
            {
                Ok(reply) if reply[0] == 1 || mode != Mode::Charge => counts.push(reply[1]),
                Ok(_) => {
                    for (q, k) in parts[..i].iter().zip(&keys) {
                        self.decr(q, k, deadline).await;
                    }
                    return Ok(None);
                }
                Err(why) => {
                    // A charge past the limit is a cost incurred: kept.
                    if mode == Mode::Charge {
                        for (q, k) in parts[..i].iter().zip(&keys) {
                            self.decr(q, k, deadline).await;
                        }
                    }
                    return self.failed(parts, mode, why, deadline).await;
                }
            }
        }
        Ok(Some(self.states(parts, &counts, now)))
    }
}

/// What a fixed-window script call does (its `ARGV[1]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Read every count.
    Read = 0,
    /// Charge every key if all fit, else none.
    Charge = 1,
    /// Charge every key, past the limit too.
    Over = 2,
}

impl CounterStore for RedisFixed {
    fn store(&self) -> &'static str {
        "redis"
    }

    async fn try_all(&self, parts: &[Part], deadline: Instant) -> Result<Charge, BackendError> {
        Ok(match self.call(parts, Mode::Charge, deadline).await? {
            Some(states) => Charge::Granted(states),
            None => Charge::Refused,
        })
    }

    async fn peek(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        Ok(self
            .call(parts, Mode::Read, deadline)
            .await?
            .unwrap_or_default())
    }

    async fn charge_over(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        Ok(self
            .call(parts, Mode::Over, deadline)
            .await?
            .unwrap_or_default())
    }
}
