//! Blocking acquisition on [`RateLimiter`] and [`WarmUpLimiter`]: reserve
//! a slot, then sleep through the clock until it comes.
//!
//! With [`MonotonicClock`](crate::MonotonicClock) the thread sleeps; with
//! [`ManualClock`](crate::ManualClock) the clock is moved to the slot instead,
//! so blocking behaviour is exact and instant in tests. Either way the wait is
//! a reservation first, so blocked callers are served in the order they
//! reserved, a timeout is decided before sleeping, and a clock past the
//! limiter's span is an error at once, never a wait that cannot end.

use core::time::Duration;

use crate::clock::BlockingClock;
use crate::error::AcquireError;
use crate::{RateLimiter, Reservation, WarmUpLimiter};

impl<C: BlockingClock> RateLimiter<C> {
    /// Waits for one permit.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimeOutOfRange`], at once, if the clock reads more
    /// than [`MAX_SPAN`](crate::clock::MAX_SPAN) past the limiter's creation (no
    /// permit can be granted any more). One permit always fits the burst, so
    /// nothing else can fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{Clock, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, clock.clone());
    /// limiter.take()?; // at once
    /// limiter.take()?; // the manual clock moves to the next slot
    /// assert_eq!(clock.now(), 100_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take(&self) -> Result<(), AcquireError> {
        self.take_n(1)
    }

    /// Waits for `n` permits. `n == 0` returns at once.
    ///
    /// # Errors
    ///
    /// At once, without waiting: [`AcquireError::InsufficientCapacity`] if
    /// `n > burst`; [`AcquireError::TimeOutOfRange`] if the clock, or the
    /// slot, lies past the limiter's span.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{AcquireError, Clock, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(5)?, clock.clone());
    /// limiter.take_n(5)?;
    /// limiter.take_n(2)?; // two more permits: 200 ms later
    /// assert_eq!(clock.now(), 200_000_000);
    /// assert!(matches!(limiter.take_n(6), Err(AcquireError::InsufficientCapacity { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_n(&self, n: u32) -> Result<(), AcquireError> {
        self.take_n_timeout(n, Duration::MAX)
    }

    /// Waits for one permit if its slot comes within `timeout`; otherwise
    /// fails at once, without sleeping and without consuming anything.
    /// `Duration::MAX` means no limit.
    ///
    /// # Errors
    ///
    /// [`AcquireError::RateLimited`] with the wait the slot would need, when
    /// it exceeds `timeout`; [`AcquireError::TimeOutOfRange`] as for
    /// [`take`](RateLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// limiter.take_timeout(Duration::ZERO)?;
    /// let refused = limiter.take_timeout(Duration::from_millis(50)).unwrap_err();
    /// assert_eq!(refused.retry_after(), Some(Duration::from_millis(100)));
    /// limiter.take_timeout(Duration::from_millis(100))?; // fits: waits 100 ms
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_timeout(&self, timeout: Duration) -> Result<(), AcquireError> {
        self.take_n_timeout(1, timeout)
    }

    /// Waits for `n` permits if their slot comes within `timeout`; otherwise
    /// fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](RateLimiter::take_timeout), plus
    /// [`AcquireError::InsufficientCapacity`] if `n > burst`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(3)?, ManualClock::new());
    /// limiter.take_n_timeout(3, Duration::ZERO)?;
    /// assert!(limiter.take_n_timeout(2, Duration::from_millis(199)).is_err());
    /// limiter.take_n_timeout(2, Duration::from_millis(200))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_n_timeout(&self, n: u32, timeout: Duration) -> Result<(), AcquireError> {
        self.reserve_n(n, timeout).map(|r| self.wait_for(r))
    }

    /// Sleeps until the reservation's slot.
    fn wait_for(&self, reservation: Reservation) {
        if reservation.wait != 0 {
            self.clock().sleep_until(reservation.ready_at);
        }
    }
}

impl<C: BlockingClock> WarmUpLimiter<C> {
    /// Waits for one permit, sleeping through the clock until its slot.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimeOutOfRange`], at once and without sleeping, for a
    /// clock reading past the limiter's range or a slot whose cost would end
    /// past it (see the module docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let clock = ManualClock::new();
    /// // Stable interval 500 ms, cold 1.5 s, 8 stored permits when cold.
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), clock.clone())?;
    /// use limiter_core::Clock;
    /// limiter.take()?; // at once
    /// limiter.take()?; // a manual clock moves to the slot instead of sleeping
    /// assert_eq!(clock.now(), 1_375_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take(&self) -> Result<(), AcquireError> {
        self.take_n_timeout(1, Duration::MAX)
    }

    /// Waits for `n` permits. `n == 0` returns at once.
    ///
    /// # Errors
    ///
    /// As [`take`](WarmUpLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{Clock, ManualClock, Quota, WarmUpLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), clock.clone())?;
    /// limiter.take_n(2)?; // at once: the cost is paid by the next request
    /// limiter.take()?; // waits the cold cost of two permits
    /// assert!(clock.now() > 2_000_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_n(&self, n: u32) -> Result<(), AcquireError> {
        self.take_n_timeout(n, Duration::MAX)
    }

    /// Waits for one permit if its slot comes within `timeout`; otherwise
    /// fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// [`AcquireError::RateLimited`] with the wait the slot would need, when
    /// it exceeds `timeout`; otherwise as [`take`](WarmUpLimiter::take).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())?;
    /// limiter.take()?;
    /// let refused = limiter.take_timeout(Duration::from_secs(1)).unwrap_err();
    /// assert_eq!(refused.retry_after(), Some(Duration::from_millis(1_375)));
    /// limiter.take_timeout(Duration::from_secs(2))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_timeout(&self, timeout: Duration) -> Result<(), AcquireError> {
        self.take_n_timeout(1, timeout)
    }

    /// Waits for `n` permits if their slot comes within `timeout`; otherwise
    /// fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// As [`take_timeout`](WarmUpLimiter::take_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let limiter = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())?;
    /// limiter.take_n_timeout(3, Duration::ZERO)?;
    /// assert!(limiter.take_n_timeout(1, Duration::ZERO).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_n_timeout(&self, n: u32, timeout: Duration) -> Result<(), AcquireError> {
        let r = self.reserve_n(n, timeout)?;
        if r.wait != 0 {
            self.clock().sleep_until(r.ready_at);
        }
        Ok(())
    }
}
