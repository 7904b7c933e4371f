//! `RuleCalendar`: a rule's calendar `quota` beside its rate, on the rule
//! set's wall clock, and the composite decision of the two.
//!
//! # Where the count lives
//!
//! * A local rule without a key: one `CalendarLimiter`.
//! * A local keyed rule: a `KeyedCalendar` of at most the rule's
//!   `max_keys` keys, which refuses a new key when full of keys counted in
//!   this period (429 with the time until the reset), never forgetting a
//!   counted key.
//! * A Redis rule (feature `redis`): a `RedisCalendar`, one Redis key per
//!   rule key and period, `{key_prefix}:quota:{key}:{period start}`,
//!   expiring an hour after its period: shared by instances and kept
//!   across restarts.
//!
//! # The composite decision: all or nothing
//!
//! The rate decides first; the calendar is asked only for a request the
//! rate admitted, and a calendar refusal gives the rate's reservation back
//! (`cancel`), so a refusal by either charges nothing on the other (the
//! calendar's grants cannot be given back, so it goes last). A Redis rate
//! refunds nothing: a Redis rule first reads the period's count and
//! refuses a spent period before the rate is asked, so only a request
//! racing another instance for the period's last permits can charge the
//! rate and then be refused by the calendar.
//!
//! # Which limit the headers describe
//!
//! The one that binds: the calendar once its period has no more permits
//! left than the rate's burst, the rate before that. A refusal's
//! `Retry-After` is the refusing part's wait: the calendar's is the time
//! until the period resets.

use std::sync::Arc;
use std::time::Duration;

use limiter_calendar::{CalendarGrant, CalendarLimiter, CalendarQuota, KeyedCalendar};
use limiter_core::{Clock, Denial, Headroom, Policy};
use limiter_rules::RuleSpec;

use crate::key::RuleKeyText;

/// The wall clock calendar quotas are decided on (Unix nanoseconds): the
/// system's (`limiter_calendar::UnixClock`) unless a test gives its own.
pub(crate) type WallClock = Arc<dyn Clock>;

/// A rule's calendar count (see the module docs).
pub(crate) enum RuleCalendar {
    Global(CalendarLimiter<WallClock>),
    Keyed(KeyedCalendar<RuleKeyText, WallClock>),
    #[cfg(feature = "redis")]
    Redis {
        calendar: limiter_calendar::RedisCalendar<WallClock>,
        conn: crate::store::Conn,
        prefix: String,
        keyed: bool,
    },
}

impl std::fmt::Debug for RuleCalendar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RuleCalendar").field(self.quota()).finish()
    }
}

/// What a calendar part said about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QuotaState {
    /// Permits left in the period.
    pub(crate) remaining: u32,
    /// The time until the period resets.
    pub(crate) reset_in: Duration,
}

impl RuleCalendar {
    /// The calendar of `spec`'s `quota` on `wall` (Redis rules on `conn`).
    pub(crate) fn build(
        spec: &RuleSpec,
        quota: &CalendarQuota,
        wall: &WallClock,
        #[allow(unused_variables)] conn: Option<crate::store::Conn>,
    ) -> RuleCalendar {
        let wall = Arc::clone(wall);
        #[cfg(feature = "redis")]
        if let (limiter_rules::BackendSpec::Redis(r), Some(conn)) = (&spec.backend, conn) {
            return RuleCalendar::Redis {
                calendar: limiter_calendar::RedisCalendar::with_clock(quota.clone(), wall),
                conn,
                prefix: format!("{}:quota", r.key_prefix),
                keyed: !spec.key.is_global(),
            };
        }
        if spec.key.is_global() {
            RuleCalendar::Global(CalendarLimiter::with_clock(quota.clone(), wall))
        } else {
            RuleCalendar::Keyed(KeyedCalendar::with_clock(
                quota.clone(),
                spec.max_keys,
                wall,
            ))
        }
    }

    /// Whether this count can serve `quota` of a rule on `spec`'s backend
    /// and key kind (the same period, reset day, zone and store): then a
    /// reload keeps it and moves its limit.
    pub(crate) fn keeps(&self, old: &RuleSpec, new: &RuleSpec) -> bool {
        let (Some(a), Some(b)) = (&old.quota, &new.quota) else {
            return false;
        };
        let same_count = a.period() == b.period()
            && a.reset_day() == b.reset_day()
            && a.zone_name() == b.zone_name();
        let same_store = old.backend == new.backend
            && old.key.is_global() == new.key.is_global()
            && old.max_keys == new.max_keys;
        same_count && same_store && self.set_limit(b.limit())
    }

    /// Moves the limit live (keeping the period's count); `false` where the
    /// count cannot (a Redis count is rebuilt: its state is on Redis).
    fn set_limit(&self, limit: u32) -> bool {
        match self {
            RuleCalendar::Global(c) => c.set_limit(limit).is_ok(),
            RuleCalendar::Keyed(c) => c.set_limit(limit).is_ok(),
            #[cfg(feature = "redis")]
            RuleCalendar::Redis { calendar, .. } => calendar.quota().limit() == limit,
        }
    }

    pub(crate) fn quota(&self) -> &CalendarQuota {
        match self {
            RuleCalendar::Global(c) => c.quota(),
            RuleCalendar::Keyed(c) => c.quota(),
            #[cfg(feature = "redis")]
            RuleCalendar::Redis { calendar, .. } => calendar.quota(),
        }
    }

    fn limit(&self) -> u32 {
        match self {
            RuleCalendar::Global(c) => c.limit(),
            RuleCalendar::Keyed(c) => c.limit(),
            #[cfg(feature = "redis")]
            RuleCalendar::Redis { calendar, .. } => calendar.quota().limit(),
        }
    }

    /// The policy the headers state for the calendar: `limit` permits per
    /// current period (`w` = the period's length in seconds: 23 or 25 hours
    /// on a DST day, 28 to 31 days for a month).
    pub(crate) fn policy(&self) -> Policy {
        let limit = self.limit();
        let window = match self {
            RuleCalendar::Global(c) => c.window(),
            RuleCalendar::Keyed(c) => c.window(),
            #[cfg(feature = "redis")]
            RuleCalendar::Redis { calendar, .. } => calendar.window(),
        };
        let period = window.map_or(Duration::ZERO, |w| {
            Duration::from_secs(u64::from(w.end - w.start))
        });
        Policy {
            burst: limit,
            interval: period / limit.max(1),
        }
    }

    /// The permits `key` has left and the time until the reset, read
    /// without deciding; `None` for a Redis count (remote).
    pub(crate) fn read(&self, key: &RuleKeyText) -> Option<QuotaState> {
        let (remaining, window, now) = match self {
            RuleCalendar::Global(c) => (c.available(), c.window().ok()?, c.clock().now()),
            RuleCalendar::Keyed(c) => (c.available(key), c.window().ok()?, c.clock().now()),
            #[cfg(feature = "redis")]
            RuleCalendar::Redis { .. } => return None,
        };
        Some(QuotaState {
            remaining,
            reset_in: Duration::from_nanos(
                (u64::from(window.end) * 1_000_000_000).saturating_sub(now),
            ),
        })
    }

    /// Decides `cost` permits of `key`'s period now; `None` for a Redis
    /// count (see [`decide_remote`](RuleCalendar::decide_remote)).
    pub(crate) fn decide(
        &self,
        key: &RuleKeyText,
        cost: u32,
    ) -> Option<Result<CalendarGrant, Denial>> {
        Some(match self {
            RuleCalendar::Global(c) => c
                .acquire_n(cost)
                .map_err(|e| Denial::refused(e, self.policy())),
            RuleCalendar::Keyed(c) => c.acquire_n(key, cost).map_err(|e| match e {
                limiter_calendar::KeyedCalendarError::Acquire(e) => {
                    Denial::refused(e, self.policy())
                }
                full => Denial::RateLimited {
                    retry_after: full.retry_after().unwrap_or(Duration::ZERO),
                    policy: self.policy(),
                },
            }),
            #[cfg(feature = "redis")]
            RuleCalendar::Redis { .. } => return None,
        })
    }

    /// A Redis count's decision (`None` for a local one): `peek` only reads
    /// the period's count (cost 0) to refuse a spent period before the rate
    /// is asked.
    #[cfg(feature = "redis")]
    pub(crate) async fn decide_remote(
        &self,
        key: &RuleKeyText,
        cost: u32,
    ) -> Option<Result<CalendarGrant, Denial>> {
        let RuleCalendar::Redis {
            calendar,
            conn,
            prefix,
            keyed,
        } = self
        else {
            return None;
        };
        let text = if *keyed {
            key.text()
        } else {
            std::borrow::Cow::Borrowed("global")
        };
        let redis_key = format!("{prefix}:{text}");
        let mut conn = conn.clone();
        Some(
            match calendar.acquire_n(&mut conn, &redis_key, cost).await {
                Ok(decision) => decision.map_err(|e| Denial::refused(e, self.policy())),
                Err(e) => Err(Denial::Unavailable(Box::new(e))),
            },
        )
    }

    /// Whether the calendar binds after a grant that left `remaining` in
    /// the period, beside a rate of `rate_burst`: then its headroom and
    /// policy are the ones the headers state.
    pub(crate) fn binds(&self, remaining: u32, rate_burst: u32) -> bool {
        remaining <= rate_burst
    }
}

/// The headroom and policy a grant of both parts reports: the calendar's
/// when it binds, else the rate's.
pub(crate) fn composite_headroom(
    calendar: &RuleCalendar,
    rate: (Headroom, Policy),
    grant: &CalendarGrant,
) -> (Headroom, Policy) {
    if calendar.binds(grant.headroom.remaining, rate.1.burst) {
        (grant.headroom, calendar.policy())
    } else {
        rate
    }
}
