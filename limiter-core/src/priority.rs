//! [`PriorityLimiter`]: priority tiers sharing one GCRA state.
//!
//! Separate limiters per class would let low-priority traffic take what
//! high-priority traffic needs. Here every class decides on the *same* state
//! word as a [`RateLimiter`], but class `i` may admit only while it leaves at
//! least `(1 − shares[i])·burst` permits of the burst unused:
//!
//! ```text
//! headroom_i = ceil((1 − shares[i]) · burst)         permits kept for higher classes
//! usable_i   = burst − headroom_i
//! admit n    iff  max(tat, now) + n·t ≤ now + usable_i·t
//! ```
//!
//! `shares[0]` must be 1.0 (the highest class may use the whole burst) and
//! shares may not increase with the class number. With burst 10 and shares
//! `[1.0, 0.5]`, an idle limiter lets class 1 take 5 and class 0 the other 5;
//! once class 1 has taken 5 it is denied while class 0 still gets 5.
//!
//! The headroom is exact, rounded up: `usable_i = ⌊shares[i] · burst⌋` in
//! integer arithmetic, so a lower class never gets more than its share and
//! any share below 1.0 leaves class 0 at least one permit. A share written
//! as a decimal of at most nine places (0.3, 0.7, 0.999999999) is that
//! decimal, held in parts per billion (usable: one multiply and a division
//! by a constant); any other share is its exact binary value, a 53-bit
//! mantissa and a shift (usable: one multiply and a shift). Either way the
//! hot path stays in integers.
//!
//! # Starvation freedom of class 0
//!
//! A lower class can only move `tat` to at most `now + usable_i·t`, so at any
//! instant it leaves class 0 at least `headroom_i` permits. Therefore only
//! class 0 may reserve *future* slots: a lower class reserving ahead would
//! push `tat` past `now + burst·t` and make class 0 wait behind it. A lower
//! class's `reserve_n` grants only what conforms now and otherwise returns
//! `RateLimited { wait }` with the exact wait (if nothing else is admitted);
//! waiting layers sleep that long and try again.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::time::Duration;

use crate::clock::Clock;
use crate::decision::{Decide, Denial, Grant};
use crate::error::{AcquireError, QuotaError};
use crate::gcra::Params;
use crate::limiter::{Ask, RateLimiter};
use crate::quota::{Quota, saturating_nanos};
use crate::reservation::Reservation;

use crate::clock::DefaultClock;

/// 1.0 in parts per billion.
const ONE: u64 = 1_000_000_000;

/// A class's share of the burst, held exactly.
///
/// A share that is a decimal of at most nine places (0.3, 0.999999999) is
/// that decimal, in parts per billion; any other share is its exact binary
/// value `mantissa · 2^-shift`. Either way `usable` is `⌊share · burst⌋`
/// exactly, so `headroom = burst − usable = ⌈(1 − share) · burst⌉` exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Share {
    /// `ppb / 10^9`, with `ppb ≤ 10^9`.
    Decimal(u64),
    /// `mantissa · 2^-shift`, with `mantissa < 2^53` and `shift ≥ 53`.
    Binary { mantissa: u64, shift: u32 },
}

impl Share {
    /// The share of `share` ∈ (0, 1] (checked by the caller).
    fn of(share: f64) -> Share {
        // share ≤ 1.0, so share·10^9 ≤ 10^9. Rounded half away from zero,
        // as `f64::round` (std only) does: `as` truncates, and the fraction
        // `x − trunc(x)` is exact for x < 2^52.
        let x = share * ONE as f64;
        let whole = x as u64;
        let ppb = if x - whole as f64 >= 0.5 {
            whole + 1
        } else {
            whole
        };
        // Division is correctly rounded: equality holds exactly when `share`
        // is the double nearest to the decimal ppb / 10^9, i.e. when it was
        // written as that decimal.
        if ppb as f64 / ONE as f64 == share {
            return Share::Decimal(ppb);
        }
        let bits = share.to_bits();
        let exponent = ((bits >> 52) & 0x7ff) as u32;
        let fraction = bits & ((1 << 52) - 1);
        // A double is fraction·2^-1074 when subnormal, else
        // (2^52 + fraction)·2^(exponent − 1075); share < 1.0 here, so
        // exponent ≤ 1022 and shift ≥ 53.
        let (mantissa, shift) = if exponent == 0 {
            (fraction, 1074)
        } else {
            (fraction | 1 << 52, 1075 - exponent)
        };
        Share::Binary { mantissa, shift }
    }

    /// Permits of `burst` that a class with this share may use:
    /// `⌊share · burst⌋`.
    #[inline]
    fn usable(self, burst: u32) -> u32 {
        match self {
            // ppb · burst ≤ 10^9 · 2^32 < 2^62: no overflow; the quotient is
            // at most burst.
            Share::Decimal(ppb) => (ppb * u64::from(burst) / ONE) as u32,
            // mantissa · burst < 2^85 fits u128; shifting by 128 or more
            // would be an overflow, and any shift past 85 gives 0 anyway.
            Share::Binary { mantissa, shift } => {
                ((u128::from(mantissa) * u128::from(burst)) >> shift.min(127)) as u32
            }
        }
    }
}

/// A rate limiter whose burst is shared by priority classes, class 0 the
/// highest (see the module docs).
///
/// # Examples
///
/// ```
/// use limiter_core::{ManualClock, PriorityLimiter, Quota};
///
/// let quota = Quota::per_second(10)?.with_burst(10)?;
/// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], ManualClock::new())?;
/// assert!(limiter.try_acquire_n(1, 5).is_ok());
/// assert!(limiter.try_acquire_n(1, 1).is_err()); // class 1 has used its half
/// assert!(limiter.try_acquire_n(0, 5).is_ok()); // class 0 still gets the rest
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct PriorityLimiter<C: Clock = DefaultClock> {
    limiter: RateLimiter<C>,
    shares: Vec<Share>,
}

#[cfg(feature = "std")]
impl PriorityLimiter<DefaultClock> {
    /// Classes with the given `shares` of `quota`'s burst, on a new
    /// [`DefaultClock`].
    ///
    /// # Errors
    ///
    /// As [`PriorityLimiter::with_clock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{PriorityLimiter, Quota};
    ///
    /// let limiter = PriorityLimiter::new(Quota::per_second(10)?.with_burst(10)?, &[1.0, 0.5])?;
    /// assert_eq!(limiter.classes(), 2);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn new(quota: Quota, shares: &[f64]) -> Result<PriorityLimiter<DefaultClock>, QuotaError> {
        PriorityLimiter::with_clock(quota, shares, DefaultClock::default())
    }
}

impl<C: Clock> PriorityLimiter<C> {
    /// Classes with the given `shares` of `quota`'s burst, reading `clock`.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] when `shares` is empty, `shares[0]`
    /// is not 1.0, a share is not in (0, 1], shares increase with the class
    /// number, or a share is so small that its class could never admit a
    /// permit under this burst.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// use limiter_core::QuotaError;
    /// assert_eq!(limiter.classes(), 2);
    /// let rising = PriorityLimiter::with_clock(quota, &[1.0, 0.5, 0.8], clock);
    /// assert!(matches!(rising, Err(QuotaError::InvalidParameter { name: "shares", .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(
        quota: Quota,
        shares: &[f64],
        clock: C,
    ) -> Result<PriorityLimiter<C>, QuotaError> {
        let invalid = |requirement| {
            Err(QuotaError::InvalidParameter {
                name: "shares",
                requirement,
            })
        };
        if shares.first() != Some(&1.0) {
            return invalid("non-empty, starting with 1.0 for class 0");
        }
        if shares
            .iter()
            .any(|s| !(s.is_finite() && *s > 0.0 && *s <= 1.0))
        {
            return invalid("each in (0, 1]");
        }
        if shares.windows(2).any(|w| w[1] > w[0]) {
            return invalid("non-increasing with the class number");
        }
        let shares: Vec<Share> = shares.iter().map(|&s| Share::of(s)).collect();
        if shares.iter().any(|s| s.usable(quota.burst()) == 0) {
            return invalid("large enough that share · burst is at least one permit");
        }
        Ok(PriorityLimiter {
            limiter: RateLimiter::with_clock(quota, clock),
            shares,
        })
    }

    /// How many classes there are.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// assert_eq!(limiter.classes(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn classes(&self) -> usize {
        self.shares.len()
    }

    fn share(&self, class: usize, n: u32) -> Result<Share, AcquireError> {
        self.shares
            .get(class)
            .copied()
            .ok_or(AcquireError::UnknownClass {
                class,
                classes: self.shares.len(),
                requested: n,
            })
    }

    /// Takes `n` permits for `class` if all are available to it now.
    ///
    /// # Errors
    ///
    /// [`AcquireError::UnknownClass`] for a class past the last;
    /// [`AcquireError::InsufficientCapacity`] if `n` exceeds the class's
    /// usable burst; [`AcquireError::RateLimited`] with the exact wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// use limiter_core::AcquireError;
    /// limiter.try_acquire_n(1, 5)?;
    /// assert!(limiter.try_acquire_n(1, 1).is_err()); // class 1 has used its half
    /// limiter.try_acquire_n(0, 5)?; // class 0 gets the rest
    /// assert!(matches!(limiter.try_acquire_n(2, 1), Err(AcquireError::UnknownClass { class: 2, .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_n(&self, class: usize, n: u32) -> Result<(), AcquireError> {
        self.reserve_n(class, n, Duration::ZERO).map(|_| ())
    }

    /// Claims a slot for `n` permits of `class`. Class 0 may claim a future
    /// slot within `max_wait`; lower classes are granted only what conforms
    /// now (see the module docs on starvation freedom).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](PriorityLimiter::try_acquire_n), with the wait
    /// compared to `max_wait` for class 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// limiter.try_acquire_n(0, 10)?;
    /// let r = limiter.reserve_n(0, 1, Duration::from_secs(1))?; // class 0 may wait
    /// assert_eq!(r.wait(), Duration::from_millis(100));
    /// assert!(limiter.reserve_n(1, 1, Duration::from_secs(1)).is_err()); // class 1 may not
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(
        &self,
        class: usize,
        n: u32,
        max_wait: Duration,
    ) -> Result<Reservation, AcquireError> {
        let share = self.share(class, n)?;
        let max_wait = if class == 0 {
            saturating_nanos(max_wait)
        } else {
            0
        };
        let now = self.limiter.clock().now();
        self.limiter
            .reserve_at(Ask::Reserve, now, n, max_wait, |p: Params| {
                share.usable(p.burst)
            })
    }

    /// Permits `class` could take now: the largest `n` for which
    /// [`try_acquire_n`](PriorityLimiter::try_acquire_n) would succeed.
    /// Changes nothing.
    ///
    /// # Errors
    ///
    /// [`AcquireError::UnknownClass`] (with `requested: 0`) for a class past
    /// the last.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// assert_eq!(limiter.available(0)?, 10);
    /// assert_eq!(limiter.available(1)?, 5);
    /// limiter.try_acquire_n(0, 6)?;
    /// assert_eq!((limiter.available(0)?, limiter.available(1)?), (4, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available(&self, class: usize) -> Result<u32, AcquireError> {
        let share = self.share(class, 0)?;
        Ok(self
            .limiter
            .available_within(|p: Params| share.usable(p.burst)))
    }

    /// Gives back a reservation if nothing has been decided since.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// let r = limiter.reserve_n(0, 4, Duration::ZERO)?;
    /// assert_eq!(limiter.available(0)?, 6);
    /// assert!(limiter.cancel(r));
    /// assert_eq!(limiter.available(0)?, 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, reservation: Reservation) -> bool {
        self.limiter.cancel(reservation)
    }

    /// The quota in force.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// assert_eq!(limiter.quota(), quota);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.limiter.quota()
    }

    /// Replaces the quota as [`RateLimiter::set_quota`] does; each class
    /// keeps its share of the new burst.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] (and no change) when the new burst
    /// is too small for some class's share to be at least one permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// limiter.set_quota(Quota::per_second(10)?.with_burst(4)?)?;
    /// assert_eq!(limiter.available(1)?, 2); // half of the new burst
    /// assert!(limiter.set_quota(Quota::per_second(10)?).is_err()); // half of 1 is no permit
    /// assert_eq!(limiter.quota().burst(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), QuotaError> {
        if self.shares.iter().any(|s| s.usable(quota.burst()) == 0) {
            return Err(QuotaError::InvalidParameter {
                name: "quota.burst",
                requirement: "large enough that every class's share of it is at least one permit",
            });
        }
        self.limiter.set_quota(quota);
        Ok(())
    }

    /// The clock this limiter reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// use limiter_core::Clock;
    /// clock.advance(Duration::from_millis(1));
    /// assert_eq!(limiter.clock().now(), 1_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        self.limiter.clock()
    }

    /// A limiter acting for one class, sharing this limiter.
    ///
    /// # Errors
    ///
    /// [`AcquireError::UnknownClass`] for a class past the last.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// // Class 0 may use the whole burst, class 1 half of it.
    /// let limiter = PriorityLimiter::with_clock(quota, &[1.0, 0.5], clock.clone())?;
    /// use std::sync::Arc;
    /// let limiter = Arc::new(limiter);
    /// let background = limiter.class(1)?;
    /// assert_eq!(background.class(), 1);
    /// assert!(background.try_acquire_n(5).is_ok());
    /// assert!(background.try_acquire().is_err());
    /// assert!(limiter.class(2).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class(self: &Arc<Self>, class: usize) -> Result<PriorityClass<C>, AcquireError> {
        self.share(class, 0)?;
        Ok(PriorityClass {
            limiter: Arc::clone(self),
            class,
        })
    }
}

/// One class's view of a shared [`PriorityLimiter`], a [`Decide`] with
/// `Key = ()` usable wherever one limit is expected (the async waiting
/// layer, [`Metered`](crate::Metered)).
#[derive(Debug, Clone)]
pub struct PriorityClass<C: Clock = DefaultClock> {
    limiter: Arc<PriorityLimiter<C>>,
    class: usize,
}

impl<C: Clock> PriorityClass<C> {
    /// The class this view acts for.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use limiter_core::{ManualClock, PriorityLimiter, Quota};
    ///
    /// let quota = Quota::per_second(10)?.with_burst(10)?;
    /// let limiter = Arc::new(PriorityLimiter::with_clock(quota, &[1.0, 0.5], ManualClock::new())?);
    /// assert_eq!(limiter.class(0)?.class(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class(&self) -> usize {
        self.class
    }
}

/// The class's side of [`PriorityLimiter`]'s methods.
impl<C: Clock> PriorityClass<C> {
    /// Takes one permit of this class now.
    ///
    /// # Errors
    ///
    /// As [`PriorityLimiter::try_acquire_n`].
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits of this class now, all or nothing.
    ///
    /// # Errors
    ///
    /// As [`PriorityLimiter::try_acquire_n`].
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.limiter.try_acquire_n(self.class, n)
    }

    /// Claims a slot for `n` permits of this class (a future one only for
    /// class 0).
    ///
    /// # Errors
    ///
    /// As [`PriorityLimiter::reserve_n`].
    pub fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        self.limiter.reserve_n(self.class, n, max_wait)
    }

    /// Gives back a reservation as [`PriorityLimiter::cancel`] does.
    pub fn cancel(&self, reservation: Reservation) -> bool {
        PriorityLimiter::cancel(&self.limiter, reservation)
    }
}

/// Keyed by the class: exact headroom within the class's share of the
/// burst, from the word the decision wrote; the policy of a class is its
/// share of the burst at the quota's interval. A class past the last is
/// refused as [`Denial::Unavailable`].
impl<C: Clock> Decide for PriorityLimiter<C> {
    type Key = usize;
    type Ticket = Reservation;

    fn decide(
        &self,
        class: &usize,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let class = *class;
        let share = match self.share(class, cost) {
            Ok(share) => share,
            Err(error) => return Err(Denial::Unavailable(alloc::boxed::Box::new(error))),
        };
        let max_wait = if class == 0 {
            saturating_nanos(max_wait)
        } else {
            0
        };
        let now = self.limiter.clock().now();
        let usable = |p: Params| share.usable(p.burst);
        let class_policy = |p: Params| {
            Params {
                t: p.t,
                burst: usable(p),
            }
            .policy()
        };
        match self
            .limiter
            .reserve_with_headroom_at(now, cost, max_wait, usable)
        {
            Ok((ticket, headroom, params)) => Ok(Grant {
                wait: ticket.wait(),
                ticket,
                headroom,
                policy: class_policy(params),
            }),
            Err((error, params)) => Err(Denial::refused(error, class_policy(params))),
        }
    }

    fn cancel(&self, _class: &usize, ticket: Reservation) -> bool {
        PriorityLimiter::cancel(self, ticket)
    }
}

/// As [`PriorityLimiter`]'s `Decide` for this view's class.
impl<C: Clock> Decide for PriorityClass<C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        _key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        self.limiter.decide(&self.class, cost, max_wait)
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        PriorityLimiter::cancel(&self.limiter, ticket)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn decimal_shares_are_held_as_written() {
        assert_eq!(Share::of(1.0), Share::Decimal(ONE));
        assert_eq!(Share::of(0.3), Share::Decimal(300_000_000));
        assert_eq!(Share::of(0.999999999), Share::Decimal(999_999_999));
        assert_eq!(Share::of(0.000000001), Share::Decimal(1));
        assert_eq!(Share::Decimal(ONE / 2).usable(3), 1);
        assert_eq!(Share::Decimal(700_000_000).usable(10), 7);
        assert_eq!(Share::Decimal(100_000_000).usable(10), 1);
        assert_eq!(Share::Decimal(1).usable(10), 0);
    }

    #[test]
    fn other_shares_are_their_exact_binary_value() {
        assert_eq!(
            Share::of(0.75 + 1.0 / (1u64 << 40) as f64),
            Share::Binary {
                mantissa: (3 << 51) + (1 << 13),
                shift: 53
            }
        );
        assert_eq!(
            Share::of(f64::MIN_POSITIVE / 4.0),
            Share::Binary {
                mantissa: 1 << 50,
                shift: 1074
            }
        );
        let below_one = Share::of(1.0 - f64::EPSILON / 2.0);
        assert_eq!(below_one.usable(u32::MAX), u32::MAX - 1);
        assert_eq!(below_one.usable(1), 0);
        assert_eq!(Share::of(1.0 / (1u64 << 30) as f64).usable(u32::MAX), 3);
        assert_eq!(Share::of(f64::MIN_POSITIVE).usable(u32::MAX), 0);
    }
}
