//! [`WakeUp`]: which timer wakes a waiter at its slot.
//!
//! The rule, applied per wait:
//!
//! * [`WakeUp::Precise`] (the default), tokio's clock following real time,
//!   and a waiter that cannot absorb tokio's lateness: both its wait and
//!   its limiter's catch-up window (`burst · t`, the lateness a wake-up may
//!   have without costing rate) shorter than [`PRECISE_RANGE`]. Then the
//!   precise timer thread of [`crate::precise`] wakes it within tens of
//!   microseconds of its slot.
//! * Otherwise tokio's timer: `sleep_until` the slot, which fires on the
//!   next whole millisecond. Always so under paused time, so tests run in
//!   exact virtual time whatever the mode; and for long waits or wide
//!   catch-up windows, which tokio's ≤ 1 ms rounding costs no rate (see
//!   `docs/async.md`).
//!
//! Either sleep ends at or after the slot's instant, never before.

use core::time::Duration;

use tokio::time::Instant;
#[cfg(test)]
use tokio::time::sleep_until;

use crate::precise::PreciseSleep;
use crate::real_time::tokio_follows_real_time;

/// Under [`WakeUp::Precise`], a waiter whose wait and catch-up window
/// (`burst · t`) are both shorter than this goes to the precise timer;
/// others to tokio's timer. Two ticks of tokio's timer: a waiter loses rate
/// to a late wake-up only when the lateness exceeds the longer of the two
/// (docs/async.md, "the lateness rule"), and tokio's is at most about 1 ms
/// plus scheduling delay.
pub const PRECISE_RANGE: Duration = Duration::from_millis(2);

/// How a waiting future is woken at its slot.
///
/// # Examples
///
/// ```
/// use limiter_async::{AsyncLimiter, WakeUp};
/// use limiter_core::Quota;
///
/// let limiter = AsyncLimiter::new(Quota::per_second(10_000)?);
/// assert_eq!(limiter.wake_up(), WakeUp::Precise);
/// let coarse = limiter.with_wake_up(WakeUp::Timer);
/// assert_eq!(coarse.wake_up(), WakeUp::Timer);
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WakeUp {
    /// Waits that tokio's lateness would cost rate (wait and catch-up
    /// window both under [`PRECISE_RANGE`]) are woken by a dedicated timer
    /// thread (one per process, started on first use, sleeping on a timer
    /// without slack), within tens of microseconds of the slot; other
    /// waits, and every wait under paused time, by tokio's timer. Falls
    /// back to tokio's timer if the thread cannot be started.
    #[default]
    Precise,
    /// tokio's timer for every wait: woken on the next whole millisecond
    /// after the slot (plus scheduling delay). No extra thread.
    Timer,
}

/// A limiter's [`WakeUp`] with its catch-up window (`burst · t`, zero when
/// the algorithm does not say), as one wait sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waking {
    /// The limiter's mode.
    pub(crate) mode: WakeUp,
    /// How late a wake-up may be without costing rate, at the least.
    pub(crate) window: Duration,
}

impl Waking {
    /// Sleeps until a slot at `deadline`, which is `wait` from now, on the
    /// timer the rule of the module doc picks for it.
    #[cfg(test)]
    pub(crate) async fn sleep(self, deadline: Instant, wait: Duration) {
        match self.precise(deadline, wait) {
            Some(precise) => precise.await,
            None => sleep_until(deadline).await,
        }
    }

    /// The precise sleep until `deadline`, `wait` from now, if the mode, the
    /// lateness the waiter can absorb (the longer of its wait and the
    /// catch-up window) and the clock call for one (module doc) and the
    /// timer thread runs; `None`: use tokio's timer.
    pub(crate) fn precise(self, deadline: Instant, wait: Duration) -> Option<PreciseSleep> {
        let absorbs = wait.max(self.window);
        if self.mode == WakeUp::Precise && absorbs < PRECISE_RANGE && tokio_follows_real_time() {
            // In real time tokio's instants are the system clock's.
            PreciseSleep::until(deadline.into_std())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waking(mode: WakeUp, window: Duration) -> Waking {
        Waking { mode, window }
    }

    #[tokio::test(start_paused = true)]
    async fn paused_time_always_sleeps_on_tokios_timer() {
        let wait = Duration::from_micros(100);
        let deadline = Instant::now() + wait;
        let precise = waking(WakeUp::Precise, Duration::ZERO);
        assert!(precise.precise(deadline, wait).is_none());
        let start = Instant::now();
        precise.sleep(deadline, wait).await;
        // tokio rounds up to its next 1 ms tick: exact in virtual time.
        assert_eq!(start.elapsed(), Duration::from_millis(1));
    }

    #[tokio::test]
    async fn in_real_time_only_waiters_that_cannot_absorb_tokios_lateness_go_precise() {
        let now = Instant::now();
        let short = Duration::from_micros(100);
        let precise = waking(WakeUp::Precise, short);
        assert!(precise.precise(now, short).is_some());
        // A long wait, or a catch-up window covering tokio's lateness.
        assert!(precise.precise(now, PRECISE_RANGE).is_none());
        let wide = waking(WakeUp::Precise, PRECISE_RANGE);
        assert!(wide.precise(now, short).is_none());
        let timer = waking(WakeUp::Timer, Duration::ZERO);
        assert!(timer.precise(now, short).is_none());
        // Deadlines that are now complete on either timer.
        precise.sleep(now, short).await;
        timer.sleep(now, short).await;
    }
}
