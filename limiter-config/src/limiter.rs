//! [`RuleLimiter`]: the limiter one rule became, for library users
//! (`rules.get("order_service")?.take().await`) and for the HTTP layer:
//! what it holds, how it is built, and typed access to its limiter.
//!
//! A rule's state lives in a shared `Live` value that outlives reloads: a
//! reload that keeps the rule's shape builds a new [`RuleLimiter`] (with the
//! new spec) around the *same* `Live`, after moving its quota with
//! `set_quota`. A `RuleLimiter` held across a reload therefore keeps
//! deciding on the live state, under the new quota. Taking permits is
//! `acquire`; the HTTP backend is `backend`.

use crate::RuleClock;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use limiter_concurrency::ConcurrencyLimiter;
use limiter_core::{
    AdaptiveLimiter, PriorityClass, RateLimiter, adaptive::Completion, adaptive::EwmaAimd,
    adaptive::PercentileWindow,
};
use limiter_keyed::{KeyedLimiter, PenaltyBox, TopKey};
#[cfg(feature = "redis")]
use limiter_redis::RedisLimiter;

use crate::key::{RuleKeyText, library_key};
use crate::live::{Core, Live};
use crate::local::downcast;
use limiter_rules::{Algorithm, RuleSpec};

/// The limiter one rule became: take permits from it, by key for keyed
/// rules.
///
/// For a global rule the `_key` methods ignore the key; for a keyed rule
/// the methods without a key fail with
/// [`RuleError::NeedsKey`](crate::RuleError::NeedsKey).
///
/// # Examples
///
/// ```
/// use limiter_config::RuleSet;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("limiter-config-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let path = dir.join("rules.yaml");
/// std::fs::write(&path, "rate_limits:\n  order_service:\n    algorithm: leaky_bucket\n    rate: 800\n")?;
/// let rules = RuleSet::load(&path)?;
/// let orders = rules.get("order_service").expect("in the file");
/// orders.take().await?; // at once
/// orders.take().await?; // 1.25 ms later: 800/s, strictly paced
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
pub struct RuleLimiter<C: RuleClock> {
    pub(crate) spec: RuleSpec,
    pub(crate) live: Arc<Live<C>>,
    /// The rule's penalty box (a keyed rule with `penalty`), kept across
    /// reloads that keep the limiter and the penalty.
    pub(crate) penalty: Option<Arc<PenaltyBox<RuleKeyText, C>>>,
    /// The rule's calendar count (a rule with `quota`), on the rule set's
    /// wall clock; kept across reloads that keep its period, zone, reset
    /// day and store (see `calendar`).
    pub(crate) calendar: Option<Arc<crate::calendar::RuleCalendar>>,
    /// `rate_limit_shadow_rejected_total`, `rate_limit_shadow_delayed_total`
    /// and `rate_limit_penalized_total` of the rule.
    pub(crate) counters: RuleCounters,
}

/// The counters a rule's decisions add to besides the layer's own.
#[derive(Debug, Clone)]
pub(crate) struct RuleCounters {
    pub(crate) shadow_rejected: metrics::Counter,
    pub(crate) shadow_delayed: metrics::Counter,
    pub(crate) penalized: metrics::Counter,
}

/// The counter of shadowed refusals: requests a rule in shadow mode would
/// have refused (`429` or `413`) and let through.
pub const SHADOW_REJECTED: &str = "rate_limit_shadow_rejected_total";
/// The counter of shadowed delays: requests a delay-mode rule in shadow
/// mode would have held, let through at once (their permits charged).
pub const SHADOW_DELAYED: &str = "rate_limit_shadow_delayed_total";
/// The counter of requests refused because their key was in the rule's
/// penalty box.
pub const PENALIZED: &str = "rate_limit_penalized_total";

impl RuleCounters {
    fn new(rule: &str) -> RuleCounters {
        static DESCRIBED: std::sync::Once = std::sync::Once::new();
        DESCRIBED.call_once(|| {
            metrics::describe_counter!(
                SHADOW_REJECTED,
                "Requests a rule in shadow mode would have refused, let through."
            );
            metrics::describe_counter!(
                SHADOW_DELAYED,
                "Requests a delay-mode rule in shadow mode would have held, let through at once."
            );
            metrics::describe_counter!(
                PENALIZED,
                "Requests refused because their key was in the rule's penalty box."
            );
        });
        let counters = RuleCounters {
            shadow_rejected: metrics::counter!(SHADOW_REJECTED, "limiter" => rule.to_owned()),
            shadow_delayed: metrics::counter!(SHADOW_DELAYED, "limiter" => rule.to_owned()),
            penalized: metrics::counter!(PENALIZED, "limiter" => rule.to_owned()),
        };
        // Registered at 0, so each series exists from the first scrape.
        counters.shadow_rejected.increment(0);
        counters.shadow_delayed.increment(0);
        counters.penalized.increment(0);
        counters
    }
}

impl<C: RuleClock> fmt::Debug for RuleLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleLimiter")
            .field("name", &self.spec.name)
            .field("algorithm", &self.spec.algorithm)
            .finish_non_exhaustive()
    }
}

impl<C: RuleClock> RuleLimiter<C> {
    /// The rule `spec` over the state `live`, with its penalty box.
    pub(crate) fn new(
        spec: RuleSpec,
        live: Arc<Live<C>>,
        penalty: Option<Arc<PenaltyBox<RuleKeyText, C>>>,
    ) -> RuleLimiter<C> {
        let counters = RuleCounters::new(&spec.name);
        RuleLimiter {
            spec,
            live,
            penalty,
            calendar: None,
            counters,
        }
    }

    /// The same rule with its calendar count.
    pub(crate) fn with_calendar(
        mut self,
        calendar: Option<Arc<crate::calendar::RuleCalendar>>,
    ) -> RuleLimiter<C> {
        self.calendar = calendar;
        self
    }

    /// The permits `key` (as [`RuleLimiter::key`] writes it; any text for
    /// a global rule) has left in the current period of the rule's calendar
    /// `quota`, and the time until that period resets, read without
    /// deciding; `None` for a rule without `quota` or on Redis (remote).
    pub fn quota_remaining(&self, key: &str) -> Option<(u32, Duration)> {
        let state = self
            .calendar
            .as_ref()?
            .read(&crate::key::library_key(key))?;
        Some((state.remaining, state.reset_in))
    }

    /// Whether the rule is in shadow mode (decides and counts, refuses and
    /// delays nothing).
    pub fn is_shadow(&self) -> bool {
        self.spec.shadow
    }

    /// The keys a keyed local rule holds now (`None` for other rules).
    pub fn keys_in_use(&self) -> Option<usize> {
        self.keyed().map(KeyedLimiter::len)
    }

    /// The rule's penalty box, for a keyed rule with `penalty`.
    pub fn penalty_box(&self) -> Option<&PenaltyBox<RuleKeyText, C>> {
        self.penalty.as_deref()
    }

    /// Ends the block of `key` (the key text as [`RuleSet::explain`]
    /// shows it) in the rule's penalty box now; whether the key was held.
    ///
    /// [`RuleSet::explain`]: crate::RuleSet::explain
    pub fn release_penalty(&self, key: &str) -> bool {
        self.penalty
            .as_ref()
            .is_some_and(|b| b.release(&RuleKeyText::from_encoded(key)))
    }

    /// The keys with the most refusals by this rule, heaviest first, once
    /// [`RuleSet::record_top_keys`](crate::RuleSet::record_top_keys) is on
    /// (empty before).
    pub fn top_keys(&self, n: usize) -> Vec<TopKey<RuleKeyText>> {
        self.live.top.get().map_or_else(Vec::new, |t| t.top(n))
    }

    /// The rule as understood.
    pub fn spec(&self) -> &RuleSpec {
        &self.spec
    }

    /// The rule's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The GCRA limiter of a global local `token_bucket` or `leaky_bucket`
    /// rule, for its synchronous methods (`try_acquire`, `available`,
    /// `quota`).
    pub fn gcra(&self) -> Option<&RateLimiter<C>> {
        match &self.live.core {
            Core::Local(l) => downcast(&**l),
            _ => None,
        }
    }

    /// The per-key table of a keyed local rule (`limiter-keyed`'s
    /// `KeyedLimiter`), by encoded key: [`RuleLimiter::key`] writes one
    /// from a caller's text.
    pub fn keyed(&self) -> Option<&KeyedLimiter<RuleKeyText, C>> {
        match &self.live.core {
            Core::Keyed(k) => Some(k),
            _ => None,
        }
    }

    /// The table key of `key` (an address, a user id): the text as the HTTP
    /// layer writes it, so `"10.0.0.7"` names the key of that client's
    /// requests under `key: ip` (and `"2001:db8:0:7::"` the key of every
    /// client in that IPv6 `/64`).
    pub fn key(key: &str) -> RuleKeyText {
        library_key(key)
    }

    /// The Redis limiter of a `backend: redis` rule.
    #[cfg(feature = "redis")]
    pub fn redis(&self) -> Option<&RedisLimiter> {
        match &self.live.core {
            Core::Redis { limiter, .. } => Some(limiter),
            _ => None,
        }
    }

    /// The limiter of a `concurrency` or `adaptive_concurrency` rule: a
    /// permit from it (`try_acquire`, `acquire().await`) is held until
    /// dropped or [`finish`](limiter_concurrency::Permit::finish)ed. The
    /// same limiter across reloads that change only its numbers.
    pub fn concurrency(&self) -> Option<&ConcurrencyLimiter> {
        match &self.live.core {
            Core::Concurrency(l) => Some(l),
            _ => None,
        }
    }

    /// The adaptive limiter of an `adaptive` rule with `policy: ewma_aimd`,
    /// to [`record`](AdaptiveLimiter::record) latencies into.
    pub fn adaptive_ewma(&self) -> Option<&AdaptiveLimiter<EwmaAimd, C>> {
        match &self.live.core {
            Core::Local(l) => downcast(&**l),
            _ => None,
        }
    }

    /// The adaptive limiter of an `adaptive` rule with `policy: percentile`.
    pub fn adaptive_percentile(&self) -> Option<&AdaptiveLimiter<PercentileWindow, C>> {
        match &self.live.core {
            Core::Local(l) => downcast(&**l),
            _ => None,
        }
    }

    /// Whether this is an `adaptive` rule (whose rate follows the latencies
    /// given to [`record`](RuleLimiter::record)).
    pub fn is_adaptive(&self) -> bool {
        matches!(self.spec.algorithm, Algorithm::Adaptive { .. })
    }

    /// Records a downstream latency and what became of the request into an
    /// `adaptive` rule's policy (the HTTP layer does this for routed
    /// rules); does nothing for other rules.
    pub fn record(&self, latency: Duration, outcome: Completion) {
        if let Core::Local(l) = &self.live.core {
            l.record(latency, outcome);
        }
    }

    /// The class named `class` of a `priority` rule.
    pub fn class(&self, class: &str) -> Option<PriorityClass<C>> {
        let Core::Priority(limiter, _) = &self.live.core else {
            return None;
        };
        let Algorithm::Priority { classes, .. } = &self.spec.algorithm else {
            return None;
        };
        let index = classes.iter().position(|(name, _)| name == class)?;
        limiter.class(index).ok()
    }
}
