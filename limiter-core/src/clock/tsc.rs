//! [`TscClock`]: the CPU's time-stamp counter, read through `quanta`.
//!
//! # Cost, resolution, monotonicity
//!
//! * **Cost**: one `rdtsc` and a multiply-shift to nanoseconds, about 21–24 ns
//!   a read on the reference machine, against 38–40 ns for
//!   `std::time::Instant::now` (see `docs/benchmarks.md`). This is the clock
//!   governor uses by default, so comparisons with it are like for like.
//! * **Resolution**: nanoseconds (the counter ticks at the CPU's nominal
//!   frequency; `quanta` calibrates it against the OS monotonic clock once per
//!   process).
//! * **Monotonicity**: `quanta` uses the counter only where the CPU reports an
//!   invariant TSC, and otherwise falls back to the OS monotonic clock. Even an
//!   invariant counter is not guaranteed to agree to the nanosecond between
//!   cores, so a thread that migrates may read a value slightly *behind* an
//!   earlier one. Readings are never below the origin (`quanta` clamps a
//!   negative delta to 0). A reading that steps back can only make the
//!   limiter stricter: the decision uses `max(tat, now)`.
//!
//! Why `quanta` rather than our own `rdtsc`: reading the counter and querying
//! CPUID for an invariant TSC are `unsafe` intrinsics (this crate has no
//! `unsafe`), calibration against the OS clock is subtle, and `quanta` is
//! already what governor reads, so the benchmarks compare the limiters, not
//! two counter readers. The dependency is optional, behind the `tsc` feature.

use std::time::Duration;

use super::{BlockingClock, Clock};

/// The CPU time-stamp counter in nanoseconds since the clock was made (read
/// through [`quanta`](https://docs.rs/quanta); the OS monotonic clock where
/// the CPU has no invariant TSC). Sleeping parks the thread.
///
/// About 40% cheaper to read than [`MonotonicClock`](crate::MonotonicClock),
/// with the same nanosecond resolution. A reading taken on another core may
/// lag an earlier one by a little; that only makes the limiter stricter.
///
/// # Examples
///
/// ```
/// use limiter_core::{Clock, Quota, RateLimiter, clock::TscClock};
///
/// # // miri cannot execute `rdtsc` (inline assembly): the real counter only.
/// # #[cfg(not(miri))] {
/// let clock = TscClock::new();
/// let a = clock.now();
/// assert!(clock.now() >= a);
///
/// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, TscClock::new());
/// assert!(limiter.try_acquire().is_ok());
/// # }
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct TscClock {
    clock: quanta::Clock,
    /// The raw counter value at the origin.
    origin: u64,
}

impl TscClock {
    /// A clock whose origin is now. The first clock made in a process pays
    /// for `quanta`'s calibration (a few milliseconds); later ones are cheap.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Quota, RateLimiter, clock::TscClock};
    ///
    /// # #[cfg(not(miri))] {
    /// let limiter = RateLimiter::with_clock(Quota::per_second(1)?, TscClock::new());
    /// assert!(limiter.try_acquire().is_ok());
    /// assert!(limiter.try_acquire().is_err()); // the next permit is a second away
    /// # }
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn new() -> TscClock {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        TscClock { clock, origin }
    }
}

impl Default for TscClock {
    fn default() -> TscClock {
        TscClock::new()
    }
}

impl Clock for TscClock {
    #[inline]
    fn now(&self) -> u64 {
        // A raw reading below the origin (another core's counter lags) is
        // reported as 0 by quanta: behind, never ahead.
        self.clock.delta_as_nanos(self.origin, self.clock.raw())
    }
}

impl BlockingClock for TscClock {
    fn sleep_until(&self, deadline: u64) {
        loop {
            let now = self.now();
            if now >= deadline {
                return;
            }
            // The OS sleeps at least this long; loop in case the counter and
            // the OS clock disagree by a little.
            std::thread::sleep(Duration::from_nanos(deadline - now));
        }
    }
}

// Excluded under miri: these read the real time-stamp counter, and miri
// cannot execute `rdtsc` (inline assembly).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn sleep_until_returns_only_once_the_clock_reads_the_deadline() {
        let clock = TscClock::new();
        let deadline = clock.now() + 200_000;
        clock.sleep_until(deadline);
        assert!(clock.now() >= deadline);
        // A past deadline returns at once.
        clock.sleep_until(0);
    }

    #[test]
    fn clones_share_the_origin() {
        let clock = TscClock::new();
        let copy = clock.clone();
        assert_eq!(copy.origin, clock.origin);
    }
}
