//! Clocks: where "now" comes from, in nanoseconds since the clock's origin.
//!
//! The limiter reads its clock exactly once per decision and keeps all time in
//! nanoseconds since that clock's origin. A clock need not be monotonic: the
//! GCRA decision takes `max(tat, now)`, so a reading that steps backwards can
//! only make the limiter stricter, never admit extra permits (see
//! `docs/design.md`).
//!
//! * [`MonotonicClock`] (std): `std::time::Instant` since the clock was made.
//! * [`ManualClock`]: time that moves only when told to; clones share it. The
//!   clock of every exact test.
//! * [`TscClock`] (feature `tsc`): the CPU time-stamp counter through
//!   `quanta`, nanosecond resolution at about 60% of `Instant`'s cost.
//! * [`CoarseClock`] (std): a cached time refreshed every millisecond by a
//!   background thread; one relaxed load per read, millisecond resolution.
//!
//! | clock | read cost (reference machine) | resolution | monotonic |
//! |---|---|---|---|
//! | `MonotonicClock` | 38–40 ns | 1 ns | yes |
//! | `TscClock` | 21–24 ns | 1 ns | per core; may lag slightly across cores |
//! | `CoarseClock` | ~2.5 ns | ~1 ms (worse when the OS is late) | yes; stands still between ticks |
//!
//! The default, [`DefaultClock`], is `TscClock` (the `tsc` feature is on by
//! default): nanosecond resolution at well under `Instant`'s cost, and the
//! clock governor reads, so comparisons are like for like. `CoarseClock` is
//! cheaper still but releases time in millisecond steps, which a limiter
//! faster than 1,000/s turns into bursts; `docs/benchmarks.md` has the
//! measurements. Without `tsc` (and under miri, which cannot execute
//! `rdtsc`) the default is `MonotonicClock`; without `std`, there is no real
//! clock and the default type is `ManualClock`.
//!
//! [`BlockingClock`] adds the ability to wait until a given time, which the
//! blocking `take*` methods use: the monotonic clock sleeps the thread, the
//! manual clock simply moves its own time forward.

use alloc::sync::Arc;

#[cfg(feature = "std")]
mod coarse;
mod epoch;
mod manual;
#[cfg(feature = "std")]
mod monotonic;
#[cfg(feature = "tsc")]
mod tsc;

pub use crate::quota::MAX_SPAN;
#[cfg(feature = "std")]
pub use coarse::CoarseClock;
pub(crate) use epoch::Epoch;
pub use manual::ManualClock;
#[cfg(feature = "std")]
pub use monotonic::MonotonicClock;
#[cfg(feature = "tsc")]
pub use tsc::TscClock;

/// The clock a limiter reads when none is given: [`TscClock`] (feature
/// `tsc`, on by default).
#[cfg(all(feature = "tsc", not(miri)))]
pub type DefaultClock = TscClock;
/// The clock a limiter reads when none is given: [`MonotonicClock`] (without
/// the `tsc` feature, or under miri).
#[cfg(all(feature = "std", any(not(feature = "tsc"), miri)))]
pub type DefaultClock = MonotonicClock;
/// The clock type a limiter names when none is given: without `std` there is
/// no real-time clock, so [`ManualClock`].
#[cfg(not(feature = "std"))]
pub type DefaultClock = ManualClock;

/// A source of time in nanoseconds since the clock's own origin.
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin.
    fn now(&self) -> u64;
}

/// A clock that can wait until one of its own instants.
pub trait BlockingClock: Clock {
    /// Returns once `now() >= deadline` (or at once if it already is).
    fn sleep_until(&self, deadline: u64);
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now(&self) -> u64 {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    #[inline]
    fn now(&self) -> u64 {
        (**self).now()
    }
}

impl<C: BlockingClock + ?Sized> BlockingClock for Arc<C> {
    fn sleep_until(&self, deadline: u64) {
        (**self).sleep_until(deadline)
    }
}
