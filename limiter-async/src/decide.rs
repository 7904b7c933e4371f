//! [`AsyncDecide`]: the twin of `limiter-core`'s [`Decide`] for limiters
//! whose decision may need an `.await` (a network store).
//!
//! Every in-memory [`Decide`] is an `AsyncDecide` through the blanket impl:
//! its future is ready at once, and [`decide_ready`](AsyncDecide::decide_ready)
//! hands the decision over without a future at all, so a front end (an
//! HTTP layer) answers an in-memory decision without an asynchronous step.
//! A remote limiter (`limiter_redis::RedisLimiter`) implements
//! `AsyncDecide` directly.
//!
//! Times are relative to the decision, as in [`Decide`]: a grant's `wait`
//! is a [`Duration`] from the moment the decision was made; the one wait
//! of this crate turns it into an absolute
//! deadline.

use core::future::Future;
use core::time::Duration;

use limiter_core::{Decide, Denial, Grant, Unavailable, debt::Debt};

/// A limiter asked for permits per key whose decision is a future: the
/// same question and answer as [`Decide`] (a [`Grant`] with its headroom
/// and policy, or a [`Denial`] with its wait and policy).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_async::AsyncDecide;
/// use limiter_core::{ManualClock, Quota, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = RateLimiter::with_clock(Quota::per_second(2)?, ManualClock::new());
/// // In memory: decided at once, with or without the future.
/// assert!(limiter.decide_ready(&(), 1, Duration::ZERO).is_some());
/// let held = limiter.decide_async(&(), 1, Duration::from_secs(1)).await?;
/// assert_eq!(held.wait, Duration::from_millis(500));
/// # Ok(())
/// # }
/// ```
///
/// # Cancel safety
///
/// A front end may drop the future before it resolves (its client went
/// away); an implementation whose decision has side effects after an
/// `.await` must tolerate that and say what is consumed then.
pub trait AsyncDecide: Send + Sync {
    /// What requests are counted by.
    type Key: ?Sized;
    /// What a grant hands back to [`cancel`](AsyncDecide::cancel).
    type Ticket;

    /// Gives back the permits of a grant that will not be used; returns
    /// whether they are back.
    fn cancel(&self, key: &Self::Key, ticket: Self::Ticket) -> bool;

    /// Claims `cost` permits for `key` if they conform within `max_wait`.
    ///
    /// # Errors
    ///
    /// A [`Denial`]; every variant consumed nothing.
    fn decide_async(
        &self,
        key: &Self::Key,
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<Self::Ticket>, Denial>> + Send;

    /// The decision, when it can be made without waiting (every in-memory
    /// limiter can); `None` (the default) sends the caller to
    /// [`decide_async`](AsyncDecide::decide_async).
    fn decide_ready(
        &self,
        key: &Self::Key,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<Self::Ticket>, Denial>> {
        let _ = (key, cost, max_wait);
        None
    }

    /// Charges `key` `permits` more after a grant, as capped debt (the
    /// async form of [`Decide::charge_after`], whose cap it keeps): the
    /// next permit of `key` at most `max(cap, t)` later, the rest reported
    /// dropped.
    ///
    /// The default charges nothing and reports every permit dropped (a
    /// limiter that cannot carry debt). In-memory limiters answer with
    /// their [`Decide::charge_after`]; a remote store debits the key in
    /// its own script (`limiter_redis::RedisLimiter`).
    ///
    /// # Errors
    ///
    /// The store could not be reached; nothing is known to be charged.
    ///
    /// # Cancel safety
    ///
    /// A dropped future may or may not have charged the store.
    fn charge_after_async(
        &self,
        key: &Self::Key,
        permits: u64,
        cap: Duration,
    ) -> impl Future<Output = Result<Debt, Unavailable>> + Send {
        let _ = (key, cap);
        core::future::ready(Ok(Debt {
            charged: 0,
            dropped: permits,
        }))
    }

    /// The charge, when it can be made without waiting (every in-memory
    /// limiter can); `None` (the default) sends the caller to
    /// [`charge_after_async`](AsyncDecide::charge_after_async).
    fn charge_ready(&self, key: &Self::Key, permits: u64, cap: Duration) -> Option<Debt> {
        let _ = (key, permits, cap);
        None
    }
}

/// Every in-memory decision is ready at once.
impl<D> AsyncDecide for D
where
    D: Decide + ?Sized,
    D::Ticket: Send,
{
    type Key = D::Key;
    type Ticket = D::Ticket;

    fn cancel(&self, key: &D::Key, ticket: D::Ticket) -> bool {
        Decide::cancel(self, key, ticket)
    }

    fn decide_async(
        &self,
        key: &D::Key,
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<D::Ticket>, Denial>> + Send {
        core::future::ready(self.decide(key, cost, max_wait))
    }

    #[inline]
    fn decide_ready(
        &self,
        key: &D::Key,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<D::Ticket>, Denial>> {
        Some(self.decide(key, cost, max_wait))
    }

    fn charge_after_async(
        &self,
        key: &D::Key,
        permits: u64,
        cap: Duration,
    ) -> impl Future<Output = Result<Debt, Unavailable>> + Send {
        core::future::ready(Ok(self.charge_after(key, permits, cap)))
    }

    #[inline]
    fn charge_ready(&self, key: &D::Key, permits: u64, cap: Duration) -> Option<Debt> {
        Some(self.charge_after(key, permits, cap))
    }
}
