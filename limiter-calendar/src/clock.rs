//! [`UnixClock`]: the system's wall clock, in nanoseconds since the Unix
//! epoch, the scale a calendar quota is decided on.

use std::time::{SystemTime, UNIX_EPOCH};

use limiter_core::Clock;

/// The system's wall clock (`SystemTime`), read as nanoseconds since
/// 1970-01-01T00:00:00Z; 0 for a clock set before 1970.
///
/// A calendar period is a civil notion, so it is decided on civil time: a
/// wall clock stepped by NTP moves the decision with it. A step backwards
/// across a reset can only make the quota stricter (see `decide`).
///
/// # Examples
///
/// ```
/// use limiter_calendar::UnixClock;
/// use limiter_core::Clock;
///
/// assert!(UnixClock.now() > 1_700_000_000 * 1_000_000_000); // after November 2023
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct UnixClock;

impl Clock for UnixClock {
    fn now(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}
