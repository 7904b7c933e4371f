//! The public API at the instants where calendars are hard: month ends of
//! every length, 29 February, the daylight-saving changes; exact grants,
//! exact waits and exact reset instants on a manual clock.

use core::time::Duration;
use std::sync::Arc;

use limiter_calendar::{CalendarLimiter, CalendarQuota, Period};
use limiter_core::{AcquireError, Headroom, ManualClock};

const NS: u64 = 1_000_000_000;

/// Seconds since the epoch of an RFC 3339 instant (the test's own
/// arithmetic, independent of the crate's).
fn secs(rfc3339: &str) -> u32 {
    let ts: jiff::Timestamp = rfc3339.parse().unwrap();
    u32::try_from(ts.as_second()).unwrap()
}

fn clock_at(rfc3339: &str) -> ManualClock {
    ManualClock::starting_at(u64::from(secs(rfc3339)) * NS)
}

fn set(clock: &ManualClock, rfc3339: &str) {
    clock.set(u64::from(secs(rfc3339)) * NS);
}

fn limited(wait_secs: u64) -> Result<(), AcquireError> {
    Err(AcquireError::RateLimited {
        wait: Duration::from_secs(wait_secs),
    })
}

#[test]
fn a_monthly_quota_resets_on_the_first_exactly() {
    let clock = clock_at("2024-01-31T23:59:59Z");
    let quota = CalendarQuota::new(3, Period::Month).unwrap();
    let limiter = CalendarLimiter::with_clock(quota, clock.clone());
    let grant = limiter.acquire_n(3).unwrap();
    assert_eq!(
        grant.headroom,
        Headroom {
            remaining: 0,
            refill_in: Duration::from_secs(1)
        }
    );
    assert_eq!(grant.reset_at, secs("2024-02-01T00:00:00Z"));
    assert_eq!(limiter.try_acquire_n(1), limited(1));
    // One nanosecond before the reset: still refused, wait 1 ns.
    clock.set(u64::from(secs("2024-02-01T00:00:00Z")) * NS - 1);
    assert_eq!(
        limiter.try_acquire_n(1),
        Err(AcquireError::RateLimited {
            wait: Duration::from_nanos(1)
        })
    );
    set(&clock, "2024-02-01T00:00:00Z");
    let grant = limiter.acquire_n(1).unwrap();
    assert_eq!(grant.headroom.remaining, 2);
    // February 2024 has 29 days.
    assert_eq!(grant.reset_at, secs("2024-03-01T00:00:00Z"));
    assert_eq!(grant.headroom.refill_in, Duration::from_secs(29 * 86_400));
}

#[test]
fn reset_day_31_follows_short_months_and_the_leap_day() {
    let clock = clock_at("2024-02-28T12:00:00Z");
    let quota = CalendarQuota::new(1, Period::Month)
        .unwrap()
        .with_reset_day(31)
        .unwrap();
    let limiter = CalendarLimiter::with_clock(quota, clock.clone());
    // The period began on 31 January and ends on the leap day.
    assert_eq!(
        limiter.acquire_n(1).unwrap().reset_at,
        secs("2024-02-29T00:00:00Z")
    );
    assert_eq!(limiter.try_acquire_n(1), limited(12 * 3600));
    set(&clock, "2024-02-29T00:00:00Z");
    assert_eq!(
        limiter.acquire_n(1).unwrap().reset_at,
        secs("2024-03-31T00:00:00Z")
    );

    // A common year: 28 February is the last day.
    set(&clock, "2023-02-27T00:00:00Z");
    let fresh = CalendarLimiter::with_clock(limiter.quota().clone(), clock.clone());
    assert_eq!(
        fresh.acquire_n(1).unwrap().reset_at,
        secs("2023-02-28T00:00:00Z")
    );
}

#[test]
fn a_daily_quota_in_new_york_across_both_dst_changes() {
    let clock = clock_at("2024-03-10T04:59:59Z"); // 23:59:59 EST, 9 March
    let quota = CalendarQuota::new(2, Period::Day)
        .unwrap()
        .in_zone("America/New_York")
        .unwrap();
    let limiter = CalendarLimiter::with_clock(quota, clock.clone());
    limiter.try_acquire_n(2).unwrap();
    assert_eq!(limiter.try_acquire_n(1), limited(1));
    set(&clock, "2024-03-10T05:00:00Z"); // midnight EST, a 23-hour day
    let grant = limiter.acquire_n(2).unwrap();
    assert_eq!(grant.reset_at, secs("2024-03-11T04:00:00Z")); // midnight EDT
    assert_eq!(grant.headroom.refill_in, Duration::from_secs(23 * 3600));
    // Through the decision seam: the policy spans the 23-hour day.
    use limiter_core::{Decide, Denial};
    let denial = limiter.decide_now(&(), 1).unwrap_err();
    let policy = denial.policy().unwrap();
    assert_eq!(
        (policy.burst, policy.window()),
        (2, Duration::from_secs(23 * 3600))
    );
    assert!(matches!(denial, Denial::RateLimited { .. }));
    assert_eq!(denial.retry_after(), Some(Duration::from_secs(23 * 3600)));
    // 02:30 local does not exist that day; the period is unaffected.
    set(&clock, "2024-03-10T07:30:00Z");
    assert_eq!(limiter.try_acquire_n(1), limited(20 * 3600 + 1800));

    // Fall back: 3 November lasts 25 hours.
    set(&clock, "2024-11-03T04:00:00Z");
    let grant = limiter.acquire_n(1).unwrap();
    assert_eq!(grant.reset_at, secs("2024-11-04T05:00:00Z"));
    assert_eq!(grant.headroom.refill_in, Duration::from_secs(25 * 3600));
    // 01:30 happens twice; the second one is still the same day.
    set(&clock, "2024-11-03T06:30:00Z");
    limiter.try_acquire_n(1).unwrap();
    assert_eq!(limiter.try_acquire_n(1), limited(22 * 3600 + 1800));
}

#[test]
fn a_weekly_quota_in_berlin_resets_on_sunday_across_the_spring_change() {
    // Sunday 31 March 2024 is the change day in Berlin (+01:00 → +02:00).
    let clock = clock_at("2024-03-30T22:59:59Z"); // Saturday 23:59:59 +01:00
    let quota = CalendarQuota::new(5, Period::Week)
        .unwrap()
        .with_reset_day(7)
        .unwrap()
        .in_zone("Europe/Berlin")
        .unwrap();
    let limiter = CalendarLimiter::with_clock(quota, clock.clone());
    assert_eq!(
        limiter.acquire_n(5).unwrap().reset_at,
        secs("2024-03-30T23:00:00Z")
    );
    set(&clock, "2024-03-30T23:00:00Z");
    let grant = limiter.acquire_n(5).unwrap();
    // Seven days, one of them 23 hours long.
    assert_eq!(grant.reset_at, secs("2024-04-06T22:00:00Z"));
    assert_eq!(
        grant.headroom.refill_in,
        Duration::from_secs(7 * 86_400 - 3600)
    );
}

#[test]
fn a_backwards_clock_never_reopens_a_spent_period() {
    let clock = clock_at("2024-06-02T00:00:00Z");
    let limiter =
        CalendarLimiter::with_clock(CalendarQuota::new(1, Period::Day).unwrap(), clock.clone());
    limiter.try_acquire_n(1).unwrap();
    set(&clock, "2024-06-01T23:59:00Z"); // a step back into yesterday
    // Charged to the newer period, which is spent: the wait runs to its end.
    assert_eq!(limiter.try_acquire_n(1), limited(86_400 + 60));
}

#[test]
fn the_limit_changes_live_keeping_the_count() {
    let clock = clock_at("2024-05-05T10:00:00Z");
    let limiter =
        CalendarLimiter::with_clock(CalendarQuota::new(4, Period::Day).unwrap(), clock.clone());
    limiter.try_acquire_n(3).unwrap();
    limiter.set_limit(2).unwrap();
    assert_eq!(limiter.available(), 0);
    assert_eq!(limiter.try_acquire_n(1), limited(14 * 3600));
    limiter.set_limit(10).unwrap();
    assert_eq!(limiter.available(), 7);
    assert!(limiter.set_limit(0).is_err());
    assert_eq!(
        limiter.try_acquire_n(11),
        Err(AcquireError::InsufficientCapacity {
            requested: 11,
            burst: 10
        })
    );
}

#[test]
fn racing_threads_share_exactly_the_limit() {
    let clock = clock_at("2024-07-01T00:00:00Z");
    let limiter = Arc::new(CalendarLimiter::with_clock(
        CalendarQuota::new(1_000, Period::Month).unwrap(),
        clock,
    ));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let limiter = limiter.clone();
            std::thread::spawn(move || (0..600).filter(|_| limiter.try_acquire().is_ok()).count())
        })
        .collect();
    let granted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(granted, 1_000);
    assert_eq!(limiter.available(), 0);
}

#[test]
fn out_of_range_clocks_are_typed_errors() {
    let clock = ManualClock::starting_at(u64::from(u32::MAX) * NS + NS);
    let limiter = CalendarLimiter::with_clock(CalendarQuota::new(1, Period::Day).unwrap(), clock);
    assert!(matches!(
        limiter.try_acquire_n(1),
        Err(AcquireError::TimeOutOfRange { .. })
    ));
    assert_eq!(limiter.available(), 0);
}
