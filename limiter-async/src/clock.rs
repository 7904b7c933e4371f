//! [`TokioClock`]: the limiter's nanoseconds, on tokio's time scale.
//!
//! The core limiter keeps all time as `u64` nanoseconds since its clock's
//! origin. This clock's origin is a [`tokio::time::Instant`] captured when the
//! clock is made, and "now" is the time since then, read one of two ways,
//! chosen when the clock is made:
//!
//! * **Virtual time** (the `test-util` feature, the clock made with
//!   [`TokioClock::tokio_time`], or tokio's clock paused when the clock is
//!   made): `tokio::time::Instant::now()` minus the origin, read at each
//!   call. Paused time drives the limiter, exactly: its decisions and its
//!   timers see the same instants.
//! * **Real time** (every other case, i.e. production): the process-wide
//!   fast clock of [`crate::real_time`] (the CPU counter the core's default
//!   clock reads), shifted so that it read the same as tokio's clock when
//!   the clock was made. About a third of an `Instant::now` read.
//!
//! Invariants:
//!
//! * `now()` is monotonic in virtual time (tokio's `Instant` is); in real
//!   time it is as monotonic as the core's `TscClock` (a reading on another
//!   core may lag by nanoseconds, which only makes the limiter stricter). It
//!   saturates at `u64::MAX` ns (584 years), long after the core reports
//!   `TimeOutOfRange` (2^60 ns, 36.5 years).
//! * [`TokioClock::instant_at`] and [`TokioClock::nanos_at`] convert between
//!   the two time scales. In virtual time they are exact inverses
//!   (`nanos_at(instant_at(n)) == n` for every `n` an `Instant` can
//!   represent), and a slot at `n` ns is `sleep_until(instant_at(n))`. In
//!   real time they pair the two clocks at the call (`instant_at(n) =
//!   Instant::now() + (n − now())`), so no drift between the counter and
//!   the system clock can accumulate.
//! * With the `test-util` feature every clock is made in virtual time
//!   ([`TokioClock::tokio_time`]): it reads tokio's clock at each call and
//!   follows paused time whenever time is paused, however the clock was
//!   made. Without it, tokio's time is only paused if tokio's own
//!   `test-util` is enabled by another crate; a clock made while it is
//!   paused then reads tokio's clock, one made before does not.

use core::time::Duration;

use limiter_core::Clock;
use tokio::time::Instant;

use crate::real_time::{Counter, tokio_follows_real_time};

/// A [`Clock`] on tokio's time scale: nanoseconds since an origin
/// [`Instant`].
///
/// With the crate's `test-util` feature (enable it in `[dev-dependencies]`
/// where you would enable tokio's), it reads tokio's clock at every call,
/// so it follows paused time whenever time is paused, whether it was made
/// before or after `tokio::time::pause`: limiter tests run in exact
/// virtual time. Without the feature it reads the core's fast real-time
/// clock (the CPU counter), at a third of the cost of an `Instant` read, on
/// the same scale (unless made while tokio's time is paused). Copies share
/// the origin and the mode.
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
/// assert!(clock.reads_tokio()); // made in paused time
/// tokio::time::sleep(Duration::from_millis(3)).await;
/// assert_eq!(clock.now(), 3_000_000);
/// assert_eq!(clock.instant_at(3_000_000), tokio::time::Instant::now());
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokioClock {
    origin: Instant,
    /// `Some` in real time: the fast clock, on the scale of `origin`.
    fast: Option<Counter>,
}

impl TokioClock {
    /// A clock whose origin is tokio's "now" (the runtime's clock when
    /// called inside a runtime, the system's monotonic clock otherwise).
    /// It reads tokio's clock with the `test-util` feature (or if tokio's
    /// clock is paused now), the fast real-time clock otherwise.
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

    /// A clock counting from `origin`. Instants before it read as 0. Like
    /// [`new`](TokioClock::new), it reads tokio's clock with the `test-util`
    /// feature (or if tokio's clock is paused now), the fast real-time clock
    /// otherwise.
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
        if cfg!(feature = "test-util") || !tokio_follows_real_time() {
            return TokioClock::tokio_time(origin);
        }
        match Counter::since(origin) {
            Some(counter) => TokioClock {
                origin,
                fast: Some(counter),
            },
            // An origin still to come: rare enough to read tokio's clock,
            // which reads 0 until then.
            None => TokioClock::tokio_time(origin),
        }
    }

    /// A clock counting from `origin` that reads tokio's clock on every
    /// call, whatever the runtime's state: it follows `tokio::time::pause`,
    /// `advance` and `resume` at any point. Costs an `Instant` read per
    /// decision. With the `test-util` feature every clock is made so.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::TokioClock;
    /// use limiter_core::Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let clock = TokioClock::tokio_time(tokio::time::Instant::now());
    /// tokio::time::pause(); // after the clock was made
    /// let before = clock.now();
    /// tokio::time::advance(Duration::from_millis(2)).await;
    /// assert_eq!(clock.now() - before, 2_000_000);
    /// # }
    /// ```
    pub fn tokio_time(origin: Instant) -> TokioClock {
        TokioClock { origin, fast: None }
    }

    /// Whether this clock reads tokio's clock (virtual time: the
    /// `test-util` feature, made while time was paused, or by
    /// [`tokio_time`](TokioClock::tokio_time)) rather than the fast
    /// real-time clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::TokioClock;
    ///
    /// // Without `test-util`, outside a runtime: real time.
    /// # if !cfg!(feature = "test-util") {
    /// assert!(!TokioClock::new().reads_tokio());
    /// # }
    /// ```
    pub fn reads_tokio(&self) -> bool {
        self.fast.is_none()
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

    /// The tokio instant of the clock reading `nanos`: `origin + nanos` in
    /// virtual time; in real time `Instant::now() + (nanos − now())`, the
    /// two clocks paired at the call.
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
        match self.fast {
            None => saturating_add(self.origin, Duration::from_nanos(nanos)),
            Some(counter) => {
                let (now, reading) = (Instant::now(), i128::from(counter.now()));
                let ahead = i128::from(nanos) - reading;
                match u64::try_from(ahead) {
                    Ok(after) => saturating_add(now, Duration::from_nanos(after)),
                    Err(_) => {
                        let before = u64::try_from(-ahead).unwrap_or(u64::MAX);
                        now.checked_sub(Duration::from_nanos(before)).unwrap_or(now)
                    }
                }
            }
        }
    }

    /// The clock reading, in nanoseconds since the origin, at `instant`:
    /// 0 before the origin, saturating at `u64::MAX` (paired with
    /// `Instant::now()` at the call in real time, as in
    /// [`instant_at`](TokioClock::instant_at)).
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
        match self.fast {
            None => nanos_between(self.origin, instant),
            Some(counter) => {
                let (now, reading) = (Instant::now(), i128::from(counter.now()));
                let at = match instant.checked_duration_since(now) {
                    Some(ahead) => reading + i128::try_from(ahead.as_nanos()).unwrap_or(i128::MAX),
                    None => {
                        reading - i128::try_from((now - instant).as_nanos()).unwrap_or(i128::MAX)
                    }
                };
                u64::try_from(at.max(0)).unwrap_or(u64::MAX)
            }
        }
    }
}

/// `to − from` in nanoseconds: 0 if `to` is earlier, saturating.
fn nanos_between(from: Instant, to: Instant) -> u64 {
    let since = to.saturating_duration_since(from);
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

impl Default for TokioClock {
    fn default() -> TokioClock {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> u64 {
        match self.fast {
            Some(counter) => counter.now(),
            None => nanos_between(self.origin, Instant::now()),
        }
    }
}

/// The longest period [`interval`] ticks at: thirty years, tokio's own
/// horizon for a sleep (far below what any platform's `Instant` can add).
pub const MAX_PERIOD: Duration = Duration::from_secs(86_400 * 365 * 30);

/// tokio's [`interval`](tokio::time::interval) for a configured `period`,
/// held to at most [`MAX_PERIOD`]: tokio adds the period to an instant at
/// every tick, which panics ("overflow when adding duration to instant")
/// for a period no instant can hold, such as `Duration::MAX`. The first
/// tick completes at once, as tokio's.
///
/// # Panics
///
/// As tokio's, if `period` is zero.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut tick = limiter_async::interval(Duration::MAX);
/// tick.tick().await; // at once
/// assert_eq!(tick.period(), limiter_async::MAX_PERIOD);
/// # }
/// ```
pub fn interval(period: Duration) -> tokio::time::Interval {
    tokio::time::interval(period.min(MAX_PERIOD))
}

/// The deadline `after` from `from`, held to at most [`MAX_PERIOD`] away:
/// for a timer set from a configured duration, where `from + after` would
/// panic ("overflow when adding duration to instant") for `Duration::MAX`.
/// A deadline thirty years away is tokio's own "never" (its `sleep` holds
/// a longer one there too; a later instant would overflow in its timer).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_async::{MAX_PERIOD, deadline_after};
/// use tokio::time::Instant;
///
/// let now = Instant::now();
/// assert_eq!(deadline_after(now, Duration::from_secs(1)), now + Duration::from_secs(1));
/// assert_eq!(deadline_after(now, Duration::MAX), now + MAX_PERIOD);
/// ```
pub fn deadline_after(from: Instant, after: Duration) -> Instant {
    from + after.min(MAX_PERIOD)
}

/// `base + by`, or the latest instant an `Instant` can hold if the sum
/// overflows (found by adding ever smaller steps; terminates because the
/// step halves down to zero).
pub(crate) fn saturating_add(base: Instant, by: Duration) -> Instant {
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

    #[tokio::test(start_paused = true)]
    async fn conversions_are_inverse_in_virtual_time() {
        let clock = TokioClock::new();
        assert!(clock.reads_tokio());
        for nanos in [0, 1, 999_999, 1_000_000, 123_456_789_012, 1 << 60] {
            assert_eq!(clock.nanos_at(clock.instant_at(nanos)), nanos);
        }
    }

    #[test]
    fn instants_before_the_origin_read_zero() {
        let origin = Instant::now() + Duration::from_secs(10);
        for clock in [
            TokioClock::with_origin(origin),
            TokioClock::tokio_time(origin),
        ] {
            assert_eq!(clock.now(), 0);
            assert_eq!(clock.nanos_at(origin - Duration::from_secs(1)), 0);
            // A future origin reads tokio's clock even in real time.
            assert!(clock.reads_tokio());
        }
    }

    #[test]
    fn a_clock_made_outside_a_runtime_reads_on_the_origin_scale() {
        // Made outside a runtime: real time, unless `test-util` makes it
        // read tokio's clock (the system clock here). An origin a minute
        // back reads at least a minute (less if the machine booted less than
        // a minute ago), and converting back and forth stays on that side.
        // As far back as the monotonic clock reaches (it starts at boot).
        let now = Instant::now();
        let back = [60_000, 1_000, 1]
            .map(Duration::from_millis)
            .into_iter()
            .find(|d| now.checked_sub(*d).is_some())
            .expect("the monotonic clock is at least 1 ms past its start");
        let origin = now - back;
        let clock = TokioClock::with_origin(origin);
        assert_eq!(clock.reads_tokio(), cfg!(feature = "test-util"));
        assert!(clock.now() >= u64::try_from(back.as_nanos()).expect("fits"));
        assert!(clock.instant_at(0) <= Instant::now());
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
