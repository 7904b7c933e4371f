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

use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, Epoch};
use crate::decision::{Decide, Denial, Grant, Policy};
use crate::error::{AcquireError, QuotaError};
use crate::identity::Owner;
use crate::quota::MAX_SPAN;
use crate::reservation::{Headroom, Reservation, Undo};
use crate::state::AtomicState;
use crate::sync::AtomicU128;

use crate::clock::DefaultClock;

/// The counts of the current window and the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    window: u64,
    prev: u32,
    curr: u32,
}

impl Counts {
    fn unpack(word: u128) -> Counts {
        Counts {
            window: (word >> 64) as u64,
            prev: (word >> 32) as u32,
            curr: word as u32,
        }
    }

    fn pack(self) -> u128 {
        (u128::from(self.window) << 64) | (u128::from(self.prev) << 32) | u128::from(self.curr)
    }

    /// The counts as seen at limiter time `now`, and the ns elapsed in their
    /// window.
    fn at(self, now: u64, w: u64) -> (Counts, u64) {
        let window = now / w;
        match window.checked_sub(self.window) {
            Some(0) => (self, now % w),
            Some(1) => (
                Counts {
                    window,
                    prev: self.curr,
                    curr: 0,
                },
                now % w,
            ),
            Some(_) => (
                Counts {
                    window,
                    prev: 0,
                    curr: 0,
                },
                now % w,
            ),
            // The clock stepped back before window k: the start of window k.
            None => (self, 0),
        }
    }

    /// Nanoseconds from limiter time `now` until the start of this window:
    /// zero unless the clock stepped back before it (then `at` reads it as
    /// that start).
    fn lag(self, now: u64, w: u64) -> u64 {
        (u128::from(self.window) * u128::from(w))
            .saturating_sub(u128::from(now))
            .try_into()
            .unwrap_or(u64::MAX)
    }
}

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

    /// The largest `n` that counts `c`, `e` ns into their window, admit.
    fn room(&self, c: Counts, e: u64) -> u32 {
        // Largest n with prev·(W − e) + (curr + n)·W ≤ limit·W.
        let w = u128::from(self.window);
        let room =
            (u128::from(self.limit) * w).saturating_sub(u128::from(c.prev) * (w - u128::from(e)));
        let n = (room / w).saturating_sub(u128::from(c.curr));
        // n ≤ limit, a u32.
        n as u32
    }

    /// Limiter time at the clock reading `now`, `None` past the range.
    #[inline]
    fn time(&self, now: u64) -> Option<u64> {
        let t = self.epoch.elapsed(now);
        (t <= self.epoch.limit()).then_some(t)
    }

    /// The decision at the clock reading `clock_now`.
    #[inline]
    fn acquire_at(&self, clock_now: u64, n: u32) -> Result<Reservation, AcquireError> {
        self.acquire_with_counts(clock_now, n).map(|(r, _)| r)
    }

    /// The decision at the clock reading `clock_now`, with the [`Headroom`]
    /// it left, computed from the counts its CAS wrote.
    fn acquire_with_headroom(
        &self,
        clock_now: u64,
        n: u32,
    ) -> Result<(Reservation, Headroom), AcquireError> {
        let (reservation, (next, e, lag)) = self.acquire_with_counts(clock_now, n)?;
        let remaining = self.room(next, e);
        let refill_in = if remaining >= self.limit {
            0
        } else {
            self.wait(next, e, remaining + 1).saturating_add(lag)
        };
        Ok((
            reservation,
            Headroom {
                remaining,
                refill_in: Duration::from_nanos(refill_in),
            },
        ))
    }

    /// The decision, with the counts it wrote, the ns into their window and
    /// the lag of a clock that stepped back (see [`Counts::lag`]).
    #[inline]
    fn acquire_with_counts(
        &self,
        clock_now: u64,
        n: u32,
    ) -> Result<(Reservation, (Counts, u64, u64)), AcquireError> {
        if n > self.limit {
            return Err(AcquireError::InsufficientCapacity {
                requested: n,
                burst: self.limit,
            });
        }
        let now = self
            .time(clock_now)
            .ok_or(AcquireError::TimeOutOfRange { now: clock_now })?;
        self.state.update(|word| {
            let (c, e) = Counts::unpack(word).at(now, self.window);
            match self.wait(c, e, n) {
                0 => {
                    // curr + n ≤ limit ≤ u32::MAX by the admission test.
                    let next = Counts {
                        curr: c.curr + n,
                        ..c
                    };
                    let undo = if n == 0 {
                        Undo::Nothing
                    } else {
                        Undo::Window { window: c.window }
                    };
                    Ok((
                        next.pack(),
                        (
                            Reservation {
                                permits: n,
                                // now ≤ limit: converts back without overflow.
                                ready_at: self.epoch.to_clock(now),
                                wait: 0,
                                owner: self.owner,
                                undo,
                            },
                            (next, e, c.lag(now, self.window)),
                        ),
                    ))
                }
                wait => {
                    let wait = wait.saturating_add(c.lag(now, self.window));
                    Err(AcquireError::RateLimited {
                        wait: Duration::from_nanos(wait),
                    })
                }
            }
        })
    }

    /// Nanoseconds from the decision until `n ≤ limit` permits conform,
    /// with counts `c` at `e` ns into their window (0 = now).
    fn wait(&self, c: Counts, e: u64, n: u32) -> u64 {
        let w = u128::from(self.window);
        let fits = |prev: u32, curr: u32, e: u128| {
            u128::from(prev) * (w - e) + (u128::from(curr) + u128::from(n)) * w
                <= u128::from(self.limit) * w
        };
        let e = u128::from(e);
        if fits(c.prev, c.curr, e) {
            return 0;
        }
        // The earliest offset `x` into a window with counts (prev, curr) at
        // which they fit: prev·(W − x) ≤ (limit − curr − n)·W, or None if not
        // within that window.
        let earliest = |prev: u32, curr: u32| -> Option<u128> {
            let room = u128::from(self.limit).checked_sub(u128::from(curr) + u128::from(n))?;
            if prev == 0 {
                return Some(0);
            }
            let x = w.saturating_sub(room * w / u128::from(prev));
            (x < w).then_some(x)
        };
        // This window, else the next (prev ← curr, curr ← 0), else the one
        // after, when nothing counts any more.
        let offset = match earliest(c.prev, c.curr) {
            Some(x) => x - e,
            None => match earliest(c.curr, 0) {
                Some(x) => (w - e) + x,
                None => 2 * w - e,
            },
        };
        // offset < 2·W ≤ 2^61, a u64.
        offset as u64
    }

    /// Takes `n` permits out of the count of `window`, if it still counts.
    fn cancel_in(&self, window: u64, n: u32) -> bool {
        // Past the range nothing is decided, so nothing needs giving back.
        let Some(now) = self.time(self.clock.now()) else {
            return false;
        };
        let refunded: Result<(), ()> = self.state.update(|word| {
            let (c, _) = Counts::unpack(word).at(now, self.window);
            let next = if c.window == window {
                Counts {
                    curr: c.curr.checked_sub(n).ok_or(())?,
                    ..c
                }
            } else if window.checked_add(1) == Some(c.window) {
                Counts {
                    prev: c.prev.checked_sub(n).ok_or(())?,
                    ..c
                }
            } else {
                return Err(());
            };
            Ok((next.pack(), ()))
        });
        refunded.is_ok()
    }
}

impl<C: Clock> SlidingWindow<C> {
    /// Grants `n` permits if they conform now, as a reservation that
    /// [`cancel`](SlidingWindow::cancel) can give back; `max_wait` is not
    /// used (see the module docs).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](SlidingWindow::try_acquire_n), even when the
    /// wait is within `max_wait`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, SlidingWindow};
    ///
    /// let window = SlidingWindow::with_clock(2, Duration::from_secs(1), ManualClock::new())?;
    /// let r = window.reserve_n(2, Duration::MAX)?;
    /// assert!(window.reserve_n(1, Duration::MAX).is_err()); // no future slot
    /// assert!(window.cancel(r));
    /// assert_eq!(window.available(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(&self, n: u32, _max_wait: Duration) -> Result<Reservation, AcquireError> {
        self.acquire_at(self.clock.now(), n)
    }

    /// Takes a reservation's permits back out of their window's count while
    /// that window still counts (the current or the previous one); refuses
    /// another limiter's reservation.
    pub fn cancel(&self, reservation: Reservation) -> bool {
        if reservation.owner != self.owner {
            return false;
        }
        match reservation.undo {
            Undo::Window { window } => self.cancel_in(window, reservation.permits),
            _ => false,
        }
    }
}

/// Exact headroom from the counts the decision wrote; grants only what
/// conforms now, as [`reserve_n`](SlidingWindow::reserve_n) does. The policy is `limit` per
/// `window`: a burst of `limit`, one permit per `window / limit`.
impl<C: Clock> Decide for SlidingWindow<C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        _key: &(),
        cost: u32,
        _max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let policy = Policy {
            burst: self.limit,
            interval: Duration::from_nanos(self.window / u64::from(self.limit)),
        };
        match self.acquire_with_headroom(self.clock.now(), cost) {
            Ok((ticket, headroom)) => Ok(Grant {
                wait: Duration::ZERO,
                ticket,
                headroom,
                policy,
            }),
            Err(error) => Err(Denial::refused(error, policy)),
        }
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        SlidingWindow::cancel(self, ticket)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    const W: u64 = 1_000;

    fn window(limit: u32) -> SlidingWindow<ManualClock> {
        SlidingWindow::with_clock(limit, Duration::from_nanos(W), ManualClock::new()).unwrap()
    }

    #[test]
    fn the_estimate_weighs_the_previous_window() {
        let s = window(10);
        let c = Counts {
            window: 1,
            prev: 8,
            curr: 2,
        };
        // At e = 500: 8·500 + (2 + n)·1000 ≤ 10,000  ⇔  n ≤ 4.
        assert_eq!(s.wait(c, 500, 4), 0);
        // n = 5 needs 8·(1000 − x) ≤ 3·1000 ⇔ x ≥ 625: 125 ns more.
        assert_eq!(s.wait(c, 500, 5), 125);
    }

    #[test]
    fn waits_cross_into_the_next_windows() {
        let s = window(10);
        // curr = 10: nothing fits in this window; next window prev = 10 and
        // n = 4 needs 10·(1000 − x) ≤ 6·1000 ⇔ x ≥ 400.
        assert_eq!(
            s.wait(
                Counts {
                    window: 0,
                    prev: 0,
                    curr: 10
                },
                200,
                4
            ),
            800 + 400
        );
        // n = 10 needs the window after, when nothing counts.
        assert_eq!(
            s.wait(
                Counts {
                    window: 0,
                    prev: 0,
                    curr: 10
                },
                200,
                10
            ),
            2 * W - 200
        );
    }

    #[test]
    fn a_window_index_at_the_top_refunds_nothing_elsewhere() {
        let s = window(10);
        let start = Counts {
            window: 0,
            prev: 3,
            curr: 2,
        };
        s.state
            .update::<(), ()>(|_| Ok((start.pack(), ())))
            .unwrap();
        // Window u64::MAX is neither window 0 nor the one before it.
        assert!(!s.cancel_in(u64::MAX, 1));
        assert_eq!(Counts::unpack(s.state.load()), start);
    }

    #[test]
    fn counts_age_by_window() {
        let c = Counts {
            window: 3,
            prev: 4,
            curr: 5,
        };
        assert_eq!(c.at(3_500, W), (c, 500));
        assert_eq!(
            c.at(4_100, W),
            (
                Counts {
                    window: 4,
                    prev: 5,
                    curr: 0
                },
                100
            )
        );
        assert_eq!(
            c.at(9_000, W),
            (
                Counts {
                    window: 9,
                    prev: 0,
                    curr: 0
                },
                0
            )
        );
        assert_eq!(
            c.at(1_200, W),
            (c, 0),
            "a backwards clock reads as the start of window k"
        );
    }
}
