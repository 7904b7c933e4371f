//! Rates and durations as people write them: `5000`, `"100/s"`,
//! `"6000/min"`, `"1/h"`, `"10/250ms"`; `"250ms"`, `"1m"`, `"1m30s"`.
//!
//! A rate is kept as written (permits per interval) and becomes a core
//! [`Quota`] only through the core's own constructors, so the rounding is the
//! core's (the period rounded *up*: never more than asked) and every number
//! the core cannot represent comes back as its [`QuotaError`]. A decimal rate
//! (`0.5`) goes through [`Quota::from_rate`].

use std::fmt;
use std::time::Duration;

use limiter_core::{Quota, QuotaError};

/// A rate as written in a rule file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// `permits` per `per`: `5000` is 5000 per second, `"6000/min"` is
    /// 6000 per minute.
    Count {
        /// Permits per interval (at least 1).
        permits: u32,
        /// The interval (not zero).
        per: Duration,
    },
    /// A decimal number of permits per second (`0.5`).
    PerSecond(f64),
}

impl Rate {
    /// The quota of this rate with a burst of 1.
    ///
    /// # Errors
    ///
    /// The core's [`QuotaError`] for a rate it cannot represent.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_rules::Rate;
    ///
    /// let r: Rate = "6000/min".parse()?;
    /// assert_eq!(r.quota()?.period(), Duration::from_millis(10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Result<Quota, QuotaError> {
        match *self {
            Rate::Count { permits, per } => Quota::per_interval(permits, per),
            Rate::PerSecond(r) => Quota::from_rate(r),
        }
    }

    /// Permits per second, for display and for the adaptive limiter.
    pub fn per_second(&self) -> f64 {
        match *self {
            Rate::Count { permits, per } => f64::from(permits) / per.as_secs_f64(),
            Rate::PerSecond(r) => r,
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::Count { permits, per } if per == Duration::from_secs(1) => {
                write!(f, "{permits}/s")
            }
            Rate::Count { permits, per } => write!(f, "{permits}/{}", DisplayDuration(per)),
            Rate::PerSecond(r) => write!(f, "{r}/s"),
        }
    }
}

impl std::str::FromStr for Rate {
    type Err = String;

    /// `"N/unit"` or `"N/duration"`, or a bare `"N"` per second.
    fn from_str(s: &str) -> Result<Rate, String> {
        let s = s.trim();
        let (count, per) = match s.split_once('/') {
            Some((count, per)) => (count.trim(), per.trim()),
            None => (s, "s"),
        };
        let per = match per {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            "d" | "day" => Duration::from_secs(86_400),
            other => parse_duration(other)
                .map_err(|e| format!("`{other}` is not a unit (s, min, h, d) or duration: {e}"))?,
        };
        if per.is_zero() {
            return Err("the interval is zero".into());
        }
        if count.starts_with('-') {
            return Err(format!("`{count}` is negative"));
        }
        let permits: u64 = count
            .parse()
            .map_err(|_| format!("`{count}` is not a whole number of permits"))?;
        if permits == 0 {
            return Err("0 permits admit nothing".into());
        }
        let permits = u32::try_from(permits)
            .map_err(|_| format!("{permits} permits is more than 4294967295"))?;
        Ok(Rate::Count { permits, per })
    }
}

/// Parses `"250ms"`, `"2s"`, `"1m30s"`, `"0"` (units ns, us, µs, ms, s, m, h, d).
///
/// # Errors
///
/// A message saying what is wrong, for an empty string, a number without
/// unit, an unknown unit or a duration past `u64` nanoseconds.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_rules::parse_duration;
///
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert!(parse_duration("250").is_err()); // a unit is required
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty".into());
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("`{s}` must start with a number"));
        }
        let number: u128 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{}` is too large", &rest[..digits]))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" | "min" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            "" => return Err(format!("`{s}` has a number without a unit")),
            other => return Err(format!("`{other}` is not a unit (ns, us, ms, s, m, h, d)")),
        };
        total = number
            .checked_mul(nanos)
            .and_then(|n| total.checked_add(n))
            .ok_or_else(|| format!("`{s}` is too long"))?;
    }
    let nanos = u64::try_from(total).map_err(|_| format!("`{s}` is too long"))?;
    Ok(Duration::from_nanos(nanos))
}

/// A duration in the units it is written in (`250ms`, `1m`, `1h`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DisplayDuration(pub(crate) Duration);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.as_nanos();
        for (unit, size) in [
            ("d", 86_400_000_000_000u128),
            ("h", 3_600_000_000_000),
            ("m", 60_000_000_000),
            ("s", 1_000_000_000),
            ("ms", 1_000_000),
            ("us", 1_000),
        ] {
            if n >= size && n.is_multiple_of(size) {
                return write!(f, "{}{unit}", n / size);
            }
        }
        write!(f, "{n}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_every_spelling() {
        let per = |s: &str| s.parse::<Rate>().unwrap().quota().unwrap().period_nanos();
        assert_eq!(per("100/s"), 10_000_000);
        assert_eq!(per("6000/min"), 10_000_000);
        assert_eq!(per("1/h"), 3_600_000_000_000);
        assert_eq!(per("10/250ms"), 25_000_000);
        assert_eq!(per("3"), 333_333_334); // rounded up, as the core does
    }

    #[test]
    fn bad_rates_say_why() {
        for (bad, why) in [
            ("0/s", "admit nothing"),
            ("-5/s", "negative"),
            ("x/s", "whole number"),
            ("5/fortnight", "not a unit"),
            ("5/0s", "zero"),
            ("5000000000/s", "more than"),
        ] {
            let e = bad.parse::<Rate>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1h1m1s"), Ok(Duration::from_secs(3661)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("15us"), Ok(Duration::from_micros(15)));
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
        assert_eq!(
            DisplayDuration(Duration::from_millis(1500)).to_string(),
            "1500ms"
        );
        assert_eq!(DisplayDuration(Duration::from_secs(60)).to_string(), "1m");
    }
}
