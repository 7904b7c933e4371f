//! [`RuleLimiter`]: the limiter one rule became, for library users
//! (`rules.get("order_service")?.take().await`) and for the HTTP layer.
//!
//! A rule's state lives in a shared `Live` value that outlives reloads: a
//! reload that keeps the rule's shape builds a new [`RuleLimiter`] (with the
//! new spec) around the *same* `Live`, after moving its quota with
//! `set_quota`. A `RuleLimiter` held across a reload therefore keeps
//! deciding on the live state, under the new quota.
//!
//! Time is the rule set's clock; waiting (`take*`) goes through
//! `limiter-async` (the clock's readings paired with tokio's), or through
//! `limiter-redis`'s own `take` for Redis rules.

use crate::RuleClock;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use limiter_async::{AsyncLimiter, CancelGrant, SlotWait, WakeUp};
use limiter_concurrency::ConcurrencyLimiter;
use limiter_core::{
    AcquireError, AdaptiveLimiter, Decide, PriorityClass, RateLimiter, adaptive::Completion,
    adaptive::EwmaAimd, adaptive::PercentileWindow,
};
use limiter_keyed::{KeyedError, KeyedLimiter, PenaltyBox, TopKey};
#[cfg(feature = "redis")]
use limiter_redis::{RedisLimitError, RedisLimiter};

use crate::key::{RuleKeyText, library_key};
use crate::live::{Core, Live};
use crate::local::downcast;
use limiter_rules::{Algorithm, RuleSpec};

/// Why a rule's limiter did not grant.
#[derive(Debug)]
#[non_exhaustive]
pub enum RuleError {
    /// The core limiter's answer: `RateLimited { wait }` (see
    /// [`RuleError::retry_after`]) or a request that can never conform.
    Limited(AcquireError),
    /// A keyed rule could not hold another key (never under the eviction
    /// keyed rules use; kept for a table that refuses new keys).
    KeysFull {
        /// The cap.
        max_keys: usize,
    },
    /// The Redis limiter's answer (a denial, or Redis unavailable under
    /// `failure_policy: error`).
    #[cfg(feature = "redis")]
    Redis(RedisLimitError),
    /// The rule's calendar `quota` could not decide (its wall clock
    /// outside 1970 to 2106, or Redis unavailable): why.
    QuotaUnavailable {
        /// The store's message.
        reason: String,
    },
    /// A keyed rule was asked without a key: use the `_key` methods.
    NeedsKey {
        /// The rule.
        rule: String,
    },
    /// A `concurrency` or `adaptive_concurrency` rule was asked for a
    /// permit that nothing gives back: take one from
    /// [`RuleLimiter::concurrency`] (a permit released when dropped).
    Concurrency {
        /// The rule.
        rule: String,
    },
}

impl RuleError {
    /// How long to wait before the same request could succeed, if waiting
    /// helps.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RuleError::Limited(e) => e.retry_after(),
            #[cfg(feature = "redis")]
            RuleError::Redis(e) => e.retry_after(),
            _ => None,
        }
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleError::Limited(e) => e.fmt(f),
            RuleError::KeysFull { max_keys } => write!(
                f,
                "the rule holds its maximum of {max_keys} keys; raise `max_keys`"
            ),
            #[cfg(feature = "redis")]
            RuleError::Redis(e) => e.fmt(f),
            RuleError::QuotaUnavailable { reason } => {
                write!(f, "the calendar quota could not decide: {reason}")
            }
            RuleError::NeedsKey { rule } => write!(
                f,
                "rule `{rule}` is keyed; call try_acquire_key / take_key with the client's key"
            ),
            RuleError::Concurrency { rule } => write!(
                f,
                "rule `{rule}` limits concurrency; take a permit from RuleLimiter::concurrency() and drop it when the work is done"
            ),
        }
    }
}

impl std::error::Error for RuleError {}

impl From<KeyedError> for RuleError {
    fn from(e: KeyedError) -> RuleError {
        match e {
            KeyedError::Limited(e) => RuleError::Limited(e),
            KeyedError::TooManyKeys { max_keys } => RuleError::KeysFull { max_keys },
            // `KeyedError` is non-exhaustive; any other refusal is the
            // limiter's own and says why.
            _ => RuleError::KeysFull { max_keys: 0 },
        }
    }
}

impl From<AcquireError> for RuleError {
    fn from(e: AcquireError) -> RuleError {
        RuleError::Limited(e)
    }
}

/// The limiter one rule became: take permits from it, by key for keyed
/// rules.
///
/// For a global rule the `_key` methods ignore the key; for a keyed rule
/// the methods without a key fail with [`RuleError::NeedsKey`].
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

    /// Takes one permit now (a priority rule: for its lowest class).
    ///
    /// # Errors
    ///
    /// [`RuleError::Limited`] with the wait, [`RuleError::Redis`], or
    /// [`RuleError::NeedsKey`] for a keyed rule.
    pub async fn try_acquire(&self) -> Result<(), RuleError> {
        self.try_acquire_n(1).await
    }

    /// Takes `n` permits now, all or nothing.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](RuleLimiter::try_acquire).
    pub async fn try_acquire_n(&self, n: u32) -> Result<(), RuleError> {
        match &self.live.core {
            core if core.is_keyed() => Err(self.needs_key()),
            _ => self.try_acquire_key_n("global", n).await,
        }
    }

    /// Takes `n` permits for `key` now, all or nothing. `key` is one part
    /// of the key encoding, as [`RuleLimiter::key`] writes it, for a local
    /// and a Redis rule alike: the same client's HTTP requests under
    /// `key: ip` count against the same key (the same Redis key).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](RuleLimiter::try_acquire).
    pub async fn try_acquire_key_n(&self, key: &str, n: u32) -> Result<(), RuleError> {
        if let Some(calendar) = &self.calendar {
            return self.try_acquire_with_quota(calendar, key, n).await;
        }
        match &self.live.core {
            Core::Keyed(k) => Ok(k.try_acquire_n(&library_key(key), n)?),
            #[cfg(feature = "redis")]
            Core::Redis { limiter, .. } => limiter
                .try_acquire_n(&library_key(key).text(), n)
                .await
                .map(|_| ())
                .map_err(RuleError::Redis),
            _ => match self.live.local() {
                Some(l) => Ok(l.acquire_now(&(), n)?),
                None => Err(self.needs_key()),
            },
        }
    }

    /// [`try_acquire_key_n`](RuleLimiter::try_acquire_key_n) of a rule
    /// with a calendar `quota`: all or nothing, as over HTTP (the rate's
    /// reservation given back on a calendar refusal; a Redis rule reads
    /// the period's count first). A spent period, or a keyed rule's count
    /// table full of keys counted in this period, is
    /// [`RuleError::Limited`] with the wait until the reset.
    async fn try_acquire_with_quota(
        &self,
        calendar: &crate::calendar::RuleCalendar,
        key: &str,
        n: u32,
    ) -> Result<(), RuleError> {
        let key = library_key(key);
        let refused = quota_refusal;
        match &self.live.core {
            Core::Keyed(k) => {
                let reservation = k.reserve_n(&key, n, Duration::ZERO)?;
                match calendar.decide(&key, n) {
                    Some(Err(denial)) => {
                        k.cancel(&key, reservation);
                        Err(refused(denial))
                    }
                    _ => Ok(()),
                }
            }
            #[cfg(feature = "redis")]
            Core::Redis { limiter, keyed } => {
                if let Some(Ok(q)) = calendar.decide_remote(&key, 0).await
                    && q.headroom.remaining < n
                {
                    return Err(RuleError::Limited(AcquireError::RateLimited {
                        wait: q.headroom.refill_in,
                    }));
                }
                let text = if *keyed {
                    key.text()
                } else {
                    std::borrow::Cow::Borrowed("global")
                };
                limiter
                    .try_acquire_n(&text, n)
                    .await
                    .map_err(RuleError::Redis)?;
                match calendar.decide_remote(&key, n).await {
                    Some(Err(denial)) => Err(refused(denial)),
                    _ => Ok(()),
                }
            }
            _ => {
                let Some(local) = self.live.local() else {
                    return Err(self.needs_key());
                };
                let grant = local
                    .decide(&(), n, Duration::ZERO)
                    .map_err(AcquireError::from)?;
                match calendar.decide(&key, n) {
                    Some(Err(denial)) => {
                        local.cancel(&(), grant.ticket);
                        Err(refused(denial))
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// Waits for one permit, as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](RuleLimiter::try_acquire), for errors that
    /// waiting does not cure.
    ///
    /// # Cancel safety
    ///
    /// As `limiter-async`'s `take` for local rules (a dropped wait gives its
    /// permit back); as `limiter-redis`'s for Redis rules (nothing is
    /// refunded).
    pub async fn take(&self) -> Result<(), RuleError> {
        self.take_n_timeout(1, Duration::MAX).await
    }

    /// Waits for `n` permits if they come within `timeout`; fails at once,
    /// consuming nothing, otherwise.
    ///
    /// # Errors
    ///
    /// [`RuleError::Limited`] with the wait when the slot is later than
    /// `timeout`; otherwise as [`take`](RuleLimiter::take).
    pub async fn take_n_timeout(&self, n: u32, timeout: Duration) -> Result<(), RuleError> {
        match &self.live.core {
            core if core.is_keyed() => Err(self.needs_key()),
            _ => self.take_key_n_timeout("global", n, timeout).await,
        }
    }

    /// Waits for one permit for `key`, as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`take`](RuleLimiter::take), and [`RuleError::KeysFull`].
    pub async fn take_key(&self, key: &str) -> Result<(), RuleError> {
        self.take_key_n_timeout(key, 1, Duration::MAX).await
    }

    /// Waits for `n` permits for `key` if they come within `timeout`.
    ///
    /// # Errors
    ///
    /// As [`take_n_timeout`](RuleLimiter::take_n_timeout), and
    /// [`RuleError::KeysFull`].
    pub async fn take_key_n_timeout(
        &self,
        key: &str,
        n: u32,
        timeout: Duration,
    ) -> Result<(), RuleError> {
        // A calendar period is never waited for (a month is no slot): a
        // period that cannot hold `n` now fails at once, with the wait
        // until the reset, before the rate is asked.
        if let Some(calendar) = &self.calendar {
            let encoded = library_key(key);
            let left = match calendar.read(&encoded) {
                Some(q) => Some((q.remaining, q.reset_in)),
                #[cfg(feature = "redis")]
                None => match calendar.decide_remote(&encoded, 0).await {
                    Some(Ok(q)) => Some((q.headroom.remaining, q.headroom.refill_in)),
                    _ => None,
                },
                #[cfg(not(feature = "redis"))]
                None => None,
            };
            if let Some((remaining, reset_in)) = left
                && remaining < n
            {
                return Err(RuleError::Limited(AcquireError::RateLimited {
                    wait: reset_in,
                }));
            }
        }
        self.take_rate(key, n, timeout).await?;
        let Some(calendar) = &self.calendar else {
            return Ok(());
        };
        // Charged once the rate's slot has come; only a request racing
        // others for the period's last permits is refused here, its rate
        // permit spent.
        let encoded = library_key(key);
        let decision = match calendar.decide(&encoded, n) {
            Some(d) => d.map(|_| ()),
            #[cfg(feature = "redis")]
            None => match calendar.decide_remote(&encoded, n).await {
                Some(d) => d.map(|_| ()),
                None => Ok(()),
            },
            #[cfg(not(feature = "redis"))]
            None => Ok(()),
        };
        decision.map_err(quota_refusal)
    }

    /// The rate's part of [`take_key_n_timeout`](RuleLimiter::take_key_n_timeout).
    async fn take_rate(&self, key: &str, n: u32, timeout: Duration) -> Result<(), RuleError> {
        match &self.live.core {
            Core::Keyed(k) => {
                let key = library_key(key);
                let reservation = k.reserve_n(&key, n, timeout)?;
                let wait = reservation.wait();
                // The catch-up window of the key's quota, for the wake-up.
                let window = Duration::from_nanos(k.quota_of(&key).burst_span_nanos());
                let refund = CancelGrant {
                    decider: &**k,
                    key: &key,
                    ticket: reservation,
                };
                let _kept = SlotWait::after(wait, WakeUp::Precise, window, refund).await;
                Ok(())
            }
            #[cfg(feature = "redis")]
            Core::Redis { limiter, .. } => limiter
                .take_n_timeout(&library_key(key).text(), n, timeout)
                .await
                .map(|_| ())
                .map_err(RuleError::Redis),
            _ => {
                let Some(local) = self.live.local() else {
                    return Err(self.needs_key());
                };
                let waiter = self
                    .live
                    .waiter
                    .get_or_init(|| AsyncLimiter::from_limiter(local));
                Ok(waiter.take_n_timeout(n, timeout).await?)
            }
        }
    }

    fn needs_key(&self) -> RuleError {
        let rule = self.spec.name.clone();
        match self.live.core {
            Core::Concurrency(_) => RuleError::Concurrency { rule },
            _ => RuleError::NeedsKey { rule },
        }
    }
}

/// A calendar quota's refusal as the rule's error: the wait until the
/// reset, a request above the limit, or why the count could not decide.
fn quota_refusal(denial: limiter_core::Denial) -> RuleError {
    match denial {
        limiter_core::Denial::RateLimited { retry_after, .. } => {
            RuleError::Limited(AcquireError::RateLimited { wait: retry_after })
        }
        limiter_core::Denial::OverBurst { cost, burst, .. } => {
            RuleError::Limited(AcquireError::InsufficientCapacity {
                requested: cost,
                burst,
            })
        }
        other => RuleError::QuotaUnavailable {
            reason: other.to_string(),
        },
    }
}
