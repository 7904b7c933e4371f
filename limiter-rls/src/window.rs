//! Fixed-window arithmetic as envoyproxy/ratelimit defines it, as pure
//! functions of Unix time, and the [`UnixClock`] every backend reads.
//!
//! A window of a unit `d` seconds long (`UnitToDivider`: a month is 30
//! days, a year 365) starts at `⌊now / d⌋ · d` in Unix seconds; its Redis
//! key is `CACHE_KEY_PREFIX + domain + "_" + (key + "_" + value + "_")… +
//! window_start`, incremented with `INCRBY hits` and given `EXPIRE d`. A
//! request is within the limit when the count after adding its hits is at
//! most `requests_per_unit`.
//!
//! Units: Unix nanoseconds for `now`, seconds for window starts (as in the
//! keys).

use core::time::Duration;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use limiter_core::Clock;

const NANOS: u64 = 1_000_000_000;

/// The start of the window holding `now_nanos`, in Unix seconds.
pub(crate) fn window_start(now_nanos: u64, unit_seconds: u64) -> u64 {
    let s = now_nanos / NANOS;
    s / unit_seconds * unit_seconds
}

/// The time from `now_nanos` to the end of its window.
pub(crate) fn until_window_end(now_nanos: u64, unit_seconds: u64) -> Duration {
    let end = (window_start(now_nanos, unit_seconds) + unit_seconds).saturating_mul(NANOS);
    Duration::from_nanos(end.saturating_sub(now_nanos))
}

/// The Redis key of a counter: `prefix + key + window_start`, where `key`
/// is `domain_key_value_…_` (theirs, bit for bit).
pub(crate) fn cache_key(prefix: &str, key: &str, window_start: u64) -> String {
    let mut s = String::with_capacity(prefix.len() + key.len() + 20);
    s.push_str(prefix);
    s.push_str(key);
    s.push_str(&window_start.to_string());
    s
}

/// Whether `hits` more fit in a window that holds `count`.
pub(crate) fn fits(count: u64, hits: u64, limit: u32) -> bool {
    count.saturating_add(hits) <= u64::from(limit)
}

/// A monotonic clock whose origin is the Unix epoch: the wall time at
/// start-up plus the monotonic time since. GCRA never sees time go back
/// (an NTP step does not move it), and fixed windows align on Unix time as
/// envoyproxy/ratelimit's do.
#[derive(Debug, Clone, Copy)]
pub struct UnixClock {
    start: Instant,
    start_unix: u64,
}

impl UnixClock {
    /// A clock reading Unix time now.
    pub fn new() -> UnixClock {
        let start_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        UnixClock {
            start: Instant::now(),
            start_unix,
        }
    }
}

impl Default for UnixClock {
    fn default() -> UnixClock {
        UnixClock::new()
    }
}

impl Clock for UnixClock {
    fn now(&self) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.start_unix.saturating_add(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_are_theirs() {
        // 2026-01-01T00:00:30Z, a minute limit: the window started at :00.
        let now = 1_767_225_630 * NANOS;
        let start = window_start(now, 60);
        assert_eq!(start, 1_767_225_600);
        assert_eq!(
            cache_key("pfx_", "mongo_cps_database_users_", start),
            "pfx_mongo_cps_database_users_1767225600"
        );
        assert_eq!(until_window_end(now, 60), Duration::from_secs(30));
    }

    proptest! {
        /// Against the plain definition: the window is the unique multiple
        /// of `d` at or before `now`, and ends `d` later, after `now`.
        #[test]
        fn windows_tile_time(now in 0u64..u64::MAX / 2, d in prop::sample::select(vec![1u64, 60, 3600, 86_400, 604_800, 2_592_000, 31_536_000])) {
            let start = window_start(now, d);
            let secs = now / NANOS;
            prop_assert_eq!(start % d, 0);
            prop_assert!(start <= secs && secs < start + d);
            let left = until_window_end(now, d);
            prop_assert!(left > Duration::ZERO && left <= Duration::from_secs(d));
            prop_assert_eq!(u128::from(now) + left.as_nanos(), u128::from(start + d) * u128::from(NANOS));
        }
    }
}
