//! [`CalendarQuota`]: an allowance per calendar period, and the pure function
//! that finds the period (its [`Window`]) holding an instant.
//!
//! # What a period is
//!
//! A period starts at local midnight, in the quota's time zone, of its first
//! day, and ends where the next one starts:
//!
//! * `Day`: every day.
//! * `Week`: the ISO weekday `reset_day` (1 = Monday … 7 = Sunday; default 1).
//! * `Month`: day `reset_day` of every month (1 … 31; default 1). A month
//!   shorter than `reset_day` resets on its last day instead (`reset_day: 31`
//!   resets on 30 April and on 28 or 29 February), as billing cycles do; the
//!   next month resets on `reset_day` again.
//!
//! Local midnight is turned into an instant by the zone's rules in force on
//! that day: a day that loses an hour to daylight saving time lasts 23 hours
//! and one that gains an hour 25; a midnight that does not exist (a zone that
//! moves its clocks forward at 00:00) is replaced by the first instant of that
//! day, and one that happens twice by the first of the two.
//!
//! # Units and range
//!
//! Windows are in whole seconds since the Unix epoch (UTC), `[start, end)`:
//! every zone offset in the time-zone database is a whole number of seconds,
//! so boundaries are exact. Both fit in a `u32`, which covers 1970-01-01 to
//! 2106-02-07; an instant outside is [`OutOfRange`](WindowError::OutOfRange).

use core::fmt;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// The length of a calendar period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Period {
    /// From one local midnight to the next.
    Day,
    /// Seven days from local midnight of an ISO weekday.
    Week,
    /// From local midnight of a day of the month to the same day of the next.
    Month,
}

impl Period {
    /// The name used in rule files and messages: `day`, `week`, `month`.
    pub fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }

    /// The largest `reset_day` of this period (0 for `Day`, which has none).
    pub fn max_reset_day(self) -> u8 {
        match self {
            Period::Day => 0,
            Period::Week => 7,
            Period::Month => 31,
        }
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a [`CalendarQuota`] could not be built. Each variant names what to
/// change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CalendarError {
    /// A limit of zero admits nothing; use at least 1.
    ZeroLimit,
    /// `reset_day` was given for a daily quota, which resets every midnight.
    ResetDayForDaily,
    /// `reset_day` lies outside `1..=max` for its period.
    ResetDayOutOfRange {
        /// The period it was given for.
        period: Period,
        /// The day asked for.
        day: u8,
        /// The largest valid day (7 for a week, 31 for a month).
        max: u8,
    },
    /// The time zone is neither `UTC` nor a zone of the time-zone database.
    UnknownZone {
        /// The name asked for.
        name: String,
    },
}

impl fmt::Display for CalendarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CalendarError::ZeroLimit => {
                f.write_str("a calendar quota of 0 admits nothing; use a limit of at least 1")
            }
            CalendarError::ResetDayForDaily => f.write_str(
                "`reset_day` does not apply to `per: day` (it resets at every local midnight); remove it",
            ),
            CalendarError::ResetDayOutOfRange { period, day, max } => write!(
                f,
                "`reset_day: {day}` is not a day of a {period}; use 1 to {max}{}",
                if *period == Period::Week {
                    " (1 = Monday, 7 = Sunday)"
                } else {
                    " (a shorter month resets on its last day)"
                }
            ),
            CalendarError::UnknownZone { name } => write!(
                f,
                "unknown time zone `{name}`; use `UTC` or an IANA name such as `Europe/Paris`"
            ),
        }
    }
}

impl std::error::Error for CalendarError {}

/// One calendar period: `[start, end)` in seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    /// The first second of the period.
    pub start: u32,
    /// The first second of the next period.
    pub end: u32,
}

impl Window {
    /// Whether the second `at` lies in this period.
    pub fn contains(&self, at: u32) -> bool {
        self.start <= at && at < self.end
    }
}

/// Why no window could be found for an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowError {
    /// The instant, or the end of its period, lies outside 1970-01-01 to
    /// 2106-02-07 UTC.
    OutOfRange,
}

/// A fixed allowance of `limit` permits per calendar [`Period`] in a time
/// zone.
///
/// # Examples
///
/// ```
/// use limiter_calendar::{CalendarQuota, Period};
///
/// let quota = CalendarQuota::new(10_000, Period::Month)?
///     .with_reset_day(15)?
///     .in_zone("America/New_York")?;
/// assert_eq!(quota.limit(), 10_000);
/// assert_eq!(quota.reset_day(), 15);
/// assert_eq!(quota.zone_name(), "America/New_York");
///
/// assert!(CalendarQuota::new(0, Period::Day).is_err());
/// assert!(CalendarQuota::new(5, Period::Week)?.with_reset_day(8).is_err());
/// # Ok::<(), limiter_calendar::CalendarError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarQuota {
    limit: u32,
    period: Period,
    reset_day: u8,
    zone: TimeZone,
    zone_name: String,
}

impl CalendarQuota {
    /// `limit` permits per `period`, in UTC, resetting on the first day
    /// (Monday for a week, the 1st for a month).
    ///
    /// # Errors
    ///
    /// [`CalendarError::ZeroLimit`] for a limit of 0.
    pub fn new(limit: u32, period: Period) -> Result<CalendarQuota, CalendarError> {
        if limit == 0 {
            return Err(CalendarError::ZeroLimit);
        }
        Ok(CalendarQuota {
            limit,
            period,
            reset_day: if period == Period::Day { 0 } else { 1 },
            zone: TimeZone::UTC,
            zone_name: String::from("UTC"),
        })
    }

    /// The same quota resetting on `day`: an ISO weekday for a week (1 =
    /// Monday … 7 = Sunday), a day of the month for a month (1 … 31).
    ///
    /// # Errors
    ///
    /// [`CalendarError::ResetDayForDaily`] for a daily quota,
    /// [`CalendarError::ResetDayOutOfRange`] for a day outside the period.
    pub fn with_reset_day(self, day: u8) -> Result<CalendarQuota, CalendarError> {
        let max = self.period.max_reset_day();
        if max == 0 {
            return Err(CalendarError::ResetDayForDaily);
        }
        if day == 0 || day > max {
            return Err(CalendarError::ResetDayOutOfRange {
                period: self.period,
                day,
                max,
            });
        }
        Ok(CalendarQuota {
            reset_day: day,
            ..self
        })
    }

    /// The same quota in the zone `name`: `UTC`, or an IANA name looked up
    /// in the system's time-zone database (`/usr/share/zoneinfo`, or
    /// `TZDIR`), falling back to the copy bundled into the binary where the
    /// system has none (a scratch container).
    ///
    /// # Errors
    ///
    /// [`CalendarError::UnknownZone`] when neither database knows `name`.
    pub fn in_zone(self, name: &str) -> Result<CalendarQuota, CalendarError> {
        let zone = if name == "UTC" {
            TimeZone::UTC
        } else {
            jiff::tz::db()
                .get(name)
                .or_else(|_| jiff::tz::TimeZoneDatabase::bundled().get(name))
                .map_err(|_| CalendarError::UnknownZone {
                    name: name.to_owned(),
                })?
        };
        Ok(CalendarQuota {
            zone,
            zone_name: name.to_owned(),
            ..self
        })
    }

    /// The permits granted per period.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The same quota with another limit (the period and zone unchanged).
    ///
    /// # Errors
    ///
    /// [`CalendarError::ZeroLimit`] for a limit of 0.
    pub fn with_limit(self, limit: u32) -> Result<CalendarQuota, CalendarError> {
        if limit == 0 {
            return Err(CalendarError::ZeroLimit);
        }
        Ok(CalendarQuota { limit, ..self })
    }

    /// The period.
    pub fn period(&self) -> Period {
        self.period
    }

    /// The reset day (0 for a daily quota).
    pub fn reset_day(&self) -> u8 {
        self.reset_day
    }

    /// The zone's name as given (`UTC` by default).
    pub fn zone_name(&self) -> &str {
        &self.zone_name
    }

    /// The period holding the second `at` (since the Unix epoch).
    ///
    /// # Errors
    ///
    /// [`WindowError::OutOfRange`] when the period does not fit in
    /// 1970-01-01 to 2106-02-07 UTC.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_calendar::{CalendarQuota, Period, Window};
    ///
    /// // 2024-03-10 is 23 hours long in New York (clocks go forward at 2:00).
    /// let daily = CalendarQuota::new(1, Period::Day)?.in_zone("America/New_York")?;
    /// let noon = 1_710_086_400; // 2024-03-10T12:00:00-04:00
    /// let w = daily.window_at(noon).unwrap();
    /// assert_eq!(w, Window { start: 1_710_046_800, end: 1_710_129_600 });
    /// assert_eq!(w.end - w.start, 23 * 3600);
    /// # Ok::<(), limiter_calendar::CalendarError>(())
    /// ```
    pub fn window_at(&self, at: u32) -> Result<Window, WindowError> {
        let instant = Timestamp::from_second(i64::from(at)).map_err(|_| WindowError::OutOfRange)?;
        let date = instant.to_zoned_datetime(self.zone.clone()).date();
        let (first, next) = self.dates_around(date).ok_or(WindowError::OutOfRange)?;
        let start = self.midnight(first)?;
        let end = self.midnight(next)?;
        debug_assert!(start <= at && at < end, "{first} .. {next} holds {at}");
        Ok(Window { start, end })
    }

    /// The first day of the period holding `date` and the first day of the
    /// next period (local calendar dates).
    fn dates_around(&self, date: Date) -> Option<(Date, Date)> {
        match self.period {
            Period::Day => Some((date, date.tomorrow().ok()?)),
            Period::Week => {
                let weekday = i64::from(date.weekday().to_monday_one_offset());
                let back = (weekday - i64::from(self.reset_day)).rem_euclid(7);
                let first = date.checked_sub(back.days()).ok()?;
                Some((first, first.checked_add(7.days()).ok()?))
            }
            Period::Month => {
                let this = self.reset_in_month(date.first_of_month());
                let first = if date >= this {
                    this
                } else {
                    let previous = date.first_of_month().checked_sub(1.month()).ok()?;
                    self.reset_in_month(previous)
                };
                let next = first.first_of_month().checked_add(1.month()).ok()?;
                Some((first, self.reset_in_month(next)))
            }
        }
    }

    /// The reset date in the month starting on `first_of_month`: day
    /// `reset_day`, or the last day of a shorter month.
    fn reset_in_month(&self, first_of_month: Date) -> Date {
        let day = i8::try_from(self.reset_day)
            .unwrap_or(31)
            .min(first_of_month.days_in_month());
        // A day between 1 and the month's length is always a valid date.
        Date::new(first_of_month.year(), first_of_month.month(), day).unwrap_or(first_of_month)
    }

    /// The first instant of `date` in the zone, in seconds since the epoch.
    fn midnight(&self, date: Date) -> Result<u32, WindowError> {
        // `to_zoned_datetime` resolves a midnight in a gap to the instant after the
        // gap (the first instant of the day) and one in a fold to the first
        // of the two: "compatible" disambiguation.
        let zoned = date
            .to_zoned_datetime(self.zone.clone())
            .map_err(|_| WindowError::OutOfRange)?;
        u32::try_from(zoned.timestamp().as_second()).map_err(|_| WindowError::OutOfRange)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> u32 {
        u32::try_from(s.parse::<Timestamp>().unwrap().as_second()).unwrap()
    }

    fn window(quota: &CalendarQuota, instant: &str) -> (u32, u32) {
        let w = quota.window_at(at(instant)).unwrap();
        (w.start, w.end)
    }

    #[test]
    fn a_utc_day_is_86400_seconds_from_midnight() {
        let q = CalendarQuota::new(1, Period::Day).unwrap();
        assert_eq!(
            window(&q, "2024-02-29T23:59:59Z"),
            (at("2024-02-29T00:00:00Z"), at("2024-03-01T00:00:00Z"))
        );
    }

    #[test]
    fn months_follow_their_lengths_and_leap_years() {
        let q = CalendarQuota::new(1, Period::Month).unwrap();
        assert_eq!(
            window(&q, "2024-02-10T00:00:00Z"),
            (at("2024-02-01T00:00:00Z"), at("2024-03-01T00:00:00Z"))
        );
        let q31 = q.clone().with_reset_day(31).unwrap();
        // Leap year: 31 Jan, then 29 Feb (the last day), then 31 Mar.
        assert_eq!(
            window(&q31, "2024-02-15T00:00:00Z"),
            (at("2024-01-31T00:00:00Z"), at("2024-02-29T00:00:00Z"))
        );
        assert_eq!(
            window(&q31, "2024-02-29T00:00:00Z"),
            (at("2024-02-29T00:00:00Z"), at("2024-03-31T00:00:00Z"))
        );
        // Common year: 28 Feb.
        assert_eq!(
            window(&q31, "2023-03-01T00:00:00Z"),
            (at("2023-02-28T00:00:00Z"), at("2023-03-31T00:00:00Z"))
        );
        // A reset day past the 30-day April.
        assert_eq!(
            window(&q31, "2024-04-30T12:00:00Z"),
            (at("2024-04-30T00:00:00Z"), at("2024-05-31T00:00:00Z"))
        );
        // Across a year end.
        let q15 = q.with_reset_day(15).unwrap();
        assert_eq!(
            window(&q15, "2025-01-03T00:00:00Z"),
            (at("2024-12-15T00:00:00Z"), at("2025-01-15T00:00:00Z"))
        );
    }

    #[test]
    fn weeks_start_on_their_weekday() {
        // 2024-03-13 is a Wednesday.
        let monday = CalendarQuota::new(1, Period::Week).unwrap();
        assert_eq!(
            window(&monday, "2024-03-13T08:00:00Z"),
            (at("2024-03-11T00:00:00Z"), at("2024-03-18T00:00:00Z"))
        );
        let sunday = monday.clone().with_reset_day(7).unwrap();
        assert_eq!(
            window(&sunday, "2024-03-13T08:00:00Z"),
            (at("2024-03-10T00:00:00Z"), at("2024-03-17T00:00:00Z"))
        );
        let wednesday = monday.with_reset_day(3).unwrap();
        assert_eq!(
            window(&wednesday, "2024-03-13T00:00:00Z"),
            (at("2024-03-13T00:00:00Z"), at("2024-03-20T00:00:00Z"))
        );
    }

    #[test]
    fn dst_days_last_23_and_25_hours() {
        let ny = CalendarQuota::new(1, Period::Day)
            .unwrap()
            .in_zone("America/New_York")
            .unwrap();
        // Spring forward: 2024-03-10 from 05:00Z to 04:00Z the next day.
        assert_eq!(
            window(&ny, "2024-03-10T07:30:00Z"),
            (at("2024-03-10T05:00:00Z"), at("2024-03-11T04:00:00Z"))
        );
        // Fall back: 2024-11-03 from 04:00Z to 05:00Z the next day.
        assert_eq!(
            window(&ny, "2024-11-03T06:30:00Z"),
            (at("2024-11-03T04:00:00Z"), at("2024-11-04T05:00:00Z"))
        );
        // A month in Paris across the spring change: starts at +01:00,
        // ends at +02:00.
        let paris = CalendarQuota::new(1, Period::Month)
            .unwrap()
            .in_zone("Europe/Paris")
            .unwrap();
        assert_eq!(
            window(&paris, "2024-03-31T12:00:00Z"),
            (at("2024-02-29T23:00:00Z"), at("2024-03-31T22:00:00Z"))
        );
    }

    #[test]
    fn a_missing_midnight_starts_the_day_after_the_gap() {
        // Santiago moved its clocks from 00:00 to 01:00 on 2024-09-08.
        let q = CalendarQuota::new(1, Period::Day)
            .unwrap()
            .in_zone("America/Santiago")
            .unwrap();
        // 01:00 -03:00 is 04:00Z; the previous day began at 00:00 -04:00.
        assert_eq!(
            window(&q, "2024-09-08T12:00:00Z"),
            (at("2024-09-08T04:00:00Z"), at("2024-09-09T03:00:00Z"))
        );
        assert_eq!(
            window(&q, "2024-09-08T03:59:59Z"),
            (at("2024-09-07T04:00:00Z"), at("2024-09-08T04:00:00Z"))
        );
    }

    #[test]
    fn bad_quotas_are_typed_errors() {
        assert_eq!(
            CalendarQuota::new(0, Period::Month),
            Err(CalendarError::ZeroLimit)
        );
        let day = CalendarQuota::new(1, Period::Day).unwrap();
        assert_eq!(
            day.clone().with_reset_day(1),
            Err(CalendarError::ResetDayForDaily)
        );
        let month = CalendarQuota::new(1, Period::Month).unwrap();
        assert_eq!(
            month.clone().with_reset_day(32),
            Err(CalendarError::ResetDayOutOfRange {
                period: Period::Month,
                day: 32,
                max: 31
            })
        );
        let err = month.in_zone("Mars/Olympus_Mons").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown time zone `Mars/Olympus_Mons`; use `UTC` or an IANA name such as `Europe/Paris`"
        );
        assert_eq!(day.window_at(u32::MAX), Err(WindowError::OutOfRange));
    }
}
