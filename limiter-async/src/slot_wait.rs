//! [`SlotWait`]: the one wait of the workspace. A future that sleeps until
//! a granted slot's absolute instant on the timer [`WakeUp`] picks (the
//! precise timer thread for short waits in real time, tokio's otherwise),
//! and gives the grant back if it is dropped before the slot.
//!
//! Every front end that holds a request until its slot waits with it:
//! [`AsyncLimiter`](crate::AsyncLimiter)'s `take*`, `KeyedLimiter::take*`,
//! `RedisLimiter::take*`, an HTTP layer's delay mode. The slot comes from
//! any decider, as an instant ([`SlotWait::until`], for a clock that maps
//! to tokio's) or as a wait relative to a decision made just now
//! ([`SlotWait::after`], for a remote store whose reply says "in 3 ms").
//!
//! Guarantees: the future never completes before its instant; a zero wait
//! completes on the first poll with no timer; the deadline is absolute, so
//! a late first poll does not push it back; dropping the future before it
//! completes runs its [`Refund`] exactly once, and completing hands the
//! refund token (the grant's ticket) to the caller instead.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use tokio::time::Instant;

use crate::decide::AsyncDecide;
use crate::timer::SlotTimer;
use crate::wake::{WakeUp, Waking};

/// What a [`SlotWait`] gives back when it is dropped before its slot.
pub trait Refund {
    /// Gives the permits back (best effort: a limiter may refuse).
    fn refund(self);
}

/// Nothing to give back (a grant that cannot be cancelled, as Redis').
impl Refund for () {
    fn refund(self) {}
}

/// A grant of an [`AsyncDecide`] (every `Decide` is one), given back
/// through its `cancel`.
#[derive(Debug)]
pub struct CancelGrant<'a, D: AsyncDecide + ?Sized> {
    /// The decider that granted it.
    pub decider: &'a D,
    /// The key it was granted for.
    pub key: &'a D::Key,
    /// The grant's ticket.
    pub ticket: D::Ticket,
}

impl<D: AsyncDecide + ?Sized> Refund for CancelGrant<'_, D> {
    fn refund(self) {
        // Refused only when the limiter cannot give it back (a quota change
        // since, a slot already past): the permits then stay spent, the
        // strict side.
        let _given_back = AsyncDecide::cancel(self.decider, self.key, self.ticket);
    }
}

/// Sleeps until a slot, then yields its refund token; refunds if dropped
/// first. See the module docs.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_async::{CancelGrant, SlotWait, WakeUp};
/// use limiter_core::{Decide, Quota, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, limiter_async::TokioClock::new());
/// limiter.decide_now(&(), 1)?;
/// let grant = limiter.decide(&(), 1, Duration::from_secs(1))?;
/// let refund = CancelGrant { decider: &limiter, key: &(), ticket: grant.ticket };
/// let start = tokio::time::Instant::now();
/// let _kept = SlotWait::after(grant.wait, WakeUp::Precise, Duration::ZERO, refund).await;
/// assert_eq!(start.elapsed(), Duration::from_millis(100));
/// # Ok(())
/// # }
/// ```
///
/// # Cancel safety
///
/// Dropping it before it completes runs the refund; after, the caller owns
/// the permits.
#[must_use = "a slot wait does nothing unless polled, and refunds when dropped"]
#[derive(Debug)]
pub struct SlotWait<R: Refund> {
    timer: SlotTimer,
    refund: Option<R>,
}

// Nothing is pinned through a `SlotWait`: its timer boxes what tokio needs
// pinned, and the refund is only moved out by value.
impl<R: Refund> Unpin for SlotWait<R> {}

impl<R: Refund> SlotWait<R> {
    /// Waits until `deadline`, which is `wait` from now, on the timer `wake`
    /// picks for a limiter whose catch-up window (`burst · t`) is `window`.
    pub fn until(
        deadline: Instant,
        wait: Duration,
        wake: WakeUp,
        window: Duration,
        refund: R,
    ) -> Self {
        let mut timer = SlotTimer::default();
        if !wait.is_zero() {
            timer.arm(Waking { mode: wake, window }, deadline, wait);
        }
        SlotWait {
            timer,
            refund: Some(refund),
        }
    }

    /// Waits `wait` from now: for a slot a remote decider reported relative
    /// to its decision (which was made before now, so the slot is never
    /// used early).
    pub fn after(wait: Duration, wake: WakeUp, window: Duration, refund: R) -> Self {
        let now = Instant::now();
        let deadline = now
            .checked_add(wait)
            .unwrap_or(now + Duration::from_secs(86_400 * 365 * 30));
        SlotWait::until(deadline, wait, wake, window, refund)
    }
}

impl<R: Refund> Future for SlotWait<R> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let this = self.get_mut();
        match this.timer.poll_elapsed(cx) {
            Poll::Ready(()) => match this.refund.take() {
                Some(refund) => Poll::Ready(refund),
                None => panic!("SlotWait polled after it completed"),
            },
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<R: Refund> Drop for SlotWait<R> {
    fn drop(&mut self) {
        if let Some(refund) = self.refund.take() {
            refund.refund();
        }
    }
}
