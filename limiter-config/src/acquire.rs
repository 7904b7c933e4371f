//! Taking permits from a [`RuleLimiter`] in a library: at once
//! (`try_acquire*`) or waiting for them (`take*`), by key for a keyed rule,
//! all or nothing with a calendar `quota`.
//!
//! Time is the rule set's clock; waiting goes through `limiter-async` (the
//! clock's readings paired with tokio's), or through `limiter-redis`'s own
//! `take` for Redis rules. A calendar period is never waited for: a period
//! that cannot hold the request fails at once with the wait until its
//! reset.

use crate::RuleClock;
use std::time::Duration;

use limiter_async::{AsyncLimiter, CancelGrant, SlotWait, WakeUp};
use limiter_core::{AcquireError, Decide};

use crate::error::RuleError;
use crate::key::library_key;
use crate::limiter::RuleLimiter;
use crate::live::Core;

impl<C: RuleClock> RuleLimiter<C> {
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
