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
//! The fast clock, [`Counter`], reads the counter the core's default
//! `TscClock` reads (the CPU's time-stamp counter through `quanta`, the OS
//! monotonic clock where it is not invariant), through one process-wide,
//! once-calibrated reader: about a third of `Instant::now`'s cost, and
//! `Copy`, so [`TokioClock`](crate::TokioClock) stays `Copy`.

use std::sync::OnceLock;

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
    // cannot do while this thread runs. The system clock passes a reading it
    // already took within one tick of its resolution (nanoseconds here); a
    // clock too coarse for that within a few thousand reads gets the safe
    // answer.
    for _ in 0..4_096 {
        if std::time::Instant::now() > tokio_now {
            return tokio::time::Instant::now().into_std() > tokio_now;
        }
        std::hint::spin_loop();
    }
    false
}

/// The process-wide counter reader, calibrated once (the first use pays a
/// few milliseconds).
fn counter() -> &'static quanta::Clock {
    static COUNTER: OnceLock<quanta::Clock> = OnceLock::new();
    COUNTER.get_or_init(quanta::Clock::new)
}

/// A copyable fast clock: the process's counter reader, read as
/// `base + (counter − raw0)` scaled to nanoseconds. `quanta` reports a
/// counter below `raw0` (another core's counter lagging by a little) as a
/// zero delta, so a reading is never below `base`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counter {
    clock: &'static quanta::Clock,
    raw0: u64,
    base: u64,
}

impl Counter {
    /// A counter on the scale of `origin`: it reads tokio's `now − origin`
    /// (in ns) at the instant it is made; `None` if `origin` is still to
    /// come. The reader is calibrated first (the first use in a process
    /// takes milliseconds), so the pairing below is not skewed by it.
    pub(crate) fn since(origin: tokio::time::Instant) -> Option<Counter> {
        let clock = counter();
        let raw0 = clock.raw();
        let since = tokio::time::Instant::now().checked_duration_since(origin)?;
        Some(Counter {
            clock,
            raw0,
            base: u64::try_from(since.as_nanos()).unwrap_or(u64::MAX),
        })
    }

    /// The reading: nanoseconds on the scale it was made with.
    #[inline]
    pub(crate) fn now(self) -> u64 {
        // Wrapping: `base + delta` reaches 2^64 only 584 years after the
        // origin; a plain `+` would add an overflow check in debug builds.
        self.clock
            .delta_as_nanos(self.raw0, self.clock.raw())
            .wrapping_add(self.base)
    }
}

// Every `Counter` reads the one process-wide reader: equal when their
// origins are.
impl PartialEq for Counter {
    fn eq(&self, other: &Counter) -> bool {
        (self.raw0, self.base) == (other.raw0, other.base)
    }
}

impl Eq for Counter {}

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
    fn a_counter_reads_on_its_origins_scale_and_copies_share_it() {
        let now = tokio::time::Instant::now();
        // As far back as the monotonic clock reaches (it starts at boot).
        let back = [3_600_000, 1_000, 1]
            .map(std::time::Duration::from_millis)
            .into_iter()
            .find(|d| now.checked_sub(*d).is_some())
            .expect("the monotonic clock is at least 1 ms past its start");
        let counter = Counter::since(now - back).expect("a past origin");
        let at_least = u64::try_from(back.as_nanos()).expect("fits");
        assert!(counter.now() >= at_least);
        let copy = counter;
        assert_eq!(copy, counter);
        assert!(copy.now() >= at_least);
        assert_ne!(Counter::since(now), Some(counter));
        assert_eq!(Counter::since(now + back), None);
    }
}
