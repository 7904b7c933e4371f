//! `SlotWait`, the one wait, under tokio's paused clock: it completes at
//! its absolute instant (not later for a late first poll), at once for a
//! zero wait, refunds exactly once when dropped before the slot, and hands
//! the ticket over when it completes.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use limiter_async::{CancelGrant, Refund, SlotWait, TokioClock, WakeUp};
use limiter_core::{Decide, Quota, RateLimiter};
use tokio::time::Instant;

/// Counts its refunds.
struct Counted(Rc<Cell<u32>>);

impl Refund for Counted {
    fn refund(self) {
        self.0.set(self.0.get() + 1);
    }
}

#[tokio::test(start_paused = true)]
async fn it_ends_at_its_absolute_instant_even_when_first_polled_late() {
    let start = Instant::now();
    let refunds = Rc::new(Cell::new(0));
    let wait = SlotWait::until(
        start + Duration::from_millis(30),
        Duration::from_millis(30),
        WakeUp::Precise,
        Duration::ZERO,
        Counted(refunds.clone()),
    );
    tokio::time::sleep(Duration::from_millis(20)).await; // a late first poll
    let _kept = wait.await;
    assert_eq!(start.elapsed(), Duration::from_millis(30));
    assert_eq!(refunds.get(), 0, "completed: nothing given back");
}

#[tokio::test(start_paused = true)]
async fn a_zero_wait_is_ready_on_the_first_poll() {
    let refunds = Rc::new(Cell::new(0));
    let wait = SlotWait::after(
        Duration::ZERO,
        WakeUp::Precise,
        Duration::ZERO,
        Counted(refunds.clone()),
    );
    assert!(wait.now_or_never().is_some());
    assert_eq!(refunds.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropped_before_its_slot_it_gives_the_grant_back_once() {
    let limiter = RateLimiter::with_clock(Quota::per_second(10).unwrap(), TokioClock::new());
    limiter.decide_now(&(), 1).unwrap();
    let grant = limiter.decide(&(), 1, Duration::from_secs(1)).unwrap();
    assert_eq!(grant.wait, Duration::from_millis(100));
    let refund = CancelGrant {
        decider: &limiter,
        key: &(),
        ticket: grant.ticket,
    };
    let mut wait = SlotWait::after(grant.wait, WakeUp::Precise, Duration::ZERO, refund);
    assert!((&mut wait).now_or_never().is_none());
    drop(wait);
    // The slot is free again: the next reservation gets it.
    let again = limiter.decide(&(), 1, Duration::from_secs(1)).unwrap();
    assert_eq!(again.wait, Duration::from_millis(100));

    let refunds = Rc::new(Cell::new(0));
    drop(SlotWait::after(
        Duration::from_millis(5),
        WakeUp::Timer,
        Duration::ZERO,
        Counted(refunds.clone()),
    ));
    assert_eq!(refunds.get(), 1);
}
