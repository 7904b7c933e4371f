//! [`ManualClock`]: time that moves only when told to, for exact tests.

use alloc::sync::Arc;
use core::time::Duration;

use super::{BlockingClock, Clock};
use crate::quota::saturating_nanos;
use crate::sync::{AtomicU64, Ordering};

/// Time that moves only when told to. Clones share one time.
///
/// The clock of exact tests: [`advance`](ManualClock::advance) and
/// [`set`](ManualClock::set) move it, and a blocking
/// [`take`](crate::RateLimiter::take) on a limiter with this clock moves it to
/// the slot instead of sleeping. `set` may move it backwards, to test how the
/// limiter copes with a clock that steps back.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let shared = clock.clone();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(shared.now(), 5_000_000);
/// shared.set(7);
/// assert_eq!(clock.now(), 7);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Clock, ManualClock};
    ///
    /// assert_eq!(ManualClock::new().now(), 0);
    /// ```
    pub fn new() -> ManualClock {
        ManualClock::starting_at(0)
    }

    /// A clock reading `nanos`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Clock, ManualClock};
    ///
    /// assert_eq!(ManualClock::starting_at(1_000).now(), 1_000);
    /// ```
    pub fn starting_at(nanos: u64) -> ManualClock {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(nanos)),
        }
    }

    /// Moves time forward by `by`, saturating at `u64::MAX` nanoseconds.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::starting_at(u64::MAX - 1);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(clock.now(), u64::MAX);
    /// ```
    pub fn advance(&self, by: Duration) {
        let by = saturating_nanos(by);
        // Relaxed: the clock is a single value; nothing else is published with it.
        let _ = self
            .nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add(by))
            });
    }

    /// Sets the time to `nanos`, forwards or backwards.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::starting_at(10);
    /// clock.set(3); // backwards
    /// assert_eq!(clock.now(), 3);
    /// ```
    pub fn set(&self, nanos: u64) {
        // Relaxed: as in `advance`.
        self.nanos.store(nanos, Ordering::Relaxed);
    }
}

impl Default for ManualClock {
    fn default() -> ManualClock {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> u64 {
        // Relaxed: a reading of one value; decisions synchronise through the
        // limiter's own state word, not through the clock.
        self.nanos.load(Ordering::Relaxed)
    }
}

impl BlockingClock for ManualClock {
    /// Moves the shared time forward to `deadline` (never backwards).
    fn sleep_until(&self, deadline: u64) {
        // Relaxed: as in `advance`.
        self.nanos.fetch_max(deadline, Ordering::Relaxed);
    }
}
