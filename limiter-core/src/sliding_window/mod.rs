//! [`SlidingWindow`]: the two-counter estimate of a sliding window, as
//! Cloudflare runs it, in one 128-bit atomic word.
//!
//! Time is nanoseconds since the limiter's epoch (the clock's reading when
//! it was made), so any clock origin works, the Unix epoch included. It is
//! cut into windows of `W` ns; window `k` covers `[k·W, (k+1)·W)`.
//! With `prev` permits admitted in window `k − 1` and `curr` in window `k`,
//! at `e` ns into window `k`, the estimate of the last `W` ns is
//! `prev·(W − e)/W + curr`, and `n` permits are admitted iff
//!
//! ```text
//! prev·(W − e) + (curr + n)·W ≤ limit·W
//! ```
//!
//! in exact `u128` integer arithmetic (no floats, no rounding). The
//! estimate assumes the previous window's requests were spread evenly; the
//! true count of an arbitrary span of length `W` can exceed `limit` when
//! they were bunched at its end (by at most `prev`, so under `2·limit`).
//! What the limiter bounds exactly is the estimate, as Cloudflare's does.
//!
//! # State word
//!
//! ```text
//!  127                      64 63            32 31             0
//! +--------------------------+----------------+----------------+
//! | k: window index (time / W)|     prev       |      curr      |
//! +--------------------------+----------------+----------------+
//! ```
//!
//! The window index needs up to 60 bits (limiter time is at most
//! [`MAX_SPAN`], and `W` may be 1 ns): a wrapped index could not tell a long
//! idle from a clock that stepped back, and one of the two would then admit
//! too much. So the word is an `AtomicU128` (portable-atomic's `cmpxchg16b`
//! on x86-64), and the counts get 32 bits each: `limit` may be up to
//! `u32::MAX` ([`SlidingWindow::MAX_LIMIT`]).
//!
//! # Range
//!
//! Limiter time runs to `limit = min(MAX_SPAN, u64::MAX − origin)`: 36.5
//! years after construction, or the clock's last reading if that comes
//! first. A reading past it is refused with
//! [`AcquireError::TimeOutOfRange`], and nothing is available then.
//!
//! A clock reading in a window before `k` (a clock that stepped back) is
//! decided as if it were at the very start of window `k`: the strictest
//! reading, so a backwards clock never admits more.
//!
//! # Reservations
//!
//! The state cannot hold a future slot: counts exist only for the current
//! and previous windows. `reserve_n` therefore grants only what conforms now
//! (wait zero) and otherwise returns `RateLimited { wait }` with the exact
//! time until `n` would conform if nothing else were admitted, even when
//! that wait is within `max_wait`; waiting layers sleep that long and try
//! again. `cancel` takes the permits back out of the count of the window they
//! were admitted in, if that window is still the current or previous one,
//! and refuses a reservation that another limiter issued.
//! [`Reservation::ready_at`] is a reading of the limiter's clock.
//!
//! Files: this one (the type), `estimate` (the arithmetic on the counts),
//! `decide` (the CAS loop, cancelling, `Decide`).

use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, Epoch};
use crate::error::{AcquireError, QuotaError};
use crate::identity::Owner;
use crate::quota::MAX_SPAN;
use crate::state::AtomicState;
use crate::sync::AtomicU128;

use crate::clock::DefaultClock;
use estimate::Counts;

mod decide;
mod estimate;
#[cfg(all(test, not(loom)))]
mod tests;

/// A sliding-window counter: at most `limit` permits in any window of
/// length `window`, by the two-counter estimate (see the module docs).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{ManualClock, SlidingWindow};
///
/// let clock = ManualClock::new();
/// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone())?;
/// assert!(window.try_acquire_n(10).is_ok());
/// assert!(window.try_acquire().is_err());
/// // Half-way through the next window, half of the previous one still counts.
/// clock.advance(Duration::from_millis(1_500));
/// assert!(window.try_acquire_n(5).is_ok());
/// assert!(window.try_acquire().is_err());
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct SlidingWindow<C: Clock = DefaultClock> {
    state: CachePadded<AtomicState<AtomicU128>>,
    limit: u32,
    window: u64,
    epoch: Epoch,
    owner: Owner,
    clock: C,
}

impl SlidingWindow<DefaultClock> {
    /// At most `limit` permits per `window`, on a new [`DefaultClock`].
    ///
    /// # Errors
    ///
    /// As [`SlidingWindow::with_clock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::SlidingWindow;
    ///
    /// let window = SlidingWindow::new(100, Duration::from_secs(60))?;
    /// assert!(window.try_acquire_n(100).is_ok());
    /// assert!(window.try_acquire().is_err());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn new(limit: u32, window: Duration) -> Result<SlidingWindow<DefaultClock>, QuotaError> {
        SlidingWindow::with_clock(limit, window, DefaultClock::default())
    }
}

impl SlidingWindow<DefaultClock> {
    /// The largest `limit`: each count has 32 bits of the state word. The
    /// same for every clock; defined on the default clock's type so that
    /// `SlidingWindow::MAX_LIMIT` names it without a type annotation.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let clock = ManualClock::new();
    /// let window = SlidingWindow::with_clock(SlidingWindow::MAX_LIMIT, Duration::from_secs(1), clock)?;
    /// assert_eq!(window.available(), u32::MAX);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub const MAX_LIMIT: u32 = u32::MAX;
}

impl<C: Clock> SlidingWindow<C> {
    /// At most `limit` permits per `window`, reading `clock`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroRate`] for a zero limit, [`QuotaError::ZeroPeriod`]
    /// for a zero window, [`QuotaError::SpanTooLong`] for a window past
    /// [`MAX_SPAN`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let clock = ManualClock::new();
    /// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone())?;
    /// use limiter_core::QuotaError;
    /// assert_eq!(window.limit(), 10);
    /// let zero = SlidingWindow::with_clock(0, Duration::from_secs(1), clock);
    /// assert_eq!(zero.unwrap_err(), QuotaError::ZeroRate);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(
        limit: u32,
        window: Duration,
        clock: C,
    ) -> Result<SlidingWindow<C>, QuotaError> {
        if limit == 0 {
            return Err(QuotaError::ZeroRate);
        }
        if window.is_zero() {
            return Err(QuotaError::ZeroPeriod);
        }
        let w = match u64::try_from(window.as_nanos()) {
            Ok(w) if w <= MAX_SPAN => w,
            _ => {
                return Err(QuotaError::SpanTooLong {
                    period: window,
                    burst: 1,
                });
            }
        };
        let start = Counts {
            window: 0,
            prev: 0,
            curr: 0,
        };
        Ok(SlidingWindow {
            state: CachePadded::new(AtomicState::new(start.pack())),
            limit,
            window: w,
            epoch: Epoch::at(clock.now()),
            owner: Owner::new(),
            clock,
        })
    }

    /// The limit per window.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let clock = ManualClock::new();
    /// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone())?;
    /// assert_eq!(window.limit(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The window length.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let clock = ManualClock::new();
    /// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone())?;
    /// assert_eq!(window.window(), Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The clock this limiter reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let clock = ManualClock::new();
    /// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone())?;
    /// use limiter_core::Clock;
    /// clock.advance(Duration::from_millis(3));
    /// assert_eq!(window.clock().now(), 3_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Takes one permit if the estimate allows it now.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](SlidingWindow::try_acquire_n).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let clock = ManualClock::new();
    /// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone())?;
    /// for _ in 0..10 {
    ///     window.try_acquire()?;
    /// }
    /// assert!(window.try_acquire().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits if the estimate allows all of them now.
    ///
    /// # Errors
    ///
    /// [`AcquireError::InsufficientCapacity`] if `n > limit`;
    /// [`AcquireError::RateLimited`] with the exact wait until the estimate
    /// lets `n` through (if nothing else is admitted meanwhile). A denial
    /// writes nothing. [`AcquireError::TimeOutOfRange`] for a clock reading
    /// past the limiter's range (see the module docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let clock = ManualClock::new();
    /// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone())?;
    /// use limiter_core::AcquireError;
    /// window.try_acquire_n(10)?;
    /// // A full window: one more fits once a tenth of it has slid out of view.
    /// let wait = Duration::from_millis(1_100);
    /// assert_eq!(window.try_acquire_n(1), Err(AcquireError::RateLimited { wait }));
    /// assert!(matches!(window.try_acquire_n(11), Err(AcquireError::InsufficientCapacity { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.acquire_at(self.clock.now(), n).map(|_| ())
    }

    /// How many permits [`try_acquire_n`](SlidingWindow::try_acquire_n) could
    /// take now: exactly the largest `n` it would grant, 0 past the limiter's
    /// range. Changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let clock = ManualClock::new();
    /// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), clock.clone())?;
    /// window.try_acquire_n(10)?;
    /// assert_eq!(window.available(), 0);
    /// clock.advance(Duration::from_millis(1_500)); // half the last window still counts
    /// assert_eq!(window.available(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available(&self) -> u32 {
        let Some(now) = self.time(self.clock.now()) else {
            return 0;
        };
        let (c, e) = Counts::unpack(self.state.load()).at(now, self.window);
        self.room(c, e)
    }
}
