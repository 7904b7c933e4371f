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
//!
//! Files: this one (the limiter and its construction), `builder`, `curve`
//! (the curve and the state word's packing, pure functions), `acquire`
//! (the decision and its CAS loop); the blocking `take` is in `blocking`.

use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, DefaultClock, Epoch};
use crate::error::QuotaError;
use crate::identity::Owner;
use crate::quota::{MAX_SPAN, Quota, saturating_nanos};
use crate::state::AtomicState;
use crate::sync::AtomicU128;

mod acquire;
mod builder;
mod curve;

pub use builder::WarmUpBuilder;
use curve::{Curve, pack, unpack};

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
}
