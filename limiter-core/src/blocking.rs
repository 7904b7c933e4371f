//! Blocking acquisition: reserve a slot, then sleep through the clock until
//! it comes.
//!
//! With [`MonotonicClock`](crate::MonotonicClock) the thread sleeps; with
//! [`ManualClock`](crate::ManualClock) the clock is moved to the slot instead,
//! so blocking behaviour is exact and instant in tests. Either way the wait is
//! a reservation first, so blocked callers are served in the order they
//! reserved, and a timeout is decided before sleeping.

use core::time::Duration;

use crate::clock::BlockingClock;
use crate::error::AcquireError;
use crate::{RateLimiter, Reservation};

impl<C: BlockingClock> RateLimiter<C> {
    /// Waits for one permit and returns how long it waited.
    ///
    /// Never fails: one permit always fits the burst. If the clock has run
    /// past [`MAX_SPAN`](crate::MAX_SPAN) (36.5 years after its origin) no
    /// permit can be granted any more and this blocks for good; use
    /// [`take_n`](RateLimiter::take_n) to see that as
    /// [`AcquireError::TimeOutOfRange`].
    pub fn take(&self) -> Duration {
        loop {
            match self.take_n(1) {
                Ok(waited) => return waited,
                // Only TimeOutOfRange is possible for one permit and no limit
                // on the wait; the clock will never come back into range.
                Err(_) => self.clock().sleep_until(u64::MAX),
            }
        }
    }

    /// Waits for `n` permits and returns how long it waited. `n == 0` returns
    /// at once.
    ///
    /// # Errors
    ///
    /// [`AcquireError::InsufficientCapacity`] if `n > burst`, at once;
    /// [`AcquireError::TimeOutOfRange`] past [`MAX_SPAN`](crate::MAX_SPAN).
    pub fn take_n(&self, n: u32) -> Result<Duration, AcquireError> {
        self.reserve_n(n, Duration::MAX).map(|r| self.wait_for(r))
    }

    /// Waits for one permit if its slot comes within `timeout`; otherwise
    /// fails at once, without sleeping and without consuming anything.
    ///
    /// # Errors
    ///
    /// [`AcquireError::RateLimited`] with the wait the slot would need, when
    /// it exceeds `timeout`; [`AcquireError::TimeOutOfRange`] past
    /// [`MAX_SPAN`](crate::MAX_SPAN).
    pub fn take_timeout(&self, timeout: Duration) -> Result<Duration, AcquireError> {
        self.take_n_timeout(1, timeout)
    }

    /// Waits for `n` permits if their slot comes within `timeout`; otherwise
    /// fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](RateLimiter::take_timeout), plus
    /// [`AcquireError::InsufficientCapacity`] if `n > burst`.
    pub fn take_n_timeout(&self, n: u32, timeout: Duration) -> Result<Duration, AcquireError> {
        self.reserve_n(n, timeout).map(|r| self.wait_for(r))
    }

    /// Sleeps until the reservation's slot; returns the reserved wait.
    fn wait_for(&self, reservation: Reservation) -> Duration {
        if reservation.wait != 0 {
            self.clock().sleep_until(reservation.ready_at);
        }
        reservation.wait()
    }
}
