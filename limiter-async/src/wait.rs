//! Waiting for a granted slot: decide, then sleep until the slot.
//!
//! Every asynchronous acquisition is two steps:
//!
//! 1. **Decide.** One [`Decide::decide`] claims the earliest slot for the
//!    permits (for GCRA one CAS on the state word) and says how long after
//!    the decision it comes (`grant.wait`). Grants are ordered by that CAS
//!    and each one's slot is later than the one before it (`tat` only
//!    grows), so waiters are served first come, first served.
//! 2. **Sleep until the slot**, `Instant::now()` plus the wait, on the timer
//!    the limiter's [`WakeUp`](crate::WakeUp) picks for the grant's
//!    catch-up window (`policy.window()`, see [`crate::wake`]). Never a retry
//!    loop. In paused time tokio's clock does not move between the decision
//!    and that read, so the instant is the slot's exactly; in real time it
//!    is at most the nanoseconds between them late, never early. A waiter
//!    that wakes late does not push the next slot back, because the next
//!    slot was computed from `tat`, not from when anyone woke up. When the
//!    slot is now (`wait == 0`) no timer is created at all.
//!
//! Invariant (cancel safety): between the decision and the end of the
//! sleep, the grant's ticket is owned by a [`SlotWait`] (or, in the
//! throttled stream, a [`TicketGuard`]). If the waiting future is dropped it
//! hands the permits back through [`Decide::cancel`]: GCRA restores its
//! state when no later reservation depends on them, and otherwise keeps the
//! slot as a refund that the next reservation which would wait longer takes.
//! Only a quota change in between, or a slot that has already passed, leaves
//! them spent, which can only make the limiter stricter, never looser.
//!
//! # Algorithms that cannot hold a future slot
//!
//! Waiting works on any [`Decide`] with `Key = ()`. Some algorithms (the
//! sliding window, the lower priority tiers) grant only what conforms now:
//! they deny with `RateLimited { retry_after }` even when that wait is within
//! the allowed wait. [`acquire`] then sleeps that exact wait (the time until
//! the request would conform if nothing else were admitted) and asks again,
//! as long as the deadline allows. That is no busy loop (one attempt per
//! computed wait) and no lost wake-up, but it is not FIFO: a waiter that
//! wakes may find its permits taken and wait again. Algorithms that reserve
//! (GCRA, warm-up, priority class 0) always succeed on the first attempt
//! within the deadline.
//!
//! The public types in [`crate::limiter`] and [`crate::throttle`] are thin
//! layers over this module.

use core::time::Duration;
use std::future::Future;
use std::sync::Arc;

use limiter_core::{AcquireError, Decide, Denial, Grant};
use tokio::time::{Instant, sleep};

use crate::slot_wait::{CancelGrant, SlotWait};
use crate::wake::WakeUp;

/// Owns a grant's ticket while it is waited for in a stream; cancels it on
/// drop unless [`keep`](TicketGuard::keep) was called.
pub(crate) struct TicketGuard<L: Decide<Key = ()>> {
    limiter: Arc<L>,
    ticket: Option<L::Ticket>,
}

impl<L: Decide<Key = ()>> TicketGuard<L> {
    /// Takes charge of `ticket`, granted by `limiter`.
    pub(crate) fn new(limiter: Arc<L>, ticket: L::Ticket) -> TicketGuard<L> {
        TicketGuard {
            limiter,
            ticket: Some(ticket),
        }
    }

    /// The slot has come: the permits are the caller's, nothing to give back.
    pub(crate) fn keep(mut self) {
        self.ticket = None;
    }
}

impl<L: Decide<Key = ()>> Drop for TicketGuard<L> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            // Refused only after a quota change, or for a slot already past:
            // the permits then stay spent, which errs on the strict side.
            let _given_back = self.limiter.cancel(&(), ticket);
        }
    }
}

impl<L: Decide<Key = ()>> core::fmt::Debug for TicketGuard<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TicketGuard")
            .field("held", &self.ticket.is_some())
            .finish_non_exhaustive()
    }
}

/// Waits until `grant`'s slot on `limiter`: the one [`SlotWait`]. Completes
/// on the first poll, with no timer, when the slot is now. Dropping the
/// future at any point before it completes (even unpolled) cancels the
/// grant (see the module doc).
pub(crate) fn wait_for<'a, L>(
    limiter: &'a L,
    wake: WakeUp,
    grant: Grant<L::Ticket>,
) -> impl Future<Output = ()> + Send + 'a
where
    L: Decide<Key = ()>,
    L::Ticket: Send,
{
    let refund = CancelGrant {
        decider: limiter,
        key: &(),
        ticket: grant.ticket,
    };
    let slot = SlotWait::after(grant.wait, wake, grant.policy.window(), refund);
    async move {
        let _kept = slot.await;
    }
}

/// Acquires `n` permits whose slot comes within `max_wait` of now (measured
/// on tokio's clock), waiting for it.
///
/// Reserving limiters decide once: the slot fits or the call fails at once,
/// consuming nothing. Limiters that cannot hold a future slot are retried
/// after each exact computed wait while the deadline allows (module doc).
pub(crate) async fn acquire<L>(
    limiter: &L,
    wake: WakeUp,
    n: u32,
    max_wait: Duration,
) -> Result<(), AcquireError>
where
    L: Decide<Key = ()>,
    L::Ticket: Send,
{
    // The deadline is only needed if a retry happens: reading tokio's clock
    // up front would double the cost of a take.
    let mut deadline: Option<Option<Instant>> = None;
    let mut budget = max_wait;
    loop {
        match limiter.decide(&(), n, budget) {
            // Permits free now: nothing to guard, no timer, no deadline.
            Ok(grant) if grant.wait.is_zero() => return Ok(()),
            Ok(grant) => {
                wait_for(limiter, wake, grant).await;
                return Ok(());
            }
            // Refused although the wait fits: the algorithm cannot hold a
            // future slot. Sleep the exact wait (at least 1 ns, so a zero
            // could never spin) and ask again.
            Err(Denial::RateLimited { retry_after, .. }) if retry_after <= budget => {
                // First refusal: the deadline is `max_wait` from now (the
                // decision was made an instant ago). `None`: no deadline.
                let end = *deadline.get_or_insert_with(|| Instant::now().checked_add(max_wait));
                sleep(retry_after.max(Duration::from_nanos(1))).await;
                budget = end.map_or(Duration::MAX, |d| {
                    d.saturating_duration_since(Instant::now())
                });
            }
            Err(denial) => return Err(denial.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use limiter_core::{Quota, RateLimiter};

    use super::*;
    use crate::TokioClock;
    use crate::timer::SlotTimer;
    use crate::wake::Waking;

    type Core = RateLimiter<TokioClock>;

    const ZERO_WINDOW: Waking = Waking {
        mode: WakeUp::Precise,
        window: Duration::ZERO,
    };

    fn core(per_second: u32, burst: u32) -> Arc<Core> {
        let quota = Quota::per_second(per_second)
            .and_then(|q| q.with_burst(burst))
            .expect("valid quota");
        Arc::new(RateLimiter::with_clock(quota, TokioClock::new()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_guard_gives_the_last_reservation_back() {
        let limiter = core(10, 1);
        let now = limiter.reserve_n(1, Duration::MAX).expect("first");
        assert!(now.wait().is_zero());
        let later = limiter.reserve_n(1, Duration::MAX).expect("second");
        assert_eq!(later.wait(), Duration::from_millis(100));
        drop(TicketGuard::new(Arc::clone(&limiter), later));
        // The next reservation gets the same slot again.
        let again = limiter.reserve_n(1, Duration::MAX).expect("third");
        assert_eq!(again.wait(), Duration::from_millis(100));
        TicketGuard::new(Arc::clone(&limiter), again).keep();
        assert_eq!(
            limiter.reserve_n(1, Duration::MAX).map(|r| r.wait()),
            Ok(Duration::from_millis(200))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_a_slot_that_is_now_needs_no_timer() {
        let limiter = core(10, 1);
        let grant = limiter.decide(&(), 1, Duration::ZERO).expect("free");
        assert_eq!(
            wait_for(&*limiter, WakeUp::Precise, grant).now_or_never(),
            Some(())
        );
    }

    #[test]
    fn the_catch_up_window_is_the_grants_policy_window() {
        // 10,000/s with burst 20: a 2 ms window, enough to absorb tokio's
        // lateness; after a hot change to burst 1, 100 µs.
        let limiter = RateLimiter::with_clock(
            Quota::per_second(10_000)
                .and_then(|q| q.with_burst(20))
                .expect("valid quota"),
            limiter_core::ManualClock::new(),
        );
        let grant = limiter.decide(&(), 1, Duration::ZERO).expect("free");
        assert_eq!(grant.policy.window(), Duration::from_millis(2));
        limiter.set_quota(Quota::per_second(10_000).expect("valid quota"));
        let grant = limiter.decide(&(), 1, Duration::MAX).expect("a slot");
        assert_eq!(grant.policy.window(), Duration::from_micros(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_exactly_at_its_slot() {
        let limiter = core(10, 1);
        limiter.try_acquire().expect("free");
        let grant = limiter.decide(&(), 1, Duration::MAX).expect("a slot");
        let start = Instant::now();
        wait_for(&*limiter, WakeUp::Precise, grant).await;
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unarmed_timer_is_ready_and_an_armed_one_fires_at_its_deadline() {
        let mut timer = SlotTimer::default();
        let start = Instant::now();
        std::future::poll_fn(|cx| timer.poll_elapsed(cx)).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        for ms in [5, 7] {
            let deadline = start + Duration::from_millis(ms);
            timer.arm(ZERO_WINDOW, deadline, deadline - Instant::now());
            std::future::poll_fn(|cx| timer.poll_elapsed(cx)).await;
            assert_eq!(start.elapsed(), Duration::from_millis(ms));
        }
    }
}
