//! [`CoarseClock`]: a cached time, refreshed about every millisecond by one
//! background thread, so that reading it is one relaxed atomic load.
//!
//! # Cost, resolution, monotonicity
//!
//! * **Cost**: one relaxed load of a shared cache line, about 2.5 ns a read
//!   on the reference machine (against 21–24 ns for [`TscClock`] and 38–40 ns
//!   for [`MonotonicClock`]; see `docs/benchmarks.md`). The updater thread
//!   wakes once per tick (1 ms by default) and writes the line, which costs
//!   readers on other cores one cache miss per tick.
//! * **Resolution**: the tick, plus however late the OS wakes the updater. On
//!   a loaded machine the reading may lag real time by several ticks.
//! * **Monotonicity**: strict. The value only ever moves forward (every
//!   write is a `fetch_max`), so every thread sees a non-decreasing sequence.
//!   It may *stand still* for a tick or longer.
//!
//! # Why standing still is safe
//!
//! Between refreshes the limiter sees no time pass, so it earns no permits:
//! a clock that stands still (or lags) can only make the limiter stricter,
//! never admit extra, because the decision uses `max(tat, now)` and a permit
//! is earned only as `now` advances. Measured in real time rather than in the
//! clock's time, the admitted count over any window can exceed the quota by at
//! most the permits earned during one lag (the clock catches up all at once),
//! which the burst already allows.
//!
//! [`sleep_until`](BlockingClock::sleep_until) sleeps on the precise OS clock
//! and then moves the cached value forward itself, so a blocked caller's slot
//! is never missed because the updater is late.
//!
//! [`TscClock`]: crate::clock::TscClock
//! [`MonotonicClock`]: crate::MonotonicClock

use alloc::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::{BlockingClock, Clock};
use crate::error::QuotaError;
use crate::sync::{AtomicU64, Ordering};

/// A cached time in nanoseconds since the clock was made, refreshed every
/// tick (1 ms by default) by a background thread. Clones share the cached
/// time and the thread; the thread ends within a tick of the last clone
/// being dropped.
///
/// The cheapest clock to read (one relaxed load), at the price of
/// millisecond resolution and one thread per clock: make one and clone it.
/// Its staleness never over-admits: while the cached time stands still the
/// limiter earns no permits, since the decision uses `max(tat, now)`.
///
/// # Examples
///
/// ```
/// use limiter_core::{clock::BlockingClock, Clock, clock::CoarseClock, Quota, RateLimiter};
///
/// let clock = CoarseClock::new()?;
/// clock.sleep_until(2_000_000);
/// assert!(clock.now() >= 2_000_000); // sleeping moves the cached time
///
/// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, clock.clone());
/// assert!(limiter.try_acquire().is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct CoarseClock {
    shared: Arc<Cached>,
}

/// The cached reading and the origin it counts from.
#[derive(Debug)]
struct Cached {
    /// Nanoseconds since `origin`, as of the last refresh. Only grows.
    nanos: CachePadded<AtomicU64>,
    origin: Instant,
}

impl Cached {
    /// Moves the cached time forward to the OS clock's reading; returns that
    /// reading.
    fn refresh(&self) -> u64 {
        let real = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: the clock is a single value and fetch_max keeps it
        // monotonic in its modification order; nothing is published with it.
        self.nanos.fetch_max(real, Ordering::Relaxed);
        real
    }
}

impl CoarseClock {
    /// The default refresh interval: 1 ms.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::clock::CoarseClock;
    ///
    /// assert_eq!(CoarseClock::TICK, Duration::from_millis(1));
    /// ```
    pub const TICK: Duration = Duration::from_millis(1);

    /// A clock whose origin is now, refreshed every [`TICK`](CoarseClock::TICK)
    /// (1 ms).
    ///
    /// # Errors
    ///
    /// The OS error if the updater thread cannot be started.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{Clock, clock::CoarseClock};
    ///
    /// let clock = CoarseClock::new()?;
    /// let (a, b) = (clock.now(), clock.now());
    /// assert!(b >= a); // never backwards; may stand still within a tick
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> std::io::Result<CoarseClock> {
        CoarseClock::with_tick(CoarseClock::TICK)
    }

    /// A clock whose origin is now, refreshed every `tick`: a shorter tick
    /// means finer resolution and more wake-ups of the updater thread. Any
    /// tick above zero is accepted; with a very long one only
    /// [`sleep_until`](BlockingClock::sleep_until) moves the time.
    ///
    /// # Errors
    ///
    /// An error of kind [`InvalidInput`](std::io::ErrorKind::InvalidInput)
    /// for a zero tick (the updater would never sleep), whose
    /// [`get_ref`](std::io::Error::get_ref) is
    /// [`QuotaError::InvalidParameter`] naming `tick`; the OS error if the
    /// updater thread cannot be started.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{clock::CoarseClock, QuotaError};
    ///
    /// let err = CoarseClock::with_tick(Duration::ZERO).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// assert!(matches!(
    ///     err.get_ref().and_then(|e| e.downcast_ref::<QuotaError>()),
    ///     Some(QuotaError::InvalidParameter { name: "tick", .. })
    /// ));
    /// ```
    pub fn with_tick(tick: Duration) -> std::io::Result<CoarseClock> {
        if tick.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                QuotaError::InvalidParameter {
                    name: "tick",
                    requirement: "longer than zero",
                },
            ));
        }
        let shared = Arc::new(Cached {
            nanos: CachePadded::new(AtomicU64::new(0)),
            origin: Instant::now(),
        });
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("limiter-coarse-clock".into())
            .spawn(move || update(&weak, tick))?;
        Ok(CoarseClock { shared })
    }

    /// The `Instant` this clock counts from.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// use limiter_core::clock::CoarseClock;
    ///
    /// let before = Instant::now();
    /// let clock = CoarseClock::new()?;
    /// assert!(clock.origin() >= before);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn origin(&self) -> Instant {
        self.shared.origin
    }
}

/// The updater thread: refreshes the cached time every `tick` until every
/// clone of the clock is gone.
fn update(cached: &Weak<Cached>, tick: Duration) {
    while let Some(cached) = cached.upgrade() {
        cached.refresh();
        drop(cached);
        std::thread::sleep(tick);
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> u64 {
        // Relaxed: a reading of one value; decisions synchronise through the
        // limiter's own state word, not through the clock.
        self.shared.nanos.load(Ordering::Relaxed)
    }
}

impl BlockingClock for CoarseClock {
    /// Sleeps on the OS clock until `deadline`, then moves the cached time to
    /// at least `deadline`, so `now() >= deadline` on return.
    fn sleep_until(&self, deadline: u64) {
        loop {
            if self.now() >= deadline {
                return;
            }
            let real = self.shared.refresh();
            if real >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_nanos(deadline - real));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_zero_tick_is_refused() {
        let err = CoarseClock::with_tick(Duration::ZERO).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let cause = err.get_ref().and_then(|e| e.downcast_ref::<QuotaError>());
        assert!(
            matches!(
                cause,
                Some(QuotaError::InvalidParameter { name: "tick", .. })
            ),
            "{err:?}"
        );
        // The longest tick is fine: only sleep_until then moves the time.
        let clock = CoarseClock::with_tick(Duration::MAX).unwrap();
        let deadline = clock.now() + 1_000;
        clock.sleep_until(deadline);
        assert!(clock.now() >= deadline);
    }

    #[test]
    fn sleep_until_moves_the_cached_time_to_the_deadline() {
        let clock = CoarseClock::with_tick(Duration::from_secs(3600)).unwrap();
        // With an hour-long tick only sleep_until moves the time.
        let deadline = clock.now() + 3_000_000;
        clock.sleep_until(deadline);
        assert!(clock.now() >= deadline);
    }

    #[test]
    fn every_thread_sees_a_non_decreasing_time() {
        let clock = CoarseClock::with_tick(Duration::from_micros(10)).unwrap();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let clock = clock.clone();
                std::thread::spawn(move || {
                    let mut last = clock.now();
                    // Miri interprets every read (and the updater's ticks):
                    // fewer reads there, the same property.
                    let reads = if cfg!(miri) { 5_000 } else { 100_000 };
                    for _ in 0..reads {
                        let now = clock.now();
                        assert!(now >= last, "{now} < {last}");
                        last = now;
                    }
                })
            })
            .collect();
        for reader in readers {
            reader.join().unwrap();
        }
    }

    #[test]
    fn the_updater_stops_holding_the_time_once_every_clone_is_dropped() {
        let clock = CoarseClock::new().unwrap();
        let weak = Arc::downgrade(&clock.shared);
        drop(clock.clone());
        assert!(weak.upgrade().is_some());
        drop(clock);
        // The updater holds a strong reference only while refreshing, which
        // ends within a tick; wait for that on the OS clock, bounded.
        let start = Instant::now();
        while weak.upgrade().is_some() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(CoarseClock::TICK);
        }
        assert!(weak.upgrade().is_none());
    }
}
