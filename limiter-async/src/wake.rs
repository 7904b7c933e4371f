//! [`WakeUp`]: which timer wakes a waiter at its slot.
//!
//! The rule, applied per wait:
//!
//! * [`WakeUp::Precise`] (the default), a wait shorter than
//!   [`PRECISE_RANGE`], and tokio's clock following real time: the precise
//!   timer thread of [`crate::precise`] wakes the waiter within tens of
//!   microseconds of its slot.
//! * Otherwise tokio's timer: `sleep_until` the slot, which fires on the
//!   next whole millisecond. Always so under paused time, so tests run in
//!   exact virtual time whatever the mode; and for long waits, whose 1 ms
//!   rounding costs no rate (see `docs/async.md`).
//!
//! Either sleep ends at or after the slot's instant, never before.

use core::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::precise::PreciseSleep;
use crate::real_time::tokio_follows_real_time;

/// Waits shorter than this go to the precise timer under
/// [`WakeUp::Precise`]; longer ones to tokio's timer. Two ticks of tokio's
/// timer: a wait of `t` loses rate to a late wake-up only when the lateness
/// exceeds `t`, and tokio's is at most about 1 ms plus scheduling delay.
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
    /// Waits shorter than [`PRECISE_RANGE`] are woken by a dedicated timer
    /// thread (one per process, started on first use) with 1 ns timer
    /// slack, within tens of microseconds of the slot; longer waits, and
    /// every wait under paused time, by tokio's timer. Falls back to
    /// tokio's timer if the thread cannot be started.
    #[default]
    Precise,
    /// tokio's timer for every wait: woken on the next whole millisecond
    /// after the slot (plus scheduling delay). No extra thread.
    Timer,
}

impl WakeUp {
    /// Sleeps until a slot at `deadline`, which is `wait` from now, on the
    /// timer this mode picks for it.
    pub(crate) async fn sleep(self, deadline: Instant, wait: Duration) {
        match self.precise(deadline, wait) {
            Some(precise) => precise.await,
            None => sleep_until(deadline).await,
        }
    }

    /// The precise sleep until `deadline`, `wait` from now, if this mode,
    /// the wait and the clock call for one (module doc) and the timer thread
    /// runs; `None`: use tokio's timer.
    pub(crate) fn precise(self, deadline: Instant, wait: Duration) -> Option<PreciseSleep> {
        if self == WakeUp::Precise && wait < PRECISE_RANGE && tokio_follows_real_time() {
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

    #[tokio::test(start_paused = true)]
    async fn paused_time_always_sleeps_on_tokios_timer() {
        let wait = Duration::from_micros(100);
        let deadline = Instant::now() + wait;
        assert!(WakeUp::Precise.precise(deadline, wait).is_none());
        let start = Instant::now();
        WakeUp::Precise.sleep(deadline, wait).await;
        // tokio rounds up to its next 1 ms tick: exact in virtual time.
        assert_eq!(start.elapsed(), Duration::from_millis(1));
    }

    #[tokio::test]
    async fn real_time_short_waits_go_to_the_precise_timer_and_long_ones_to_tokio() {
        let now = Instant::now();
        let short = Duration::from_micros(100);
        assert!(WakeUp::Precise.precise(now, short).is_some());
        assert!(WakeUp::Precise.precise(now, PRECISE_RANGE).is_none());
        assert!(WakeUp::Timer.precise(now, short).is_none());
        // Deadlines that are now complete on either timer.
        WakeUp::Precise.sleep(now, short).await;
        WakeUp::Timer.sleep(now, short).await;
    }
}
