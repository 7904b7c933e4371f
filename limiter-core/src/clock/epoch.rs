//! [`Epoch`]: the instant a limiter was made, from which it counts time.
//!
//! A clock may count from any origin: process start ([`MonotonicClock`]),
//! an arbitrary counter value ([`TscClock`]), or the Unix epoch (a system
//! clock, 1.8·10^18 ns in 2027). The limiter's state words hold at most
//! [`MAX_SPAN`] (2^60 − 1 ns, about 36.5 years), so a limiter does not store
//! clock readings: it stores nanoseconds since its own epoch, the clock's
//! reading when the limiter was made. The span limit is then measured from
//! the limiter's birth, whatever the clock's origin.
//!
//! Invariants:
//!
//! * `elapsed(now) = now − origin`, or 0 for a reading before the origin (a
//!   clock that stepped back; reading it as the epoch is the strict choice,
//!   since GCRA decisions only admit more as time grows).
//! * `limit = min(MAX_SPAN, u64::MAX − origin)`: every limiter time at or
//!   below it converts back to a clock reading (`to_clock`) without
//!   overflow. Limiter times past `limit` are out of range.
//!
//! [`MonotonicClock`]: crate::MonotonicClock
//! [`TscClock`]: crate::clock::TscClock

use crate::quota::MAX_SPAN;

/// The clock reading at a limiter's birth, and the furthest limiter time it
/// can represent. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Epoch {
    origin: u64,
    limit: u64,
}

impl Epoch {
    /// An epoch at the clock reading `origin`.
    pub(crate) fn at(origin: u64) -> Epoch {
        Epoch {
            origin,
            limit: MAX_SPAN.min(u64::MAX - origin),
        }
    }

    /// Nanoseconds of limiter time at the clock reading `now`.
    #[inline]
    pub(crate) fn elapsed(self, now: u64) -> u64 {
        now.saturating_sub(self.origin)
    }

    /// [`elapsed`](Epoch::elapsed) when the reading is at or after the
    /// origin and at most [`limit`](Epoch::limit) past it; `None`
    /// otherwise. One subtraction and one comparison: a reading before the
    /// origin wraps to at least `2^64 − origin`, which is past `limit`
    /// (`limit ≤ u64::MAX − origin`).
    #[inline]
    pub(crate) fn elapsed_in_range(self, now: u64) -> Option<u64> {
        let ns = now.wrapping_sub(self.origin);
        (ns <= self.limit).then_some(ns)
    }

    /// The clock reading at limiter time `ns`; `ns` must be at most
    /// [`limit`](Epoch::limit).
    #[inline]
    pub(crate) fn to_clock(self, ns: u64) -> u64 {
        debug_assert!(ns <= self.limit);
        self.origin + ns
    }

    /// The furthest limiter time that is in range.
    #[inline]
    pub(crate) fn limit(self) -> u64 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_in_range_is_elapsed_within_the_range_and_none_outside() {
        for origin in [0, 7, 1 << 40, u64::MAX - MAX_SPAN, u64::MAX - 5, u64::MAX] {
            let epoch = Epoch::at(origin);
            for now in [
                0,
                1,
                origin.saturating_sub(1),
                origin,
                origin.saturating_add(1),
            ]
            .into_iter()
            .chain([origin.saturating_add(epoch.limit()), u64::MAX])
            .chain([origin.saturating_add(epoch.limit()).saturating_add(1)])
            {
                let expected =
                    (now >= origin && now - origin <= epoch.limit()).then(|| epoch.elapsed(now));
                assert_eq!(
                    epoch.elapsed_in_range(now),
                    expected,
                    "origin {origin} now {now}"
                );
            }
        }
    }

    #[test]
    fn any_origin_converts_both_ways() {
        for origin in [0, 1_800_000_000_000_000_000, u64::MAX - 3_600_000_000_000] {
            let e = Epoch::at(origin);
            assert_eq!(e.elapsed(origin), 0);
            assert_eq!(e.elapsed(origin.saturating_sub(5)), 0);
            assert_eq!(e.to_clock(e.limit()), origin + e.limit());
            assert_eq!(e.elapsed(e.to_clock(e.limit())), e.limit());
        }
        assert_eq!(Epoch::at(0).limit(), MAX_SPAN);
        assert_eq!(Epoch::at(u64::MAX - 10).limit(), 10);
    }
}
