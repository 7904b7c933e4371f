//! `Live`: the state of one rule's limiter (`Core`, one variant per kind
//! of limiter), built from a validated `RuleSpec`, and shared by every
//! `RuleLimiter` of that rule across reloads that keep its shape.
//!
//! Building cannot fail on the numbers (validation built the same limiter on
//! a `ManualClock`); only a Redis client can. `set_quota` moves the limiters
//! that have one (GCRA, keyed GCRA, priority) and keeps their state.

use std::sync::{Arc, OnceLock};

use crate::store::Conn;
#[cfg(feature = "redis")]
use crate::store::redis_limiter;
use limiter_async::AsyncLimiter;
use limiter_core::{
    AdaptiveLimiter, Decide, PriorityClass, PriorityLimiter, Quota, RateLimiter, Reservation,
    SlidingWindow, WarmUpBuilder, adaptive::EwmaAimd, adaptive::PercentileWindow,
};
#[cfg(feature = "redis")]
use limiter_redis::RedisLimiter;

use crate::RuleClock;
use crate::key::RuleKeyText;
use crate::local::LocalRule;
use limiter_concurrency::ConcurrencyLimiter;
use limiter_keyed::{KeyedBuilder, KeyedLimiter, TopKeys, WhenFull};
use limiter_rules::{Algorithm, BackendSpec, ControllerSpec, QueueSpec, RuleSpec};

/// The state of one rule's limiter, shared across reloads that keep its
/// shape.
pub(crate) enum Core<C: RuleClock> {
    /// One in-process limiter for the whole rule: GCRA, sliding window,
    /// warm-up or adaptive (what differs between them is `LocalRule`'s).
    Local(Arc<dyn LocalRule>),
    /// A keyed GCRA rule: `KeyedLimiter` by encoded key, evicting the
    /// least recently used key when full (a new key is always served).
    Keyed(Box<KeyedLimiter<RuleKeyText, C>>),
    /// A priority rule, decided per class (the class a request names):
    /// the limiter and the view of its lowest class (what unclassed
    /// requests use).
    Priority(Arc<PriorityLimiter<C>>, PriorityClass<C>),
    /// A `concurrency` or `adaptive_concurrency` rule: permits held while
    /// work is in progress (not a rate; decided outside the `Decide` seam,
    /// see `docs/concurrency.md`).
    Concurrency(ConcurrencyLimiter),
    /// The limiter for library calls and the HTTP layer alike, asked
    /// about encoded keys (`crate::key`): both write a client's key once,
    /// the same way, so both name the same Redis key.
    #[cfg(feature = "redis")]
    Redis { limiter: RedisLimiter, keyed: bool },
}

pub(crate) struct Live<C: RuleClock> {
    pub(crate) core: Core<C>,
    /// The waiting layer of an unkeyed local limiter, made on first use.
    pub(crate) waiter: OnceLock<AsyncLimiter<Arc<UnkeyedLimiter>>>,
    /// The keys with the most refusals, once the rule set records them
    /// (`RuleSet::record_top_keys`): a fixed summary of `TOP_SHARDS ×
    /// TOP_PER_SHARD` counters.
    pub(crate) top: OnceLock<TopKeys<RuleKeyText>>,
    /// The per-key quotas of a keyed rule, by source (see `overrides`).
    pub(crate) overrides: std::sync::Mutex<crate::overrides::Sources>,
}

/// An unkeyed in-process limiter as the waiting layer sees it.
pub(crate) type UnkeyedLimiter = dyn Decide<Key = (), Ticket = Reservation>;

/// Shards of a rule's top-keys summary.
const TOP_SHARDS: usize = 8;
/// Counters per shard.
const TOP_PER_SHARD: usize = 16;

impl<C: RuleClock> Core<C> {
    /// Whether the rule decides per client key (so its library calls need
    /// one).
    pub(crate) fn is_keyed(&self) -> bool {
        match self {
            Core::Keyed(_) => true,
            #[cfg(feature = "redis")]
            Core::Redis { keyed, .. } => *keyed,
            _ => false,
        }
    }
}

impl<C: RuleClock> Live<C> {
    /// Puts `spec`'s file overrides in force on a keyed rule's table,
    /// carrying the admin API's over from `previous` when this limiter
    /// replaces it (`crate::overrides::apply`); nothing for other rules.
    pub(crate) fn apply_overrides(
        &self,
        spec: &RuleSpec,
        previous: Option<&Live<C>>,
    ) -> Result<(), String> {
        let Core::Keyed(keyed) = &self.core else {
            return Ok(());
        };
        let replaced = previous
            .filter(|p| !std::ptr::eq(*p, self))
            .map(|p| &p.overrides);
        crate::overrides::apply(keyed, &self.overrides, spec, replaced)
    }

    /// Starts recording refusals per key (idempotent).
    pub(crate) fn record_top_keys(&self) {
        self.top
            .get_or_init(|| TopKeys::new(TOP_SHARDS, TOP_PER_SHARD));
    }
}

impl<C: RuleClock> Live<C> {
    /// The limiter of `spec` (already validated, so only Redis can fail),
    /// on `conn` for a Redis rule; the error is the message of the rule's
    /// build error.
    pub(crate) fn build(spec: &RuleSpec, clock: &C, conn: Option<Conn>) -> Result<Live<C>, String> {
        let clock = clock.clone();
        let keyed = !spec.key.is_global();
        let core = match (&spec.backend, &spec.algorithm) {
            #[cfg(feature = "redis")]
            (BackendSpec::Redis(r), a) => {
                // Validation accepts only GCRA quotas on Redis.
                let quota = a.quota().ok_or("a Redis rule needs a GCRA quota")?;
                let conn = conn.ok_or("a Redis rule needs a connection")?;
                let limiter = redis_limiter(conn, quota, r).map_err(|e| e.to_string())?;
                Core::Redis { limiter, keyed }
            }
            #[cfg(not(feature = "redis"))]
            (BackendSpec::Redis(_), _) => match conn {
                Some(conn) => match conn {},
                None => return Err(crate::store::no_redis().to_string()),
            },
            (BackendSpec::Local, Algorithm::TokenBucket { quota, .. })
            | (BackendSpec::Local, Algorithm::LeakyBucket { quota, .. }) => {
                if keyed {
                    Core::Keyed(Box::new(
                        KeyedBuilder::with_clock(*quota, clock)
                            .max_keys(spec.max_keys)
                            .max_overrides(limiter_rules::MAX_OVERRIDES)
                            .when_full(WhenFull::EvictLeastRecent)
                            .build()
                            .map_err(invalid)?,
                    ))
                } else {
                    Core::Local(Arc::new(RateLimiter::with_clock(*quota, clock)))
                }
            }
            (BackendSpec::Local, Algorithm::SlidingWindow { limit, window }) => Core::Local(
                Arc::new(SlidingWindow::with_clock(*limit, *window, clock).map_err(invalid)?),
            ),
            (
                BackendSpec::Local,
                Algorithm::WarmUp {
                    quota,
                    warm_up,
                    cold_factor,
                    ..
                },
            ) => Core::Local(Arc::new(
                WarmUpBuilder::with_clock(*quota, *warm_up, clock)
                    .cold_factor(*cold_factor)
                    .build()
                    .map_err(invalid)?,
            )),
            (
                BackendSpec::Local,
                Algorithm::Adaptive {
                    controller,
                    min_rate,
                    max_rate,
                    burst,
                },
            ) => match *controller {
                ControllerSpec::EwmaAimd { target } => Core::Local(Arc::new(
                    AdaptiveLimiter::builder(EwmaAimd::new(target))
                        .clock(clock)
                        .min_rate(*min_rate)
                        .max_rate(*max_rate)
                        .burst(*burst)
                        .build()
                        .map_err(invalid)?,
                )),
                ControllerSpec::Percentile { target } => Core::Local(Arc::new(
                    AdaptiveLimiter::builder(PercentileWindow::with_threshold(target))
                        .clock(clock)
                        .min_rate(*min_rate)
                        .max_rate(*max_rate)
                        .burst(*burst)
                        .build()
                        .map_err(invalid)?,
                )),
            },
            (BackendSpec::Local, Algorithm::Priority { quota, classes, .. }) => {
                let shares: Vec<f64> = classes.iter().map(|(_, s)| *s).collect();
                let limiter =
                    Arc::new(PriorityLimiter::with_clock(*quota, &shares, clock).map_err(invalid)?);
                let lowest = limiter
                    .class(shares.len().saturating_sub(1))
                    .map_err(|_| invalid(limiter_core::QuotaError::ZeroRate))?;
                Core::Priority(limiter, lowest)
            }
            (BackendSpec::Local, Algorithm::Concurrency { limit, queue }) => Core::Concurrency(
                ConcurrencyLimiter::builder(*limit)
                    .queue(queue_capacity(queue), queue.order)
                    .build()
                    .map_err(unrepresentable)?,
            ),
            (
                BackendSpec::Local,
                Algorithm::AdaptiveConcurrency {
                    estimator,
                    bounds,
                    drift_guard,
                    queue,
                },
            ) => Core::Concurrency(
                ConcurrencyLimiter::adaptive(
                    estimator
                        .build(*bounds, *drift_guard)
                        .map_err(unrepresentable)?,
                )
                .queue(queue_capacity(queue), queue.order)
                .build()
                .map_err(unrepresentable)?,
            ),
        };
        Ok(Live {
            core,
            waiter: OnceLock::new(),
            top: OnceLock::new(),
            overrides: std::sync::Mutex::default(),
        })
    }
}

fn queue_capacity(queue: &QueueSpec) -> usize {
    usize::try_from(queue.capacity).unwrap_or(usize::MAX)
}

fn unrepresentable(e: limiter_concurrency::ConfigError) -> String {
    // Unreachable for validated specs: validation built the same limiter
    // and estimator.
    e.to_string()
}

fn invalid(e: limiter_core::QuotaError) -> String {
    // Unreachable for validated specs: validation built the same limiter.
    e.to_string()
}

impl<C: RuleClock> Live<C> {
    /// Moves the live limiter to `quota`, keeping its state; `false` if
    /// this limiter cannot (then the caller replaces it).
    pub(crate) fn set_quota(&self, quota: Quota) -> bool {
        match &self.core {
            Core::Local(l) => l.set_quota(quota),
            Core::Keyed(k) => {
                k.set_quota(quota);
                true
            }
            Core::Priority(p, _) => p.set_quota(quota).is_ok(),
            _ => false,
        }
    }

    /// Moves a concurrency rule's live limiter to `new`'s numbers (limit,
    /// queue, estimator), keeping the permits held and the waiters:
    /// `Some(true)` when something changed, `Some(false)` when nothing did,
    /// `None` for a rule that is not a concurrency rule or whose kind
    /// changed (then the caller goes on with the quota).
    pub(crate) fn retune(&self, old: &Algorithm, new: &Algorithm) -> Option<bool> {
        let Core::Concurrency(limiter) = &self.core else {
            return None;
        };
        let queue = match (old, new) {
            (Algorithm::Concurrency { .. }, Algorithm::Concurrency { limit, queue }) => {
                // A validated limit: set_limit cannot refuse it.
                let _ = limiter.set_limit(*limit);
                queue
            }
            (
                Algorithm::AdaptiveConcurrency {
                    estimator: e0,
                    bounds: b0,
                    drift_guard: g0,
                    ..
                },
                Algorithm::AdaptiveConcurrency {
                    estimator,
                    bounds,
                    drift_guard,
                    queue,
                },
            ) => {
                if (e0, b0, g0) != (estimator, bounds, drift_guard) {
                    // Validated numbers: the estimator builds.
                    let built = estimator.build(*bounds, *drift_guard).ok()?;
                    if !limiter.replace_estimator(built) {
                        return None;
                    }
                }
                queue
            }
            _ => return None,
        };
        limiter.set_queue(queue_capacity(queue), queue.order);
        Some(old != new)
    }

    /// The unkeyed local limiter, for waiting.
    pub(crate) fn local(&self) -> Option<Arc<UnkeyedLimiter>> {
        Some(match &self.core {
            Core::Local(l) => Arc::clone(l) as Arc<UnkeyedLimiter>,
            Core::Priority(_, lowest) => Arc::new(lowest.clone()) as Arc<UnkeyedLimiter>,
            _ => return None,
        })
    }
}
