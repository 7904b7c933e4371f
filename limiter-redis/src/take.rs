//! Waiting for permits: reserve a slot in the script, then sleep until it.
//!
//! The slot is claimed first, so waiters on every machine are served in the
//! order Redis saw their reservations, and a slot beyond the deadline is
//! refused at once, consuming nothing. The sleep starts when the reply
//! arrives: the slot lies `wait` after Redis' `now`, which is before the
//! reply, so the caller never uses a permit early; it may use it up to one
//! round trip late.

use core::time::Duration;

use tokio::time::Instant;

use crate::decision::Decision;
use crate::error::RedisLimitError;
use crate::limiter::RedisLimiter;

impl RedisLimiter {
    /// Waits for one permit on `key`, however long its slot is away.
    ///
    /// Returns the decision after sleeping its `wait`. A denial is still
    /// possible, returned at once: while Redis is unavailable under
    /// [`FailurePolicy::Closed`](crate::FailurePolicy::Closed).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](RedisLimiter::try_acquire_n).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future during the sleep leaves the slot consumed.
    pub async fn take(&self, key: &str) -> Result<Decision, RedisLimitError> {
        self.take_until(key, None).await
    }

    /// Waits for one permit on `key` if its slot comes within `timeout`;
    /// otherwise returns a denial at once, consuming nothing.
    ///
    /// The reservation allows the time left before the deadline when it is
    /// sent; the whole call returns within `timeout` plus at most one round
    /// trip (the reply's own latency), never with a permit used early.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](RedisLimiter::try_acquire_n).
    pub async fn take_with_timeout(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<Decision, RedisLimitError> {
        self.take_until(key, Some(Instant::now() + timeout)).await
    }

    async fn take_until(
        &self,
        key: &str,
        deadline: Option<Instant>,
    ) -> Result<Decision, RedisLimitError> {
        let max_wait = match deadline {
            Some(deadline) => deadline.saturating_duration_since(Instant::now()),
            None => Duration::MAX,
        };
        let decision = self.reserve_n(key, 1, max_wait).await?;
        if decision.allowed && !decision.wait.is_zero() {
            tokio::time::sleep(decision.wait).await;
        }
        Ok(decision)
    }
}
