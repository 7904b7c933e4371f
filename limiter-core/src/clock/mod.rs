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
//!
//! [`BlockingClock`] adds the ability to wait until a given time, which the
//! blocking `take*` methods use: the monotonic clock sleeps the thread, the
//! manual clock simply moves its own time forward.

use alloc::sync::Arc;

mod manual;
#[cfg(feature = "std")]
mod monotonic;

pub use manual::ManualClock;
#[cfg(feature = "std")]
pub use monotonic::MonotonicClock;

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
