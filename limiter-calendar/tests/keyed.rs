//! `KeyedCalendar`: a count per key under one quota, exact per key, with
//! at most `max_keys` keys: a full table sweeps the keys of past periods
//! once per period and otherwise refuses new keys until the reset, never
//! forgetting a key that counted in the current period.

use core::time::Duration;
use std::sync::Arc;

use limiter_calendar::{CalendarQuota, KeyedCalendar, KeyedCalendarError, Period};
use limiter_core::{AcquireError, ManualClock};

const NS: u64 = 1_000_000_000;

fn secs(rfc3339: &str) -> u32 {
    let ts: jiff::Timestamp = rfc3339.parse().unwrap();
    u32::try_from(ts.as_second()).unwrap()
}

fn clock_at(rfc3339: &str) -> ManualClock {
    ManualClock::starting_at(u64::from(secs(rfc3339)) * NS)
}

fn limited(wait_secs: u64) -> KeyedCalendarError {
    KeyedCalendarError::Acquire(AcquireError::RateLimited {
        wait: Duration::from_secs(wait_secs),
    })
}

#[test]
fn each_key_has_its_own_count_and_reset() {
    let clock = clock_at("2024-01-31T23:00:00Z");
    let quota = CalendarQuota::new(3, Period::Month).unwrap();
    let table = KeyedCalendar::with_clock(quota, 100, clock.clone());
    let grant = table.acquire_n(&"t1", 2).unwrap();
    assert_eq!(grant.headroom.remaining, 1);
    assert_eq!(grant.reset_at, secs("2024-02-01T00:00:00Z"));
    assert_eq!(grant.headroom.refill_in, Duration::from_secs(3600));
    assert_eq!(table.acquire_n(&"t1", 2).unwrap_err(), limited(3600));
    assert_eq!(table.acquire_n(&"t2", 3).unwrap().headroom.remaining, 0);
    assert_eq!((table.available(&"t1"), table.available(&"t2")), (1, 0));
    assert_eq!(table.available(&"never"), 3);
    assert_eq!(table.len(), 2);
    assert_eq!(
        table.acquire_n(&"t3", 4).unwrap_err(),
        KeyedCalendarError::Acquire(AcquireError::InsufficientCapacity {
            requested: 4,
            burst: 3
        })
    );
    // A refused first decision keeps nothing.
    assert_eq!(table.len(), 2);

    clock.set(u64::from(secs("2024-02-01T00:00:00Z")) * NS);
    let grant = table.acquire_n(&"t2", 3).unwrap();
    assert_eq!(grant.headroom.remaining, 0);
    assert_eq!(grant.reset_at, secs("2024-03-01T00:00:00Z"));
    assert_eq!(table.available(&"t1"), 3);

    // The limit moves live for every key, keeping their counts.
    table.set_limit(5).unwrap();
    assert_eq!(table.available(&"t2"), 2);
    assert!(table.set_limit(0).is_err());
}

#[test]
fn a_full_table_refuses_new_keys_until_the_reset_and_never_forgets_a_counted_key() {
    let clock = clock_at("2024-03-10T12:00:00Z");
    let quota = CalendarQuota::new(2, Period::Day).unwrap();
    let table = KeyedCalendar::with_clock(quota, 2, clock.clone());
    table.acquire_n(&"a", 2).unwrap();
    table.acquire_n(&"b", 1).unwrap();
    let full = KeyedCalendarError::TooManyKeys {
        max_keys: 2,
        retry_after: Duration::from_secs(12 * 3600),
    };
    assert_eq!(table.acquire_n(&"c", 1).unwrap_err(), full);
    assert_eq!(full.retry_after(), Some(Duration::from_secs(12 * 3600)));
    // Still full a second later (O(1): this period was swept already).
    clock.advance(Duration::from_secs(1));
    assert!(matches!(
        table.acquire_n(&"c", 1),
        Err(KeyedCalendarError::TooManyKeys { .. })
    ));
    assert_eq!(table.new_keys_refused(), 2);
    // The counted keys were kept: a is still spent.
    assert!(matches!(
        table.acquire_n(&"a", 1),
        Err(KeyedCalendarError::Acquire(
            AcquireError::RateLimited { .. }
        ))
    ));
    // Known keys are served at a full table.
    assert_eq!(table.acquire_n(&"b", 1).unwrap().headroom.remaining, 0);

    // The next day: a and b carry nothing; b counts again, so the sweep
    // takes only a, and c gets its slot.
    clock.set(u64::from(secs("2024-03-11T00:00:00Z")) * NS);
    table.acquire_n(&"b", 1).unwrap();
    assert_eq!(table.acquire_n(&"c", 2).unwrap().headroom.remaining, 0);
    assert_eq!(table.len(), 2);
    assert_eq!(table.available(&"a"), 2);
    assert_eq!(table.available(&"b"), 1);
    assert!(matches!(
        table.acquire_n(&"d", 1),
        Err(KeyedCalendarError::TooManyKeys { .. })
    ));
}

#[test]
fn racing_threads_never_exceed_the_limit_per_key_or_the_key_cap() {
    let clock = clock_at("2024-07-01T00:00:00Z");
    let table = Arc::new(KeyedCalendar::with_clock(
        CalendarQuota::new(50, Period::Month).unwrap(),
        8,
        clock,
    ));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let table = table.clone();
            std::thread::spawn(move || {
                let mut granted = [0u32; 12];
                for round in 0..100 {
                    for (k, g) in granted.iter_mut().enumerate() {
                        if (round + k) % 3 != 0 && table.acquire_n(&k, 1).is_ok() {
                            *g += 1;
                        }
                    }
                }
                granted
            })
        })
        .collect();
    let mut per_key = [0u32; 12];
    for t in threads {
        for (k, g) in t.join().unwrap().into_iter().enumerate() {
            per_key[k] += g;
        }
    }
    assert_eq!(table.len(), 8);
    let counted: Vec<u32> = per_key.iter().copied().filter(|&g| g > 0).collect();
    assert_eq!(counted, [50; 8], "{per_key:?}");
}
