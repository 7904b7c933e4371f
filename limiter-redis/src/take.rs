//! Waiting for permits: reserve a slot in the script, then sleep until it.
//!
//! Every `take*` is [`RedisLimiter::reserve_n`] with a wait allowance
//! (unbounded, a timeout, or the time left before a deadline), then
//! limiter-async's one wait (`SlotWait::after`) for the granted `wait`. The slot is claimed first, so
//! waiters on every machine are served in the order Redis saw their
//! reservations, and a slot beyond the allowance is refused at once,
//! consuming nothing. The sleep starts when the reply arrives: the slot lies
//! `wait` after Redis' `now`, which is before the reply, so the caller never
//! uses a permit early; it may use it up to one round trip late.
//!
//! Invariant (cancel safety): once the reservation has reached Redis, its
//! slot is consumed there, and nothing gives it back. Dropping a `take*`
//! future during the call may or may not leave it consumed (the request may
//! already be on its way); dropping it during the sleep always does. The
//! key's later requests, from every process, wait as if the permits had been
//! used: stricter, never looser. `docs/distributed.md` says what a refund
//! would need and why there is none.

use core::time::Duration;

use limiter_async::{SlotWait, WakeUp};
use tokio::time::Instant;

use crate::admission::Admission;
use crate::error::RedisLimitError;
use crate::limiter::RedisLimiter;

impl RedisLimiter {
    /// Waits for one permit on `key`, however long its slot is away, and
    /// returns the grant after sleeping its [`wait`](Admission::wait).
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::RateLimited`] at once only when Redis is
    /// unavailable and the failure policy denies: under
    /// [`WhenDown::Closed`](crate::WhenDown::Closed), or under
    /// [`WhenDown::Local`](crate::WhenDown::Local) for a request
    /// larger than the fallback's smaller burst. Otherwise as
    /// [`try_acquire_n`](RedisLimiter::try_acquire_n).
    ///
    /// # Cancel safety
    ///
    /// Not refunded: the slot is claimed on Redis before the sleep, and
    /// dropping the future does not give it back. Dropped during the sleep,
    /// the slot stays consumed on Redis (the key's next requests, on every
    /// machine, wait behind it); dropped during the call, it may or may not
    /// have been consumed. Count a dropped take as spent.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(10)?)?;
    /// limiter.take("crawler").await?; // at once
    /// let second = limiter.take("crawler").await?; // after about 100 ms
    /// println!("slept {:?}", second.wait);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take(&self, key: &str) -> Result<Admission, RedisLimitError> {
        self.take_within(key, 1, Duration::MAX).await
    }

    /// Waits for `n` permits on `key`, however long their slot is away.
    /// `n == 0` is granted at once.
    ///
    /// # Errors
    ///
    /// As [`take`](RedisLimiter::take), plus
    /// [`RedisLimitError::InsufficientCapacity`] at once if `n > burst`.
    ///
    /// # Cancel safety
    ///
    /// As [`take`](RedisLimiter::take): all `n` permits stay consumed on
    /// Redis once the reservation reached it; nothing is refunded.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(100)?.with_burst(50)?)?;
    /// let batch = limiter.take_n("export", 50).await?; // a whole batch's permits
    /// println!("{} left", batch.remaining);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n(&self, key: &str, n: u32) -> Result<Admission, RedisLimitError> {
        self.take_within(key, n, Duration::MAX).await
    }

    /// Waits for one permit on `key` if its slot comes within `timeout` of
    /// the call; otherwise fails at once, without sleeping and consuming
    /// nothing. `Duration::MAX` means no limit.
    ///
    /// The call returns within `timeout` plus at most one round trip (the
    /// reply's own latency), never with a permit used early.
    ///
    /// # Errors
    ///
    /// [`RedisLimitError::RateLimited`] when the slot is more than `timeout`
    /// away (its `retry_after` is the wait the slot would need); otherwise as
    /// [`take`](RedisLimiter::take).
    ///
    /// # Cancel safety
    ///
    /// As [`take`](RedisLimiter::take): a granted slot stays consumed on
    /// Redis if the future is dropped; nothing is refunded. A refused slot
    /// consumed nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::{RedisLimitError, RedisLimiter};
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(1)?)?;
    /// limiter.take("k").await?;
    /// // The next slot is about 1 s away: refused at once, nothing consumed.
    /// let refused = limiter.take_timeout("k", Duration::from_millis(100)).await.unwrap_err();
    /// assert!(matches!(refused, RedisLimitError::RateLimited { .. }));
    /// limiter.take_timeout("k", Duration::from_secs(2)).await?; // fits: sleeps
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_timeout(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<Admission, RedisLimitError> {
        self.take_within(key, 1, timeout).await
    }

    /// Waits for `n` permits on `key` if their slot comes within `timeout`
    /// of the call; otherwise fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](RedisLimiter::take_timeout), plus
    /// [`RedisLimitError::InsufficientCapacity`] at once if `n > burst`.
    ///
    /// # Cancel safety
    ///
    /// As [`take`](RedisLimiter::take): all `n` permits stay consumed on
    /// Redis once granted; nothing is refunded.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(10)?.with_burst(4)?)?;
    /// limiter.take_n_timeout("k", 4, Duration::ZERO).await?;
    /// // 2 more permits need about 200 ms.
    /// assert!(limiter.take_n_timeout("k", 2, Duration::from_millis(100)).await.is_err());
    /// limiter.take_n_timeout("k", 2, Duration::from_millis(500)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n_timeout(
        &self,
        key: &str,
        n: u32,
        timeout: Duration,
    ) -> Result<Admission, RedisLimitError> {
        self.take_within(key, n, timeout).await
    }

    /// Waits for one permit on `key` if its slot comes no later than
    /// `deadline` (on tokio's clock); otherwise fails at once, consuming
    /// nothing. A deadline already passed acts as a zero timeout: only a
    /// permit available now is taken.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](RedisLimiter::take_timeout).
    ///
    /// # Cancel safety
    ///
    /// As [`take`](RedisLimiter::take): a granted slot stays consumed on
    /// Redis if the future is dropped; nothing is refunded.
    ///
    /// # Examples
    ///
    /// A call to a downstream with a deadline: the permit and the call share
    /// it, and a permit that would come too late fails before any waiting.
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    /// use tokio::time::{Instant, timeout_at};
    ///
    /// # async fn call_downstream() -> u32 { 7 }
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(10)?)?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// limiter.take_until("downstream", deadline).await?;
    /// let answer = timeout_at(deadline, call_downstream()).await?;
    /// assert_eq!(answer, 7);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_until(
        &self,
        key: &str,
        deadline: Instant,
    ) -> Result<Admission, RedisLimitError> {
        self.take_n_until(key, 1, deadline).await
    }

    /// Waits for `n` permits on `key` if their slot comes no later than
    /// `deadline`; otherwise fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`take_n_timeout`](RedisLimiter::take_n_timeout).
    ///
    /// # Cancel safety
    ///
    /// As [`take`](RedisLimiter::take): all `n` permits stay consumed on
    /// Redis once granted; nothing is refunded.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    /// use tokio::time::Instant;
    ///
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::new(conn, Quota::per_second(10)?.with_burst(2)?)?;
    /// limiter.take_n("k", 2).await?;
    /// let soon = Instant::now() + Duration::from_millis(100);
    /// assert!(limiter.take_n_until("k", 2, soon).await.is_err()); // needs about 200 ms
    /// limiter.take_n_until("k", 1, soon).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n_until(
        &self,
        key: &str,
        n: u32,
        deadline: Instant,
    ) -> Result<Admission, RedisLimitError> {
        let allowance = deadline.saturating_duration_since(Instant::now());
        self.take_within(key, n, allowance).await
    }

    /// Reserves `n` permits with `max_wait` allowed, then sleeps the wait.
    async fn take_within(
        &self,
        key: &str,
        n: u32,
        max_wait: Duration,
    ) -> Result<Admission, RedisLimitError> {
        let admission = self.reserve_n(key, n, max_wait).await?;
        // The one wait: the slot relative to the reply (a zero wait arms no
        // timer), woken precisely when the key's catch-up window is short;
        // nothing to give back if dropped.
        let window = Duration::from_nanos(self.quota().burst_span_nanos());
        SlotWait::after(admission.wait, WakeUp::Precise, window, ()).await;
        Ok(admission)
    }
}
