//! The waiting methods of [`AsyncLimiter`]: a permit free now is taken on
//! the sync path; otherwise the slot is reserved on the first poll and the
//! future sleeps until the slot's instant.

use core::time::Duration;

use limiter_core::{AcquireError, Decide};
use tokio::time::Instant;

use super::AsyncLimiter;
use crate::wait::acquire;

impl<L> AsyncLimiter<L>
where
    L: Decide<Key = ()>,
    L::Ticket: Send,
{
    /// Waits for one permit.
    ///
    /// Completes on its first poll, without creating a timer, when a permit
    /// is available now; otherwise sleeps until its reserved slot.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimeOutOfRange`], on the first poll, if the limiter's
    /// clock has run past its span (36.5 years after the limiter was made).
    /// One permit always fits the burst, so nothing else can fail.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. The slot is reserved on the first poll; dropping the
    /// future before it completes gives the permit back to the limiter:
    /// either the state is restored (no later reservation exists) or the
    /// slot is handed to the next waiter that would otherwise wait longer.
    /// A dropped future never took a permit it can use.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
    /// let start = Instant::now();
    /// limiter.take().await?; // at once
    /// limiter.take().await?; // 100 ms later
    /// assert_eq!(start.elapsed(), Duration::from_millis(100));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take(&self) -> Result<(), AcquireError> {
        // The no-wait path of `take_n_within`, written out: one state
        // machine fewer on the path every free permit takes.
        match self.core.acquire_now(&(), 1) {
            Err(AcquireError::RateLimited { .. }) => {
                acquire(&*self.core, self.wake, 1, Duration::MAX).await
            }
            done => done,
        }
    }

    /// Waits for `n` permits, served in FIFO order with every other waiter.
    /// `n == 0` completes at once.
    ///
    /// # Errors
    ///
    /// On the first poll, without waiting or consuming anything:
    /// [`AcquireError::InsufficientCapacity`] if `n > burst` (never
    /// satisfiable under this quota); [`AcquireError::TimeOutOfRange`] as for
    /// [`take`](AsyncLimiter::take).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`take`](AsyncLimiter::take): all `n` permits are
    /// given back together.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::{AcquireError, Quota};
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?.with_burst(5)?);
    /// let start = Instant::now();
    /// limiter.take_n(5).await?;
    /// limiter.take_n(3).await?; // 300 ms of permits later
    /// assert_eq!(start.elapsed(), Duration::from_millis(300));
    /// assert!(matches!(limiter.take_n(6).await, Err(AcquireError::InsufficientCapacity { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n(&self, n: u32) -> Result<(), AcquireError> {
        self.take_n_within(n, Duration::MAX).await
    }

    /// Waits for one permit if its slot comes within `timeout` of the first
    /// poll; otherwise fails at once, without sleeping and without consuming
    /// anything. If the slot fits, it always succeeds. `Duration::MAX` means
    /// no limit.
    ///
    /// # Errors
    ///
    /// [`AcquireError::RateLimited`] with the wait the slot would need, when
    /// it exceeds `timeout`; [`AcquireError::TimeOutOfRange`] as for
    /// [`take`](AsyncLimiter::take).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`take`](AsyncLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
    /// limiter.take().await?;
    /// let refused = limiter.take_timeout(Duration::from_millis(50)).await.unwrap_err();
    /// assert_eq!(refused.retry_after(), Some(Duration::from_millis(100)));
    /// limiter.take_timeout(Duration::from_millis(100)).await?; // fits
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_timeout(&self, timeout: Duration) -> Result<(), AcquireError> {
        self.take_n_within(1, timeout).await
    }

    /// Waits for `n` permits if their slot comes within `timeout` of the
    /// first poll; otherwise fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](AsyncLimiter::take_timeout), plus
    /// [`AcquireError::InsufficientCapacity`] if `n > burst`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`take`](AsyncLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?.with_burst(4)?);
    /// limiter.take_n_timeout(4, Duration::ZERO).await?;
    /// assert!(limiter.take_n_timeout(2, Duration::from_millis(150)).await.is_err());
    /// limiter.take_n_timeout(2, Duration::from_millis(200)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n_timeout(&self, n: u32, timeout: Duration) -> Result<(), AcquireError> {
        self.take_n_within(n, timeout).await
    }

    /// Waits for one permit if its slot comes no later than `deadline`;
    /// otherwise fails at once, without sleeping and without consuming
    /// anything. If the slot fits, it always succeeds. A deadline already
    /// passed acts as a zero timeout: only a permit available now is taken.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](AsyncLimiter::take_timeout).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`take`](AsyncLimiter::take).
    ///
    /// # Examples
    ///
    /// A call to a downstream with a deadline: the permit and the call share
    /// it, and a permit that would come too late fails before any waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    /// use tokio::time::{Instant, timeout_at};
    ///
    /// # async fn call_downstream() -> u32 { 7 }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// limiter.take_until(deadline).await?;
    /// let answer = timeout_at(deadline, call_downstream()).await?;
    /// assert_eq!(answer, 7);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_until(&self, deadline: Instant) -> Result<(), AcquireError> {
        self.take_n_until(1, deadline).await
    }

    /// Waits for `n` permits if their slot comes no later than `deadline`;
    /// otherwise fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`take_n_timeout`](AsyncLimiter::take_n_timeout).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`take`](AsyncLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?.with_burst(2)?);
    /// limiter.take_n(2).await?;
    /// let soon = Instant::now() + Duration::from_millis(100);
    /// assert!(limiter.take_n_until(2, soon).await.is_err()); // needs 200 ms
    /// limiter.take_n_until(1, soon).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_n_until(&self, n: u32, deadline: Instant) -> Result<(), AcquireError> {
        // As `take_n_within`, with tokio's clock read only if a wait is
        // needed: a free permit needs no timeout.
        match self.core.acquire_now(&(), n) {
            Err(AcquireError::RateLimited { .. }) => {
                let timeout = deadline.saturating_duration_since(Instant::now());
                acquire(&*self.core, self.wake, n, timeout).await
            }
            done => done,
        }
    }

    /// Acquires `n` permits within `max_wait` of now, waiting for the slot.
    ///
    /// Permits free now are taken by the core's
    /// [`acquire_now`](Decide::acquire_now), the sync path (no cancellable
    /// reservation, no refund lookup, no headroom): what a reservation with
    /// no wait would grant, at the sync path's cost. Only
    /// a refusal with a wait goes on to reserve a slot, and that
    /// reservation decides afresh (it may take a refunded slot, or find the
    /// permits freed meanwhile).
    async fn take_n_within(&self, n: u32, max_wait: Duration) -> Result<(), AcquireError> {
        match self.core.acquire_now(&(), n) {
            Err(AcquireError::RateLimited { .. }) => {
                acquire(&*self.core, self.wake, n, max_wait).await
            }
            done => done,
        }
    }
}
