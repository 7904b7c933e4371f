//! Calendar quotas: a fixed allowance per day, week or month — "10,000 calls
//! per month, resetting on the 1st" — in UTC or an IANA time zone, exact
//! across month lengths, leap days and daylight-saving changes, decided
//! lock-free on one `AtomicU64` like every limiter of `limiter-core`.
//!
//! An accounting quota, not traffic shaping: nothing refills until the
//! period resets, and then all of it does. Pair it with a
//! [`RateLimiter`](limiter_core::RateLimiter) (the pair `(A, B)` through
//! [`Decide`](limiter_core::Decide)) to shape the
//! traffic inside the period as well.
//!
//! * [`CalendarQuota`]: limit, [`Period`], reset day and zone, validated
//!   into typed [`CalendarError`]s; [`CalendarQuota::window_at`] is the pure
//!   function from an instant to its period ([`Window`]).
//! * [`CalendarLimiter`]: the decision, with the exact reset instant for the
//!   `RateLimit` headers ([`CalendarGrant`]) and the exact wait until it on a
//!   refusal. Implements [`Decide`](limiter_core::Decide).
//! * [`KeyedCalendar`]: a count per key (per tenant) under one quota, in
//!   a table of at most `max_keys` keys that refuses new keys when full of
//!   keys counted this period ([`KeyedCalendarError`]).
//! * [`UnixClock`]: the wall clock it runs on; tests use a
//!   [`ManualClock`](limiter_core::ManualClock) set to the instants that
//!   matter (a month end, 29 February, a DST change).
//!
//! # Features
//!
//! * `redis`: `RedisCalendar`, the count kept in
//!   Redis (one key per subject and period, expiring after it), shared by
//!   instances and kept across restarts.
//!
//! # Why a crate of its own
//!
//! Calendar periods need the time-zone database. `limiter-core` is `no_std`
//! and dependency-light; the database (and `std`) live here, behind one
//! small crate that depends on the core for the clock, the errors and the
//! `Decide` trait. Time zones come from `jiff`: the system's database
//! (`/usr/share/zoneinfo`) first, so zone updates arrive with the OS, and a
//! bundled copy where the system has none (scratch containers).
//!
//! # Example
//!
//! ```
//! use limiter_calendar::{CalendarLimiter, CalendarQuota, Period};
//! use limiter_core::ManualClock;
//!
//! let quota = CalendarQuota::new(10_000, Period::Month)?.in_zone("Europe/Paris")?;
//! // 2024-03-31T21:59:59Z is 23:59:59 local on the last day of March.
//! let clock = ManualClock::starting_at(1_711_922_399 * 1_000_000_000);
//! let limiter = CalendarLimiter::with_clock(quota, clock);
//! let grant = limiter.acquire_n(10_000)?;
//! assert_eq!(grant.headroom.remaining, 0);
//! assert_eq!(grant.reset_at, 1_711_922_400); // 2024-04-01T00:00:00+02:00
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod clock;
mod decide;
#[cfg(not(loom))]
mod keyed;
mod limiter;
mod period;
#[cfg(feature = "redis")]
mod redis;
mod sync;

pub use clock::UnixClock;
#[cfg(not(loom))]
pub use keyed::{KeyedCalendar, KeyedCalendarError};
pub use limiter::{CalendarGrant, CalendarLimiter};
pub use period::{CalendarError, CalendarQuota, Period, Window, WindowError};
#[cfg(feature = "redis")]
pub use redis::{EXPIRY_GRACE, RedisCalendar};

/// The pure decision, for the deliberately broken variant in `loom-tests`
/// that must make the same decisions as [`CalendarLimiter`] and differ only
/// in its atomic protocol. Exists only under `cfg(loom)`; not API.
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom {
    /// The word after granting `n` on `word` in the period starting at
    /// `current_start`, or `None` for a refusal.
    pub fn decide(word: u64, current_start: u32, n: u32, limit: u32) -> Option<u64> {
        crate::decide::decide(word, current_start, n, limit).ok()
    }
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
