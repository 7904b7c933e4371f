//! The quota: how many permits, how fast, how bursty.
//!
//! A quota is the pair of GCRA parameters in integer nanoseconds:
//!
//! * `t`, the emission interval: one permit is earned every `t` ns;
//! * `burst`, how many permits an idle limiter grants at one instant. The
//!   GCRA tolerance is `tau = t · (burst − 1)`, and `burst_span = t · burst =
//!   tau + t` is what the admission test uses.
//!
//! Invariants, checked once here so the hot path never has to: `t ≥ 1`,
//! `burst ≥ 1`, and `t · burst ≤ MAX_SPAN` (2^60 − 1 ns). Together with
//! `tat ≤ MAX_SPAN` these keep every sum in [`crate::gcra`] below 2^62, so the
//! decision needs no overflow checks of its own.
//!
//! Rates given per second, minute or hour are turned into a period rounded
//! *up* to the nanosecond, so the limiter never admits more than asked; the
//! relative error is below `permits / 10^9` per second of the interval.

use core::time::Duration;

use crate::error::QuotaError;

/// The largest span of time, in nanoseconds, that the limiter's state word can
/// hold: 2^60 − 1 ns, about 36.5 years. Both `period · burst` and every
/// theoretical arrival time must fit in it.
pub const MAX_SPAN: u64 = (1 << 60) - 1;

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// How many permits a limiter grants and how fast: the emission interval `t`
/// (one permit every `period()`) and the `burst` an idle limiter grants at
/// once.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::Quota;
///
/// let q = Quota::per_second(100)?.with_burst(10)?;
/// assert_eq!(q.period(), Duration::from_millis(10));
/// assert_eq!(q.burst(), 10);
///
/// // Numbers that cannot be represented are errors, never clamps.
/// assert!(Quota::per_second(0).is_err());
/// assert!(Quota::with_period(Duration::from_secs(3600))?.with_burst(u32::MAX).is_err());
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    t: u64,
    burst: u32,
}

impl Quota {
    /// `permits` per second, evenly spaced, with a burst of 1.
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroRate`] for 0, [`QuotaError::RateTooHigh`] above
    /// 10^9 per second (one per nanosecond).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_second(4)?.period(), Duration::from_millis(250));
    /// assert!(Quota::per_second(0).is_err());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn per_second(permits: u32) -> Result<Quota, QuotaError> {
        Quota::per_interval(permits, Duration::from_secs(1))
    }

    /// `permits` per minute, evenly spaced, with a burst of 1.
    ///
    /// # Errors
    ///
    /// As [`Quota::per_second`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_minute(60)?.period(), Duration::from_secs(1));
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn per_minute(permits: u32) -> Result<Quota, QuotaError> {
        Quota::per_interval(permits, Duration::from_secs(60))
    }

    /// `permits` per hour, evenly spaced, with a burst of 1.
    ///
    /// # Errors
    ///
    /// As [`Quota::per_second`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_hour(60)?.period(), Duration::from_secs(60));
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn per_hour(permits: u32) -> Result<Quota, QuotaError> {
        Quota::per_interval(permits, Duration::from_secs(3600))
    }

    /// `permits` per `interval`, evenly spaced (the period is
    /// `interval / permits` rounded up to the nanosecond), with a burst of 1.
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroRate`] for 0 permits, [`QuotaError::RateTooHigh`]
    /// when the period would be under 1 ns, [`QuotaError::SpanTooLong`] when
    /// it would exceed [`MAX_SPAN`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    ///
    /// let q = Quota::per_interval(3, Duration::from_secs(1))?;
    /// assert_eq!(q.period_nanos(), 333_333_334); // rounded up: never more than asked
    /// assert!(Quota::per_interval(2, Duration::from_nanos(1)).is_err());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn per_interval(permits: u32, interval: Duration) -> Result<Quota, QuotaError> {
        if permits == 0 {
            return Err(QuotaError::ZeroRate);
        }
        let nanos = interval.as_nanos();
        let t = nanos.div_ceil(u128::from(permits));
        if nanos < u128::from(permits) {
            return Err(QuotaError::RateTooHigh {
                permits,
                per: interval,
            });
        }
        Quota::from_parts(t, 1)
    }

    /// `per_second` permits per second from a fractional rate (the adaptive
    /// limiter's currency), with a burst of 1. The period is
    /// `10^9 / per_second` nanoseconds rounded *up* to a whole nanosecond, so
    /// the quota never admits more than asked.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] for a rate that is not finite or not
    /// above 0, or above 10^9 per second (one permit per nanosecond);
    /// [`QuotaError::SpanTooLong`] for a rate so low that the period exceeds
    /// [`MAX_SPAN`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::from_rate(800.0)?.period_nanos(), 1_250_000);
    /// assert_eq!(Quota::from_rate(3.0)?.period_nanos(), 333_333_334);
    /// assert!(Quota::from_rate(f64::NAN).is_err());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn from_rate(per_second: f64) -> Result<Quota, QuotaError> {
        // is_finite excludes NaN, so `<=` covers every other bad value.
        if !per_second.is_finite() || per_second <= 0.0 {
            return Err(QuotaError::InvalidParameter {
                name: "rate",
                requirement: "a finite number of permits per second above 0",
            });
        }
        if per_second > NANOS_PER_SECOND as f64 {
            return Err(QuotaError::InvalidParameter {
                name: "rate",
                requirement: "at most 10^9 permits per second (one per nanosecond)",
            });
        }
        let exact = NANOS_PER_SECOND as f64 / per_second;
        // Ceiling without `f64::ceil` (std only): `as` truncates towards zero
        // and saturates at u64::MAX, which from_parts then rejects.
        let mut t = exact as u64;
        if (t as f64) < exact {
            t = t.saturating_add(1);
        }
        Quota::from_parts(u128::from(t.max(1)), 1)
    }

    /// One permit per `period`, with a burst of 1.
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroPeriod`] for a zero period,
    /// [`QuotaError::SpanTooLong`] beyond [`MAX_SPAN`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    ///
    /// let q = Quota::with_period(Duration::from_millis(20))?;
    /// assert_eq!((q.period(), q.burst()), (Duration::from_millis(20), 1));
    /// assert!(Quota::with_period(Duration::ZERO).is_err());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn with_period(period: Duration) -> Result<Quota, QuotaError> {
        if period.is_zero() {
            return Err(QuotaError::ZeroPeriod);
        }
        Quota::from_parts(period.as_nanos(), 1)
    }

    /// The same rate with `burst` permits grantable at once by an idle
    /// limiter (the tolerance `tau = period · (burst − 1)`).
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroBurst`] for 0, [`QuotaError::SpanTooLong`] when
    /// `period · burst` exceeds [`MAX_SPAN`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    ///
    /// use limiter_core::QuotaError;
    /// let q = Quota::per_second(10)?.with_burst(5)?;
    /// assert_eq!((q.burst(), q.tolerance_nanos()), (5, 400_000_000));
    /// assert_eq!(Quota::per_second(10)?.with_burst(0), Err(QuotaError::ZeroBurst));
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn with_burst(self, burst: u32) -> Result<Quota, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        Quota::from_parts(u128::from(self.t), burst)
    }

    fn from_parts(t: u128, burst: u32) -> Result<Quota, QuotaError> {
        let span = t.checked_mul(u128::from(burst));
        match (u64::try_from(t), span) {
            (Ok(t), Some(span)) if span <= u128::from(MAX_SPAN) => Ok(Quota { t, burst }),
            _ => Err(QuotaError::SpanTooLong {
                period: duration_from_nanos_u128(t),
                burst,
            }),
        }
    }

    /// A quota from parameters already validated by a constructor.
    pub(crate) const fn from_valid(t: u64, burst: u32) -> Quota {
        Quota { t, burst }
    }

    /// The emission interval `t`: one permit is earned every `period()`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_second(100)?.period(), Duration::from_millis(10));
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.t)
    }

    /// How many permits an idle limiter grants at one instant (1 = strict
    /// pacing).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_second(100)?.burst(), 1);
    /// assert_eq!(Quota::per_second(100)?.with_burst(20)?.burst(), 20);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The emission interval `t` in nanoseconds.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_second(1_000)?.period_nanos(), 1_000_000);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn period_nanos(&self) -> u64 {
        self.t
    }

    /// The GCRA tolerance `tau = t · (burst − 1)` in nanoseconds.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_second(10)?.tolerance_nanos(), 0);
    /// assert_eq!(Quota::per_second(10)?.with_burst(3)?.tolerance_nanos(), 200_000_000);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn tolerance_nanos(&self) -> u64 {
        self.t * u64::from(self.burst - 1)
    }

    /// `t · burst = tau + t` in nanoseconds: the time an empty limiter takes
    /// to refill completely.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_second(10)?.with_burst(3)?.burst_span_nanos(), 300_000_000);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn burst_span_nanos(&self) -> u64 {
        self.t * u64::from(self.burst)
    }

    /// The rate in permits per second, as a float for display and for the
    /// adaptive limiter; the exact value is `10^9 / period_nanos()`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    ///
    /// assert_eq!(Quota::per_second(250)?.permits_per_second(), 250.0);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn permits_per_second(&self) -> f64 {
        NANOS_PER_SECOND as f64 / self.t as f64
    }

    /// Rebuilds a quota from `period_nanos()` and `burst()` (for example
    /// after reading them from a quota slot).
    ///
    /// # Errors
    ///
    /// As [`Quota::with_period`] and [`Quota::with_burst`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    ///
    /// let q = Quota::per_second(10)?.with_burst(4)?;
    /// assert_eq!(Quota::from_nanos(q.period_nanos(), q.burst())?, q);
    /// assert!(Quota::from_nanos(0, 1).is_err());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn from_nanos(period_nanos: u64, burst: u32) -> Result<Quota, QuotaError> {
        if period_nanos == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        Quota::from_parts(u128::from(period_nanos), burst)
    }
}

/// A `Duration` from a nanosecond count that may exceed `u64`, saturating at
/// `Duration::MAX` (only used to *report* out-of-range values in errors).
pub(crate) fn duration_from_nanos_u128(nanos: u128) -> Duration {
    let secs = nanos / u128::from(NANOS_PER_SECOND);
    let sub = (nanos % u128::from(NANOS_PER_SECOND)) as u32;
    match u64::try_from(secs) {
        Ok(secs) => Duration::new(secs, sub),
        Err(_) => Duration::MAX,
    }
}

/// A `Duration` as whole nanoseconds, saturating at `u64::MAX` (about 584
/// years, far past anything the limiter can represent anyway).
pub(crate) fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_second_rounds_the_period_up() {
        assert_eq!(Quota::per_second(3).unwrap().period_nanos(), 333_333_334);
        assert_eq!(Quota::per_second(1_000_000_000).unwrap().period_nanos(), 1);
        assert_eq!(
            Quota::per_minute(1).unwrap().period(),
            Duration::from_secs(60)
        );
        assert_eq!(
            Quota::per_hour(2).unwrap().period(),
            Duration::from_secs(1800)
        );
    }

    #[test]
    fn zero_and_too_fast_rates_are_errors() {
        assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroRate));
        assert_eq!(
            Quota::per_second(1_000_000_001),
            Err(QuotaError::RateTooHigh {
                permits: 1_000_000_001,
                per: Duration::from_secs(1)
            })
        );
        assert_eq!(
            Quota::with_period(Duration::ZERO),
            Err(QuotaError::ZeroPeriod)
        );
        assert_eq!(
            Quota::per_second(1).unwrap().with_burst(0),
            Err(QuotaError::ZeroBurst)
        );
    }

    #[test]
    fn spans_past_the_state_word_are_errors() {
        let hour = Quota::with_period(Duration::from_secs(3600)).unwrap();
        assert!(matches!(
            hour.with_burst(u32::MAX),
            Err(QuotaError::SpanTooLong {
                burst: u32::MAX,
                ..
            })
        ));
        // 320,000 hours is about 36.5 years: just under the limit.
        assert_eq!(hour.with_burst(320_000).unwrap().burst(), 320_000);
        assert!(hour.with_burst(320_300).is_err());
        assert!(matches!(
            Quota::with_period(Duration::MAX),
            Err(QuotaError::SpanTooLong { .. })
        ));
        let one_ns = Quota::with_period(Duration::from_nanos(1)).unwrap();
        assert_eq!(
            one_ns.with_burst(u32::MAX).unwrap().burst_span_nanos(),
            u64::from(u32::MAX)
        );
    }

    #[test]
    fn from_rate_rounds_the_period_up() {
        assert_eq!(Quota::from_rate(1_000.0).unwrap().period_nanos(), 1_000_000);
        assert_eq!(Quota::from_rate(800.0).unwrap().period_nanos(), 1_250_000);
        assert_eq!(Quota::from_rate(704.0).unwrap().period_nanos(), 1_420_455);
        assert_eq!(
            Quota::from_rate(0.5).unwrap().period(),
            Duration::from_secs(2)
        );
        assert_eq!(Quota::from_rate(1e9).unwrap().period_nanos(), 1);
        assert_eq!(Quota::from_rate(2.5e8).unwrap().period_nanos(), 4);
        assert_eq!(Quota::from_rate(3.0).unwrap().burst(), 1);
    }

    #[test]
    fn from_rate_rejects_what_it_cannot_represent() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.5e9] {
            assert!(
                matches!(
                    Quota::from_rate(bad),
                    Err(QuotaError::InvalidParameter { name: "rate", .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            Quota::from_rate(1e-12),
            Err(QuotaError::SpanTooLong { burst: 1, .. })
        ));
        assert!(matches!(
            Quota::from_rate(f64::MIN_POSITIVE),
            Err(QuotaError::SpanTooLong { .. })
        ));
    }

    #[test]
    fn tolerance_and_span_follow_the_burst() {
        let q = Quota::per_second(10).unwrap().with_burst(5).unwrap();
        assert_eq!(q.tolerance_nanos(), 400_000_000);
        assert_eq!(q.burst_span_nanos(), 500_000_000);
        assert_eq!(Quota::from_nanos(100_000_000, 5), Ok(q));
    }
}
