//! Is tokio's clock real time right now, and the fast real-time clock used
//! when it is.
//!
//! tokio's [`Instant::now`](tokio::time::Instant::now) follows the system's
//! monotonic clock unless the runtime's time is paused (`start_paused`,
//! `tokio::time::pause`), in which case it is virtual: frozen while tasks
//! run, moved only by auto-advance or `tokio::time::advance`. Whether the
//! clock is paused is not exposed by tokio, so [`tokio_follows_real_time`]
//! finds out by reading both clocks:
//!
//! 1. `before ≤ tokio ≤ after`, where `before` and `after` are system-clock
//!    readings taken around tokio's: virtual time (which lags or leads the
//!    system clock by the time spent paused) almost never lands in that
//!    window of a few tens of nanoseconds;
//! 2. and, to rule out a frozen reading that does land in it, tokio's clock
//!    reads later once the system clock has passed the first reading (a
//!    paused clock cannot move while this thread runs: auto-advance only
//!    happens when the runtime is idle).
//!
//! Invariant: a `true` answer means tokio's clock moved with the system
//! clock during the call. A `false` answer is always safe for callers here:
//! it only makes them read tokio's clock (exact in virtual time) instead of
//! the faster [`fast_clock`].
//!
//! The fast clock is one process-wide [`DefaultClock`] of the core (the TSC
//! counter through `quanta`, `Instant` where there is none): nanoseconds
//! since its first use, at about a third of `Instant::now`'s cost.

use std::sync::OnceLock;

use limiter_core::{Clock, DefaultClock};

/// Whether tokio's clock, as seen from this thread, is the system's
/// monotonic clock right now (not paused, never paused-and-resumed). Costs
/// four clock reads.
pub(crate) fn tokio_follows_real_time() -> bool {
    let before = std::time::Instant::now();
    let tokio_now = tokio::time::Instant::now().into_std();
    let after = std::time::Instant::now();
    if tokio_now < before || tokio_now > after {
        return false;
    }
    // Frozen time could only pass this second check by moving, which it
    // cannot do while this thread runs. The loop ends as soon as the system
    // clock ticks past a reading it already took (nanoseconds).
    while std::time::Instant::now() <= tokio_now {
        std::hint::spin_loop();
    }
    tokio::time::Instant::now().into_std() > tokio_now
}

/// The process-wide fast clock: nanoseconds since its first use.
#[inline]
pub(crate) fn fast_clock() -> &'static DefaultClock {
    static CLOCK: OnceLock<DefaultClock> = OnceLock::new();
    CLOCK.get_or_init(DefaultClock::default)
}

/// A reading of [`fast_clock`] shifted to another origin:
/// `reading.saturating_sub(sub) + add`, where at most one of the two is
/// non-zero. Saturation keeps a counter that lags by a few nanoseconds on
/// another core at 0 rather than wrapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shift {
    sub: u64,
    add: u64,
}

impl Shift {
    /// The shift that makes the fast clock read `at` now (negative `at`: the
    /// origin lies `-at` ns in the future; readings stay 0 until then).
    pub(crate) fn reading_now(at: i128) -> Shift {
        let now = i128::from(fast_clock().now());
        let delta = at - now;
        if delta >= 0 {
            Shift {
                sub: 0,
                add: u64::try_from(delta).unwrap_or(u64::MAX),
            }
        } else {
            Shift {
                sub: u64::try_from(-delta).unwrap_or(u64::MAX),
                add: 0,
            }
        }
    }

    /// The shifted reading of the fast clock before saturation: negative
    /// before the origin.
    pub(crate) fn signed_now(self) -> i128 {
        i128::from(fast_clock().now()) - i128::from(self.sub) + i128::from(self.add)
    }

    /// The shifted reading of the fast clock.
    #[inline]
    pub(crate) fn now(self) -> u64 {
        fast_clock()
            .now()
            .saturating_sub(self.sub)
            .saturating_add(self.add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_runtime_tokio_reads_the_system_clock() {
        assert!(tokio_follows_real_time());
    }

    #[tokio::test(start_paused = true)]
    async fn paused_time_is_not_real_time() {
        assert!(!tokio_follows_real_time());
        tokio::time::advance(std::time::Duration::from_millis(5)).await;
        assert!(!tokio_follows_real_time());
    }

    #[tokio::test]
    async fn running_time_is_real_time_and_resumed_time_is_not() {
        assert!(tokio_follows_real_time());
        tokio::time::pause();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        tokio::time::resume();
        // A second ahead of the system clock for the rest of the runtime.
        assert!(!tokio_follows_real_time());
    }

    #[test]
    fn a_shift_reads_its_value_and_never_wraps() {
        let ahead = Shift::reading_now(1 << 40);
        assert!(ahead.now() >= 1 << 40);
        let future_origin = Shift::reading_now(-(1 << 50));
        assert_eq!(future_origin.now(), 0);
        let zero = Shift::reading_now(0);
        assert!(zero.now() < 1 << 40);
    }
}
