//! Waiting for a reserved slot: a reservation guard plus an absolute sleep.
//!
//! Every asynchronous acquisition is two steps:
//!
//! 1. **Reserve.** One call to the core's
//!    [`reserve_n`](limiter_core::RateLimiter::reserve_n) claims the earliest
//!    slot for the permits, as one CAS on the state word. The slot is the
//!    instant `ready_at` (ns since the [`TokioClock`] origin) from which the
//!    permits conform. Reservations are ordered by that CAS, and each one's
//!    `ready_at` is later than the one before it (the theoretical arrival
//!    time `tat` only grows), so waiters are served first come, first served.
//! 2. **Sleep until the slot.** Until the slot's absolute instant (the
//!    [`InstantMap`] gives it as a tokio `Instant`), on the timer the limiter's
//!    [`WakeUp`](crate::WakeUp) picks (see [`crate::wake`]): in real time
//!    the precise timer thread for waiters that tokio's lateness would cost
//!    rate, tokio's timer otherwise. Never a retry loop.
//!    A waiter that wakes late does not push the next slot back, because
//!    the next slot was computed from `tat`, not from when anyone woke up.
//!    When the slot is now (`wait == 0`) no timer is created at all.
//!
//! Invariant (cancel safety): between the reservation and the end of the
//! sleep, the reservation is owned by a [`ReservationGuard`]. If the waiting
//! future is dropped, the guard hands the permits back through
//! [`cancel`](limiter_core::RateLimiter::cancel): the core restores its
//! state when no later reservation depends on them, and otherwise keeps the
//! slot as a refund that the next reservation which would wait longer takes
//! (so a waiter that times out and retries gets its own slot back). Only a
//! quota change in between, or a slot that has already passed, leaves them
//! spent, which can only make the limiter stricter, never looser. Once the
//! sleep completes the guard is disarmed and the permits are the caller's.
//!
//! # Algorithms that cannot hold a future slot
//!
//! Waiting works on any [`Limiter`]. Some algorithms (the sliding window,
//! the lower priority tiers) grant only what conforms now: their
//! `reserve_n` refuses with `RateLimited { wait }` even when `wait` is within
//! the allowed wait. [`acquire`] then sleeps that exact `wait` (the time
//! until the request would conform if nothing else were admitted) and asks
//! again, as long as the deadline allows. That is no busy loop (one attempt
//! per computed wait) and no lost wake-up (nothing is waited *for*; the
//! sleep ends at a computed time), but it is not FIFO: a waiter that wakes
//! may find its permits taken and wait again. Algorithms that reserve (GCRA,
//! warm-up, priority class 0) always succeed on the first attempt within
//! the deadline.
//!
//! The public types in [`crate::limiter`] and [`crate::throttle`] are thin
//! layers over this module.

use core::time::Duration;
use std::future::Future;

use limiter_core::{AcquireError, Limiter, Reservation};
use tokio::time::{Instant, sleep};

use crate::instants::InstantMap;
use crate::slot_wait::{Refund, SlotWait};
use crate::wake::Waking;

/// Owns a reservation while it is waited for; cancels it on drop unless
/// [`keep`](ReservationGuard::keep) was called.
///
/// `L` is how the guard reaches the limiter: a borrow for the `async` methods,
/// an `Arc` for a stream that outlives any one borrow (both are `Limiter`s).
pub(crate) struct ReservationGuard<L: Limiter> {
    limiter: L,
    reservation: Option<Reservation>,
    deadline: Instant,
}

impl<L: Limiter> ReservationGuard<L> {
    /// Takes charge of `reservation`, made on `limiter`, whose clock `slots`
    /// maps to tokio instants.
    pub(crate) fn new(
        limiter: L,
        slots: &InstantMap,
        reservation: Reservation,
    ) -> ReservationGuard<L> {
        let deadline = slots.deadline(reservation.ready_at(), reservation.wait());
        ReservationGuard {
            limiter,
            reservation: Some(reservation),
            deadline,
        }
    }

    /// The tokio instant of the slot.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The slot has come: the permits are the caller's, nothing to give back.
    pub(crate) fn keep(mut self) {
        self.reservation = None;
    }
}

impl<L: Limiter> Drop for ReservationGuard<L> {
    fn drop(&mut self) {
        if let Some(reservation) = self.reservation.take() {
            // Refused only after a quota change, or for a slot already past:
            // the permits then stay spent, which errs on the strict side.
            let _given_back = self.limiter.cancel(reservation);
        }
    }
}

impl<L: Limiter> core::fmt::Debug for ReservationGuard<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReservationGuard")
            .field("reservation", &self.reservation)
            .finish_non_exhaustive()
    }
}

/// A reservation of a [`Limiter`], given back through its `cancel` when a
/// [`SlotWait`] is dropped before the slot.
pub(crate) struct LimiterRefund<L: Limiter> {
    limiter: L,
    reservation: Reservation,
}

impl<L: Limiter> Refund for LimiterRefund<L> {
    fn refund(self) {
        // Refused only after a quota change, or for a slot already past:
        // the permits then stay spent, which errs on the strict side.
        let _given_back = self.limiter.cancel(self.reservation);
    }
}

/// Waits until `reservation`'s slot on `limiter`: the one [`SlotWait`].
/// Completes on the first poll, with no timer, when the slot is now.
/// Dropping the future at any point before it completes (even unpolled)
/// cancels the reservation (see the module doc).
pub(crate) fn wait_for<'a, L: Limiter>(
    limiter: &'a L,
    slots: &InstantMap,
    wake: Waking,
    reservation: Reservation,
) -> impl Future<Output = ()> + Send + 'a {
    let (wait, deadline) = (
        reservation.wait(),
        slots.deadline(reservation.ready_at(), reservation.wait()),
    );
    let refund = LimiterRefund {
        limiter,
        reservation,
    };
    let slot = SlotWait::until(deadline, wait, wake.mode, wake.window, refund);
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
pub(crate) async fn acquire<L: Limiter>(
    limiter: &L,
    slots: &InstantMap,
    wake: Waking,
    n: u32,
    max_wait: Duration,
) -> Result<(), AcquireError> {
    // The deadline is only needed if a retry happens: reading tokio's clock
    // up front would double the cost of a take.
    let mut deadline: Option<Option<Instant>> = None;
    let mut budget = max_wait;
    loop {
        match limiter.reserve_n(n, budget) {
            // Permits free now: nothing to guard, no timer, no deadline.
            Ok(reservation) if reservation.wait().is_zero() => return Ok(()),
            Ok(reservation) => {
                wait_for(limiter, slots, wake, reservation).await;
                return Ok(());
            }
            // Refused although the wait fits: the algorithm cannot hold a
            // future slot. Sleep the exact wait (at least 1 ns, so a zero
            // could never spin) and ask again.
            Err(AcquireError::RateLimited { wait }) if wait <= budget => {
                // First refusal: the deadline is `max_wait` from now (the
                // decision was made an instant ago). `None`: no deadline.
                let end = *deadline.get_or_insert_with(|| Instant::now().checked_add(max_wait));
                sleep(wait.max(Duration::from_nanos(1))).await;
                budget = end.map_or(Duration::MAX, |d| {
                    d.saturating_duration_since(Instant::now())
                });
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use limiter_core::Quota;

    use limiter_core::RateLimiter;

    use super::*;
    use crate::TokioClock;
    use crate::timer::SlotTimer;

    type Core = RateLimiter<TokioClock>;

    const ZERO_WINDOW: Waking = Waking {
        mode: crate::WakeUp::Precise,
        window: Duration::ZERO,
    };

    fn core(per_second: u32, burst: u32) -> (Core, InstantMap) {
        let quota = Quota::per_second(per_second)
            .and_then(|q| q.with_burst(burst))
            .expect("valid quota");
        let clock = TokioClock::new();
        (
            RateLimiter::with_clock(quota, clock),
            InstantMap::of_clock(&clock),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_guard_gives_the_last_reservation_back() {
        let (limiter, slots) = core(10, 1);
        let now = limiter.reserve_n(1, Duration::MAX).expect("first");
        assert!(now.wait().is_zero());
        let later = limiter.reserve_n(1, Duration::MAX).expect("second");
        assert_eq!(later.wait(), Duration::from_millis(100));
        drop(ReservationGuard::new(&limiter, &slots, later));
        // The next reservation gets the same slot again.
        let again = limiter.reserve_n(1, Duration::MAX).expect("third");
        assert_eq!(again.wait(), Duration::from_millis(100));
        ReservationGuard::new(&limiter, &slots, again).keep();
        assert_eq!(
            limiter.reserve_n(1, Duration::MAX).map(|r| r.wait()),
            Ok(Duration::from_millis(200))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_a_slot_that_is_now_needs_no_timer() {
        let (limiter, slots) = core(10, 1);
        let reservation = limiter.reserve_n(1, Duration::ZERO).expect("free");
        assert_eq!(
            wait_for(&limiter, &slots, ZERO_WINDOW, reservation).now_or_never(),
            Some(())
        );
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
