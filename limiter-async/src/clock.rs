//! [`TokioClock`]: the limiter's nanoseconds read from tokio's clock.
//!
//! The core limiter keeps all time as `u64` nanoseconds since its clock's
//! origin. This clock's origin is a [`tokio::time::Instant`] captured when the
//! clock is made, and "now" is `tokio::time::Instant::now()` measured from it.
//! Because tokio's `Instant::now()` follows the runtime's clock, a paused
//! runtime (`#[tokio::test(start_paused = true)]`, `tokio::time::pause`)
//! drives the limiter too: its decisions and its timers see the same time.
//!
//! Invariants:
//!
//! * `now()` is monotonic (tokio's `Instant` is) and saturates at
//!   `u64::MAX` ns (584 years), long after the core reports
//!   `TimeOutOfRange` (2^60 ns, 36.5 years).
//! * [`TokioClock::instant_at`] and [`TokioClock::nanos_at`] are inverse
//!   conversions between the two time scales: `nanos_at(instant_at(n)) == n`
//!   for every `n` an `Instant` can represent. Waiting for a slot at `n` ns
//!   is `sleep_until(instant_at(n))`, an absolute deadline, so rounding in
//!   the timer never accumulates from one wait to the next.

use core::time::Duration;

use limiter_core::Clock;
use tokio::time::Instant;

/// A [`Clock`] reading tokio's time: nanoseconds since an origin
/// [`Instant`].
///
/// Under a paused tokio clock this clock is paused too, so limiter tests run
/// in exact virtual time. Copies share the origin and hence the time scale.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_async::TokioClock;
/// use limiter_core::Clock;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let clock = TokioClock::new();
/// tokio::time::sleep(Duration::from_millis(3)).await;
/// assert_eq!(clock.now(), 3_000_000);
/// assert_eq!(clock.instant_at(3_000_000), tokio::time::Instant::now());
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokioClock {
    origin: Instant,
}

impl TokioClock {
    /// A clock whose origin is tokio's "now" (the runtime's clock when
    /// called inside a runtime, the system's monotonic clock otherwise).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::TokioClock;
    /// use limiter_core::Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let clock = TokioClock::new();
    /// assert_eq!(clock.now(), 0);
    /// # }
    /// ```
    pub fn new() -> TokioClock {
        TokioClock::with_origin(Instant::now())
    }

    /// A clock counting from `origin`. Instants before it read as 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    /// use limiter_core::Clock;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let clock = TokioClock::with_origin(Instant::now() - Duration::from_millis(5));
    /// assert_eq!(clock.now(), 5_000_000);
    /// # }
    /// ```
    pub fn with_origin(origin: Instant) -> TokioClock {
        TokioClock { origin }
    }

    /// The instant this clock counts from (its 0 ns).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::TokioClock;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// assert_eq!(TokioClock::with_origin(start).origin(), start);
    /// # }
    /// ```
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// The tokio instant of the clock reading `nanos`: `origin + nanos`.
    ///
    /// Saturates, rather than panics, if the sum is past what an `Instant`
    /// can hold (it never is on mainstream platforms: `u64` nanoseconds are
    /// 584 years).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let clock = TokioClock::new();
    /// assert_eq!(clock.instant_at(2_000_000), clock.origin() + Duration::from_millis(2));
    /// # }
    /// ```
    pub fn instant_at(&self, nanos: u64) -> Instant {
        saturating_add(self.origin, Duration::from_nanos(nanos))
    }

    /// The clock reading, in nanoseconds since the origin, at `instant`:
    /// 0 before the origin, saturating at `u64::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let clock = TokioClock::new();
    /// assert_eq!(clock.nanos_at(clock.origin() + Duration::from_micros(7)), 7_000);
    /// assert_eq!(clock.nanos_at(clock.instant_at(42)), 42);
    /// # }
    /// ```
    pub fn nanos_at(&self, instant: Instant) -> u64 {
        let since = instant.saturating_duration_since(self.origin);
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Default for TokioClock {
    fn default() -> TokioClock {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> u64 {
        self.nanos_at(Instant::now())
    }
}

/// Maps a limiter's clock readings (ns) to tokio instants: the pair
/// `(instant, nanos)` read together once, then `instant_at(n) = instant +
/// (n − nanos)`. For a limiter on a [`TokioClock`] the pair is `(origin, 0)`
/// and the map is exact; for any other limiter it is read when the
/// [`AsyncLimiter`](crate::AsyncLimiter) is made, and is exact as long as the
/// limiter's clock runs at tokio's pace (build it on a `TokioClock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotMap {
    instant: Instant,
    nanos: u64,
}

impl SlotMap {
    /// The map of a limiter on `clock`.
    pub(crate) fn of_clock(clock: &TokioClock) -> SlotMap {
        SlotMap {
            instant: clock.origin(),
            nanos: 0,
        }
    }

    /// The map that pairs tokio's now with a limiter clock reading `nanos`
    /// now.
    pub(crate) fn pairing_now_with(nanos: u64) -> SlotMap {
        SlotMap {
            instant: Instant::now(),
            nanos,
        }
    }

    /// The tokio instant of the limiter reading `nanos` (saturating).
    pub(crate) fn instant_at(&self, nanos: u64) -> Instant {
        match nanos.checked_sub(self.nanos) {
            Some(after) => saturating_add(self.instant, Duration::from_nanos(after)),
            None => self
                .instant
                .checked_sub(Duration::from_nanos(self.nanos - nanos))
                .unwrap_or(self.instant),
        }
    }
}

/// `base + by`, or the latest instant an `Instant` can hold if the sum
/// overflows (found by adding ever smaller steps; terminates because the
/// step halves down to zero).
fn saturating_add(base: Instant, by: Duration) -> Instant {
    if let Some(at) = base.checked_add(by) {
        return at;
    }
    let mut at = base;
    let mut step = by;
    while !step.is_zero() {
        match at.checked_add(step) {
            Some(later) => at = later,
            None => step /= 2,
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_are_inverse() {
        let clock = TokioClock::new();
        for nanos in [0, 1, 999_999, 1_000_000, 123_456_789_012, 1 << 60] {
            assert_eq!(clock.nanos_at(clock.instant_at(nanos)), nanos);
        }
    }

    #[test]
    fn instants_before_the_origin_read_zero() {
        let origin = Instant::now() + Duration::from_secs(10);
        let clock = TokioClock::with_origin(origin);
        assert_eq!(clock.now(), 0);
        assert_eq!(clock.nanos_at(origin - Duration::from_secs(1)), 0);
    }

    #[test]
    fn the_largest_reading_does_not_panic() {
        let clock = TokioClock::new();
        let far = clock.instant_at(u64::MAX);
        assert!(far > clock.origin());
        assert!(saturating_add(clock.origin(), Duration::MAX) >= far);
    }
}
