//! Waiting for a key's permits on tokio (feature `tokio`), with the FIFO and
//! timeout semantics of `limiter-async`'s `AsyncLimiter`.
//!
//! Every wait is two steps: **reserve** the earliest slot for the key with
//! one CAS on its cell (slots of one key are handed out in CAS order, so
//! waiters on a key are served first come, first served), then **sleep
//! until** the slot's absolute instant on the [`TokioClock`]
//! (`instant_at(ready_at)`) with limiter-async's one wait, `SlotWait`: the
//! precise wake-up for short waits in real time, never a relative sleep or
//! a retry loop. A timeout or a deadline is decided before sleeping: a slot beyond
//! it fails at once and consumes nothing; a deadline already passed allows
//! no wait at all.
//!
//! Invariant (cancel safety): between the reservation and the end of the
//! sleep, the reservation is owned by the `SlotWait`; dropping it hands the
//! permits back through [`KeyedLimiter::cancel`]: the key's state is
//! restored when no later reservation of that key depends on them, and
//! otherwise the slot goes to the key's next waiter that would wait longer.
//! Only a slot already passed, or a key whose state was evicted meanwhile,
//! leaves them spent: stricter, never looser.

use core::hash::Hash;
use core::time::Duration;

use limiter_async::{CancelGrant, SlotWait, TokioClock, WakeUp};
use tokio::time::Instant;

use crate::error::KeyedError;
use crate::limiter::KeyedLimiter;

impl<K: Hash + Eq + Clone + Send + Sync> KeyedLimiter<K, TokioClock> {
    /// Waits for one permit for `key`, served in FIFO order with the key's
    /// other waiters. Completes on its first poll, without a timer, when a
    /// permit is available now.
    ///
    /// # Errors
    ///
    /// [`KeyedError::TooManyKeys`] for a new key when full, at once;
    /// [`KeyedError::Limited`] only with `TimeOutOfRange` (36.5 years after
    /// the limiter was made).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future before it completes gives the permit
    /// back to the key (the slot goes to the key's next waiter when a later
    /// reservation depends on it).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(TokioClock::new())
    ///     .build()?;
    /// let start = Instant::now();
    /// limiter.take(&"alice").await?; // at once
    /// limiter.take(&"bob").await?; // another key: at once
    /// limiter.take(&"alice").await?; // 100 ms later
    /// assert_eq!(start.elapsed(), Duration::from_millis(100));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take(&self, key: &K) -> Result<(), KeyedError> {
        self.take_n_within(key, 1, Duration::MAX).await
    }

    /// Waits for `n` permits for `key`, all together. `n == 0` completes at
    /// once.
    ///
    /// # Errors
    ///
    /// As [`take`](KeyedLimiter::take), plus
    /// `Limited(InsufficientCapacity)` at once if `n` exceeds the key's
    /// burst.
    ///
    /// # Cancel safety
    ///
    /// As [`take`](KeyedLimiter::take): all `n` permits are given back
    /// together.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    /// use limiter_core::{AcquireError, Quota};
    /// use limiter_keyed::{KeyedError, KeyedLimiter};
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(5)?)
    ///     .clock(TokioClock::new())
    ///     .build()?;
    /// let start = Instant::now();
    /// limiter.take_n(&"alice", 5).await?;
    /// limiter.take_n(&"alice", 3).await?; // 300 ms of permits later
    /// assert_eq!(start.elapsed(), Duration::from_millis(300));
    /// assert!(matches!(
    ///     limiter.take_n(&"alice", 6).await,
    ///     Err(KeyedError::Limited(AcquireError::InsufficientCapacity { .. }))
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n(&self, key: &K, n: u32) -> Result<(), KeyedError> {
        self.take_n_within(key, n, Duration::MAX).await
    }

    /// Waits for one permit for `key` if its slot comes within `timeout` of
    /// the first poll; otherwise fails at once, without sleeping and
    /// consuming nothing. If the slot fits, it always succeeds.
    /// `Duration::MAX` means no limit.
    ///
    /// # Errors
    ///
    /// `Limited(RateLimited { wait })` with the wait the slot would need
    /// when it exceeds `timeout` (also its
    /// [`retry_after`](KeyedError::retry_after)); otherwise as
    /// [`take`](KeyedLimiter::take).
    ///
    /// # Cancel safety
    ///
    /// As [`take`](KeyedLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(TokioClock::new())
    ///     .build()?;
    /// limiter.take(&"alice").await?;
    /// let refused = limiter.take_timeout(&"alice", Duration::from_millis(50)).await.unwrap_err();
    /// assert_eq!(refused.retry_after(), Some(Duration::from_millis(100)));
    /// limiter.take_timeout(&"alice", Duration::from_millis(100)).await?; // fits
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_timeout(&self, key: &K, timeout: Duration) -> Result<(), KeyedError> {
        self.take_n_within(key, 1, timeout).await
    }

    /// Waits for `n` permits for `key` if their slot comes within `timeout`
    /// of the first poll; otherwise fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](KeyedLimiter::take_timeout), plus
    /// `Limited(InsufficientCapacity)` if `n` exceeds the key's burst.
    ///
    /// # Cancel safety
    ///
    /// As [`take`](KeyedLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(4)?)
    ///     .clock(TokioClock::new())
    ///     .build()?;
    /// limiter.take_n_timeout(&"alice", 4, Duration::ZERO).await?;
    /// let ms = Duration::from_millis;
    /// assert!(limiter.take_n_timeout(&"alice", 2, ms(150)).await.is_err()); // needs 200 ms
    /// limiter.take_n_timeout(&"alice", 2, ms(200)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n_timeout(
        &self,
        key: &K,
        n: u32,
        timeout: Duration,
    ) -> Result<(), KeyedError> {
        self.take_n_within(key, n, timeout).await
    }

    /// Waits for one permit for `key` if its slot comes no later than
    /// `deadline`; otherwise fails at once, without sleeping and consuming
    /// nothing. If the slot fits, it always succeeds. A deadline already
    /// passed acts as a zero timeout: only a permit available now is taken.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](KeyedLimiter::take_timeout).
    ///
    /// # Cancel safety
    ///
    /// As [`take`](KeyedLimiter::take).
    ///
    /// # Examples
    ///
    /// A request with a deadline: the permit and the work share it, and a
    /// permit that would come too late fails before any waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(TokioClock::new())
    ///     .build()?;
    /// let deadline = Instant::now() + Duration::from_millis(150);
    /// limiter.take_until(&"alice", deadline).await?; // at once
    /// limiter.take_until(&"alice", deadline).await?; // at 100 ms
    /// assert!(limiter.take_until(&"alice", deadline).await.is_err()); // 200 ms is too late
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_until(&self, key: &K, deadline: Instant) -> Result<(), KeyedError> {
        self.take_n_until(key, 1, deadline).await
    }

    /// Waits for `n` permits for `key` if their slot comes no later than
    /// `deadline`; otherwise fails at once, consuming nothing. A deadline
    /// already passed acts as a zero timeout.
    ///
    /// # Errors
    ///
    /// As [`take_n_timeout`](KeyedLimiter::take_n_timeout).
    ///
    /// # Cancel safety
    ///
    /// As [`take`](KeyedLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(2)?)
    ///     .clock(TokioClock::new())
    ///     .build()?;
    /// limiter.take_n(&"alice", 2).await?;
    /// let soon = Instant::now() + Duration::from_millis(100);
    /// assert!(limiter.take_n_until(&"alice", 2, soon).await.is_err()); // needs 200 ms
    /// limiter.take_n_until(&"alice", 1, soon).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n_until(&self, key: &K, n: u32, deadline: Instant) -> Result<(), KeyedError> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        self.take_n_within(key, n, timeout).await
    }

    async fn take_n_within(&self, key: &K, n: u32, max_wait: Duration) -> Result<(), KeyedError> {
        let reservation = self.reserve_n(key, n, max_wait)?;
        let wait = reservation.wait();
        // A slot that is now needs no timer (SlotWait arms none).
        let deadline = self.clock.instant_at(reservation.ready_at());
        // The catch-up window of the key's quota: what lateness the wake-up
        // may have without costing rate (see limiter-async's WakeUp).
        let window = Duration::from_nanos(self.quota_of(key).burst_span_nanos());
        let refund = CancelGrant {
            decider: self,
            key,
            ticket: reservation,
        };
        let _kept = SlotWait::until(deadline, wait, WakeUp::Precise, window, refund).await;
        Ok(())
    }
}
