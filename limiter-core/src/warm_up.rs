//! [`WarmUpLimiter`]: Guava's `SmoothWarmingUp` on one 128-bit atomic word.
//!
//! A cold limiter (new, or idle for long) hands out permits slowly and speeds
//! up to its stable rate as it is used, protecting a service whose caches and
//! connection pools need warming. With stable interval `s = t` (the quota's
//! period), cold factor `f` (default 3) and warm-up length `w`:
//!
//! ```text
//! cold interval   c = f·s
//! threshold       T = 0.5·w / s                     stored permits
//! maximum         M = T + 2·w / (s + c)              stored permits
//! slope           k = (c − s) / (M − T)              ns per permit per permit
//! interval(x)     = s            for x ≤ T           (cost of the x-th stored permit)
//!                 = s + k·(x − T) for T < x ≤ M
//! cool-down       d = w / M                          ns of idle per stored permit
//! ```
//!
//! The state is `(next_free, stored)`: the instant from which the next
//! request may proceed, and the stored permits (`0 ≤ stored ≤ M`). A request
//! for `n` permits at `now`:
//!
//! 1. refills: if `now > next_free`, `stored = min(M, stored + (now −
//!    next_free)/d)` and `next_free = now`;
//! 2. proceeds at `next_free` (at once if that is not in the future): the
//!    first permit on a cold limiter is immediate;
//! 3. pays for itself by delaying the *next* request: it spends
//!    `min(n, stored)` stored permits, costing the integral of `interval`
//!    over them, plus `s` per fresh permit, and `next_free` moves by that
//!    cost.
//!
//! From cold at 2 permits/s with a 4 s warm-up and factor 3 the successive
//! waits are 1.375 s, 1.125 s, 0.875 s, 0.625 s, then 0.5 s.
//!
//! # Time and range
//!
//! Time is nanoseconds since the limiter's epoch, the clock's reading when
//! it was made, so any clock origin works (the Unix epoch included);
//! [`Reservation::ready_at`] is converted back to a reading of the clock.
//! Limiter time runs to `limit = min(MAX_SPAN, u64::MAX − origin)`: a clock
//! reading past it, or a request whose cost would move `next_free` past it,
//! is refused with [`AcquireError::TimeOutOfRange`].
//!
//! # State word
//!
//! ```text
//!  127                       64 63                               0
//! +---------------------------+----------------------------------+
//! |  next_free: ns since epoch |  stored: fixed point, 32.32 bits  |
//! +---------------------------+----------------------------------+
//! ```
//!
//! Two fields that must change together and do not fit 64 bits: the word is
//! an `AtomicU128`, updated by the shared CAS loop. The arithmetic is in
//! `f64` like Guava's; costs are rounded up to the nanosecond, so rounding
//! never admits early. `M` may be at most 2^31 permits.

use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, Epoch};
use crate::decision::{Decide, Denial, Grant, Policy};
use crate::error::{AcquireError, QuotaError};
use crate::identity::Owner;
use crate::quota::{MAX_SPAN, Quota, saturating_nanos};
use crate::reservation::{Headroom, Reservation, Undo};
use crate::state::AtomicState;
use crate::sync::AtomicU128;

use crate::clock::DefaultClock;

const FRACTION: f64 = (1u64 << 32) as f64;

/// The warm-up curve, in nanoseconds and permits.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Curve {
    stable: f64,
    cold: f64,
    threshold: f64,
    max: f64,
    slope: f64,
    cool_down: f64,
}

impl Curve {
    fn new(period: u64, warm_up: u64, cold_factor: f64) -> Result<Curve, QuotaError> {
        if !(cold_factor.is_finite() && cold_factor >= 1.0) {
            return Err(QuotaError::InvalidParameter {
                name: "cold_factor",
                requirement: "a finite number ≥ 1",
            });
        }
        let (stable, w) = (period as f64, warm_up as f64);
        let cold = cold_factor * stable;
        let threshold = 0.5 * w / stable;
        let max = threshold + 2.0 * w / (stable + cold);
        if max > f64::from(1u32 << 31) {
            return Err(QuotaError::InvalidParameter {
                name: "warm_up",
                requirement: "short enough that warm_up / period stays under 2^31 stored permits",
            });
        }
        Ok(Curve {
            stable,
            cold,
            threshold,
            max,
            slope: (cold - stable) / (max - threshold),
            cool_down: w / max,
        })
    }

    /// The interval of the stored permit `p` permits above the threshold
    /// (Guava's `permitsToTime`).
    fn permits_to_time(&self, p: f64) -> f64 {
        self.stable + p * self.slope
    }

    /// The state `(next_free, stored)` of `word` as seen at limiter time
    /// `now`: idle time since `next_free` refilled into stored permits.
    fn refill(&self, word: u128, now: u64) -> (u64, f64) {
        let (next_free, stored) = unpack(word);
        if now > next_free {
            let stored = (stored + (now - next_free) as f64 / self.cool_down).min(self.max);
            (now, stored)
        } else {
            (next_free, stored)
        }
    }

    /// `next_free` and stored permits after a request for `n` permits that
    /// proceeds at `next_free` with `stored` permits: it spends
    /// `min(n, stored)` of them and pays the stable interval for the rest.
    /// Saturates at `u64::MAX`, which is out of every range.
    fn spend(&self, next_free: u64, stored: f64, n: u32) -> (u64, f64) {
        let spend = f64::from(n).min(stored);
        let cost = self.stored_cost(stored, spend) + self.stable * (f64::from(n) - spend);
        (next_free.saturating_add(ceil_nanos(cost)), stored - spend)
    }

    /// Nanoseconds that spending `take` of `stored` permits costs (Guava's
    /// `storedPermitsToWaitTime`, in the same order of operations): the
    /// integral of the interval from `stored − take` to `stored`.
    fn stored_cost(&self, stored: f64, mut take: f64) -> f64 {
        let above = stored - self.threshold;
        let mut cost = 0.0;
        if above > 0.0 {
            let take_above = above.min(take);
            let length = self.permits_to_time(above) + self.permits_to_time(above - take_above);
            cost = take_above * length / 2.0;
            take -= take_above;
        }
        cost + self.stable * take
    }
}

/// `(next_free, stored)` packed into the 128-bit word.
fn pack(next_free: u64, stored: f64) -> u128 {
    // `as` saturates; stored ≤ 2^31, so stored·2^32 < 2^63.
    (u128::from(next_free) << 64) | u128::from((stored * FRACTION) as u64)
}

fn unpack(word: u128) -> (u64, f64) {
    ((word >> 64) as u64, (word as u64) as f64 / FRACTION)
}

/// Rounds a non-negative cost up to whole nanoseconds, saturating.
fn ceil_nanos(x: f64) -> u64 {
    let floor = x as u64;
    if (floor as f64) < x {
        floor.saturating_add(1)
    } else {
        floor
    }
}

/// A rate limiter that starts cold and warms up to its quota's rate, with
/// Guava's `SmoothWarmingUp` semantics (see the module docs for the exact
/// formulas).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{Clock, ManualClock, Quota, WarmUpLimiter};
///
/// let clock = ManualClock::new();
/// let quota = Quota::per_second(2)?;
/// let limiter = WarmUpLimiter::with_clock(quota, Duration::from_secs(4), clock.clone())?;
/// let waits: Vec<Duration> = (0..6)
///     .map(|_| limiter.reserve_n(1, Duration::MAX).unwrap().wait())
///     .collect();
/// let ms = |m| Duration::from_millis(m);
/// assert_eq!(waits, [ms(0), ms(1375), ms(2500), ms(3375), ms(4000), ms(4500)]);
///
/// // `take` sleeps through the clock; a manual clock simply moves on.
/// limiter.take()?;
/// assert_eq!(clock.now(), 5_000_000_000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct WarmUpLimiter<C: Clock = DefaultClock> {
    state: CachePadded<AtomicState<AtomicU128>>,
    curve: Curve,
    epoch: Epoch,
    owner: Owner,
    clock: C,
}

impl WarmUpLimiter<DefaultClock> {
    /// The default cold factor: the cold interval is 3 times the stable one.
    /// Defined on the default clock's type so that
    /// `WarmUpLimiter::DEFAULT_COLD_FACTOR` names it without a type
    /// annotation; it is the same for every clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::WarmUpLimiter;
    ///
    /// assert_eq!(WarmUpLimiter::DEFAULT_COLD_FACTOR, 3.0);
    /// ```
    pub const DEFAULT_COLD_FACTOR: f64 = 3.0;

    /// A cold limiter warming up to `quota` over `warm_up`, cold factor 3, on
    /// a new [`DefaultClock`].
    ///
    /// # Errors
    ///
    /// As [`WarmUpLimiter::with_clock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{Quota, WarmUpLimiter};
    ///
    /// let limiter = WarmUpLimiter::new(Quota::per_second(100)?, Duration::from_secs(1))?;
    /// assert!(limiter.try_acquire().is_ok()); // the first request never waits
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn new(quota: Quota, warm_up: Duration) -> Result<WarmUpLimiter<DefaultClock>, QuotaError> {
        WarmUpLimiter::with_clock(quota, warm_up, DefaultClock::default())
    }

    /// A builder for a limiter warming up to `quota` over `warm_up`, on a new
    /// [`DefaultClock`] unless [`clock`](WarmUpBuilder::clock) says
    /// otherwise; the options are the cold factor and the clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpLimiter};
    ///
    /// let limiter = WarmUpLimiter::builder(Quota::per_second(2)?, Duration::from_secs(4))
    ///     .cold_factor(3.0)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(limiter.max_permits(), 8.0); // w / (2·stable) + 2·w / (stable + cold) = 4 + 4
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn builder(quota: Quota, warm_up: Duration) -> WarmUpBuilder<DefaultClock> {
        WarmUpBuilder::with_clock(quota, warm_up, DefaultClock::default())
    }
}

/// Builds a [`WarmUpLimiter`] with a cold factor other than
/// [`DEFAULT_COLD_FACTOR`](WarmUpLimiter::DEFAULT_COLD_FACTOR); see
/// [`WarmUpLimiter::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct WarmUpBuilder<C> {
    quota: Quota,
    warm_up: Duration,
    cold_factor: f64,
    clock: C,
}

impl<C: Clock> WarmUpBuilder<C> {
    /// A builder for a limiter warming up to `quota` over `warm_up`, reading
    /// `clock` (the constructor without `std`).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpBuilder, WarmUpLimiter};
    ///
    /// let limiter =
    ///     WarmUpBuilder::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())
    ///         .build()?;
    /// let plain = WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())?;
    /// assert_eq!(limiter.max_permits(), plain.max_permits());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn with_clock(quota: Quota, warm_up: Duration, clock: C) -> WarmUpBuilder<C> {
        WarmUpBuilder {
            quota,
            warm_up,
            cold_factor: WarmUpLimiter::DEFAULT_COLD_FACTOR,
            clock,
        }
    }

    /// The cold interval as a multiple of the stable one (default
    /// [`DEFAULT_COLD_FACTOR`](WarmUpLimiter::DEFAULT_COLD_FACTOR), 3):
    /// finite and at least 1, checked by [`build`](WarmUpBuilder::build).
    /// 1 means no warm-up at all.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, WarmUpBuilder};
    ///
    /// let limiter = WarmUpBuilder::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())
    ///     .cold_factor(1.0)
    ///     .build()?;
    /// assert!(limiter.try_acquire().is_ok());
    /// // No warm-up: the second request waits the stable interval, 500 ms.
    /// let wait = limiter.reserve_n(1, Duration::MAX)?.wait();
    /// assert_eq!(wait, Duration::from_millis(500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cold_factor(mut self, cold_factor: f64) -> WarmUpBuilder<C> {
        self.cold_factor = cold_factor;
        self
    }

    /// Reads `clock` instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{Clock, ManualClock, Quota, WarmUpLimiter};
    ///
    /// let limiter = WarmUpLimiter::builder(Quota::per_second(2)?, Duration::from_secs(4))
    ///     .clock(ManualClock::starting_at(5))
    ///     .build()?;
    /// assert_eq!(limiter.clock().now(), 5);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> WarmUpBuilder<C2> {
        WarmUpBuilder {
            quota: self.quota,
            warm_up: self.warm_up,
            cold_factor: self.cold_factor,
            clock,
        }
    }

    /// The limiter, cold.
    ///
    /// # Errors
    ///
    /// As [`WarmUpLimiter::with_clock`], and
    /// [`QuotaError::InvalidParameter`] naming `cold_factor` unless it is
    /// finite and at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, QuotaError, WarmUpBuilder};
    ///
    /// let built = WarmUpBuilder::with_clock(Quota::per_second(2)?, Duration::from_secs(4), ManualClock::new())
    ///     .cold_factor(0.5)
    ///     .build();
    /// assert!(matches!(built, Err(QuotaError::InvalidParameter { name: "cold_factor", .. })));
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn build(self) -> Result<WarmUpLimiter<C>, QuotaError> {
        WarmUpLimiter::assemble(self.quota, self.warm_up, self.cold_factor, self.clock)
    }
}

impl<C: Clock> WarmUpLimiter<C> {
    /// A cold limiter warming up to `quota` over `warm_up`, cold factor 3,
    /// reading `clock`. The quota's period is the stable interval; stored
    /// permits play the role of the burst, so the quota's burst must be 1.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] for a burst other than 1, a zero
    /// `warm_up`, or a warm-up so long that more than 2^31 permits would be
    /// stored; [`QuotaError::SpanTooLong`] for a warm-up past
    /// [`MAX_SPAN`].
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
    /// assert_eq!(limiter.stored_permits(), 8.0); // cold
    /// assert!(WarmUpLimiter::with_clock(Quota::per_second(2)?, Duration::ZERO, clock).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(
        quota: Quota,
        warm_up: Duration,
        clock: C,
    ) -> Result<WarmUpLimiter<C>, QuotaError> {
        WarmUpLimiter::assemble(quota, warm_up, WarmUpLimiter::DEFAULT_COLD_FACTOR, clock)
    }

    fn assemble(
        quota: Quota,
        warm_up: Duration,
        cold_factor: f64,
        clock: C,
    ) -> Result<WarmUpLimiter<C>, QuotaError> {
        if quota.burst() != 1 {
            return Err(QuotaError::InvalidParameter {
                name: "quota.burst",
                requirement: "1: the warm-up limiter's stored permits play the burst's role",
            });
        }
        let w = saturating_nanos(warm_up);
        if w == 0 {
            return Err(QuotaError::InvalidParameter {
                name: "warm_up",
                requirement: "longer than zero",
            });
        }
        if w > MAX_SPAN {
            return Err(QuotaError::SpanTooLong {
                period: warm_up,
                burst: 1,
            });
        }
        let curve = Curve::new(quota.period_nanos(), w, cold_factor)?;
        Ok(WarmUpLimiter {
            state: CachePadded::new(AtomicState::new(pack(0, curve.max))),
            curve,
            epoch: Epoch::at(clock.now()),
            owner: Owner::new(),
            clock,
        })
    }

    /// Stored permits now (after the refill idle time has earned), between 0
    /// and [`max_permits`](WarmUpLimiter::max_permits).
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
    /// limiter.try_acquire()?;
    /// assert_eq!(limiter.stored_permits(), 7.0);
    /// clock.advance(Duration::from_millis(500)); // refills at w / max = 500 ms a permit
    /// assert_eq!(limiter.stored_permits(), 7.0); // the first 1.375 s repay the cost
    /// clock.advance(Duration::from_secs(10));
    /// assert_eq!(limiter.stored_permits(), 8.0); // capped
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stored_permits(&self) -> f64 {
        let (next_free, stored) = unpack(self.state.load());
        let now = self.epoch.elapsed(self.clock.now());
        if now > next_free {
            (stored + (now - next_free) as f64 / self.curve.cool_down).min(self.curve.max)
        } else {
            stored
        }
    }

    /// The most permits a fully cold limiter stores.
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
    /// assert_eq!(limiter.max_permits(), 8.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_permits(&self) -> f64 {
        self.curve.max
    }

    /// The clock this limiter reads.
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
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(limiter.clock().now(), 1_000_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Takes one permit if a request may proceed now.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](WarmUpLimiter::try_acquire_n).
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
    /// use limiter_core::AcquireError;
    /// limiter.try_acquire()?;
    /// let wait = Duration::from_millis(1375); // a cold permit
    /// assert_eq!(limiter.try_acquire(), Err(AcquireError::RateLimited { wait }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits if a request may proceed now; their cost delays the
    /// next request.
    ///
    /// # Errors
    ///
    /// [`AcquireError::RateLimited`] with the wait until a request may
    /// proceed (writes nothing); [`AcquireError::TimeOutOfRange`] for a clock
    /// reading past the limiter's range, or a cost that would end past it
    /// (see the module docs).
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
    /// limiter.try_acquire_n(3)?; // any n proceeds now; the cost delays the next
    /// assert_eq!(limiter.available(), 0);
    /// assert_eq!(limiter.stored_permits(), 5.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.reserve_n(n, Duration::ZERO).map(|_| ())
    }

    /// Claims the next slot for `n` permits if it comes within `max_wait`;
    /// fails at once, consuming nothing, otherwise. Slots are handed out in
    /// CAS order.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](WarmUpLimiter::try_acquire_n), with the wait
    /// compared to `max_wait`.
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
    /// limiter.try_acquire()?;
    /// assert!(limiter.reserve_n(1, Duration::from_secs(1)).is_err()); // needs 1.375 s
    /// let r = limiter.reserve_n(1, Duration::from_secs(2))?;
    /// assert_eq!(r.wait(), Duration::from_millis(1375));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        self.reserve_with_word(n, max_wait).map(|(r, _)| r)
    }

    /// [`reserve_n`](WarmUpLimiter::reserve_n), with the [`Headroom`] read
    /// from the word its CAS wrote: 0 remaining and the time until the next
    /// request may proceed while one must wait; otherwise what
    /// [`available`](WarmUpLimiter::available) would say on that word, and
    /// no refill to wait for.
    fn reserve_with_headroom(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, Headroom), AcquireError> {
        let (reservation, (word, now, limit)) = self.reserve_with_word(n, max_wait)?;
        let (next_free, stored) = self.curve.refill(word, now);
        let headroom = if next_free > now {
            Headroom {
                remaining: 0,
                refill_in: Duration::from_nanos(next_free - now),
            }
        } else {
            Headroom {
                remaining: self.available_from(next_free, stored, limit),
                refill_in: Duration::ZERO,
            }
        };
        Ok((reservation, headroom))
    }

    /// The decision, with the word it left, its limiter time and the limit.
    #[inline]
    fn reserve_with_word(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, (u128, u64, u64)), AcquireError> {
        let clock_now = self.clock.now();
        let out_of_range = AcquireError::TimeOutOfRange { now: clock_now };
        let now = self.epoch.elapsed(clock_now);
        let limit = self.epoch.limit();
        if now > limit {
            return Err(out_of_range);
        }
        let max_wait = saturating_nanos(max_wait);
        let c = self.curve;
        self.state.update(|word| {
            let (next_free, stored) = c.refill(word, now);
            let wait = next_free - now;
            if wait > max_wait {
                return Err(AcquireError::RateLimited {
                    wait: Duration::from_nanos(wait),
                });
            }
            if n == 0 {
                let r = Reservation {
                    permits: 0,
                    ready_at: clock_now,
                    wait: 0,
                    owner: self.owner,
                    undo: Undo::Nothing,
                };
                return Ok((word, (r, (word, now, limit))));
            }
            let (after_free, left) = c.spend(next_free, stored, n);
            if after_free > limit {
                return Err(out_of_range);
            }
            let after = pack(after_free, left);
            let undo = Undo::WideWord {
                before: word,
                after,
            };
            Ok((
                after,
                (
                    Reservation {
                        permits: n,
                        // next_free ≤ limit (the state only holds times in
                        // range): converts back without overflow.
                        ready_at: self.epoch.to_clock(next_free),
                        wait,
                        owner: self.owner,
                        undo,
                    },
                    (after, now, limit),
                ),
            ))
        })
    }

    /// How many permits [`try_acquire_n`](WarmUpLimiter::try_acquire_n)
    /// could take now: exactly the largest `n` it would grant. Changes
    /// nothing.
    ///
    /// A request that may proceed takes any number of permits (their cost
    /// delays the next request), so this is 0 while a request must wait and
    /// otherwise the most permits whose cost still ends within the limiter's
    /// range (`u32::MAX` when all of them fit).
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
    /// assert!(limiter.available() > 1_000_000); // every n whose cost ends in range
    /// limiter.try_acquire()?;
    /// assert_eq!(limiter.available(), 0);
    /// clock.advance(Duration::from_millis(1375));
    /// assert!(limiter.available() > 1_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available(&self) -> u32 {
        let now = self.epoch.elapsed(self.clock.now());
        let limit = self.epoch.limit();
        if now > limit {
            return 0;
        }
        let (next_free, stored) = self.curve.refill(self.state.load(), now);
        if next_free > now {
            return 0;
        }
        self.available_from(next_free, stored, limit)
    }

    /// What [`available`](WarmUpLimiter::available) says of a state that may
    /// proceed now (`next_free ≤ now`) with `stored` permits.
    fn available_from(&self, next_free: u64, stored: f64, limit: u64) -> u32 {
        let fits = |n: u32| self.curve.spend(next_free, stored, n).0 <= limit;
        if fits(u32::MAX) {
            return u32::MAX;
        }
        // The cost only grows with n: the largest n that fits, by bisection
        // over [lo, hi) with fits(lo) and !fits(hi). fits(0): 0 costs nothing.
        let (mut lo, mut hi) = (0u32, u32::MAX);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Gives back a reservation if nothing has been decided since: the state
    /// is restored exactly as before it. Returns false for a reservation
    /// that another limiter issued.
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
    /// let r = limiter.reserve_n(1, Duration::MAX)?;
    /// assert!(limiter.cancel(r));
    /// assert_eq!(limiter.stored_permits(), 8.0); // as before it
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, reservation: Reservation) -> bool {
        if reservation.owner != self.owner {
            return false;
        }
        match reservation.undo {
            Undo::WideWord { before, after } => self.state.replace_if(after, before),
            _ => false,
        }
    }
}

impl<C: crate::clock::BlockingClock> WarmUpLimiter<C> {
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
            self.clock.sleep_until(r.ready_at);
        }
        Ok(())
    }
}

/// Headroom from the word the decision wrote. The policy is one request at
/// a time at the stable interval: a request proceeds when the previous
/// one's cost has passed.
impl<C: Clock> Decide for WarmUpLimiter<C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        _key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let policy = Policy {
            burst: 1,
            // The stable interval is a whole number of ns (the quota's t).
            interval: Duration::from_nanos(self.curve.stable as u64),
        };
        match self.reserve_with_headroom(cost, max_wait) {
            Ok((ticket, headroom)) => Ok(Grant {
                wait: ticket.wait(),
                ticket,
                headroom,
                policy,
            }),
            Err(error) => Err(Denial::refused(error, policy)),
        }
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        WarmUpLimiter::cancel(self, ticket)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn guavas_curve_for_two_per_second_and_four_seconds() {
        let c = Curve::new(500_000_000, 4_000_000_000, 3.0).unwrap();
        assert_eq!((c.threshold, c.max, c.cold), (4.0, 8.0, 1.5e9));
        assert_eq!(c.slope, 2.5e8);
        assert_eq!(c.stored_cost(8.0, 1.0), 1.375e9);
        assert_eq!(c.stored_cost(5.0, 2.0), 0.625e9 + 0.5e9);
        assert_eq!(c.cool_down, 5e8);
    }

    #[test]
    fn the_word_round_trips() {
        assert_eq!(unpack(pack(123, 7.25)), (123, 7.25));
        assert_eq!(ceil_nanos(2.0), 2);
        assert_eq!(ceil_nanos(2.000_001), 3);
    }
}
