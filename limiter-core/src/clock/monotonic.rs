//! [`MonotonicClock`]: `std::time::Instant` since the clock was made.

use std::time::{Duration, Instant};

use super::{BlockingClock, Clock};

/// The standard library's clock: `std::time::Instant` (monotonic, nanosecond
/// resolution on Linux, about 25–40 ns a read) measured from the moment
/// the clock was made. Sleeping parks the thread. The
/// [`DefaultClock`](crate::DefaultClock) without the `tsc` feature.
///
/// # Examples
///
/// ```
/// use limiter_core::{Clock, MonotonicClock};
///
/// let clock = MonotonicClock::new();
/// let a = clock.now();
/// assert!(clock.now() >= a);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Clock, MonotonicClock};
    ///
    /// let clock = MonotonicClock::new();
    /// let a = clock.now();
    /// assert!(clock.now() >= a);
    /// ```
    pub fn new() -> MonotonicClock {
        MonotonicClock {
            origin: Instant::now(),
        }
    }

    /// The `Instant` this clock counts from.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// use limiter_core::MonotonicClock;
    ///
    /// let before = Instant::now();
    /// let clock = MonotonicClock::new();
    /// assert!(clock.origin() >= before);
    /// assert!(clock.origin() <= Instant::now());
    /// ```
    pub fn origin(&self) -> Instant {
        self.origin
    }
}

impl Default for MonotonicClock {
    fn default() -> MonotonicClock {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> u64 {
        // Saturates after 584 years of uptime; the limiter reports times
        // past 2^60 ns (36.5 years) as `TimeOutOfRange` long before.
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl BlockingClock for MonotonicClock {
    fn sleep_until(&self, deadline: u64) {
        let target = self.origin.checked_add(Duration::from_nanos(deadline));
        loop {
            let now = Instant::now();
            match target {
                Some(target) if now < target => std::thread::sleep(target - now),
                Some(_) => return,
                // Not representable as an Instant: centuries away.
                None => std::thread::sleep(Duration::from_secs(3600)),
            }
        }
    }
}
