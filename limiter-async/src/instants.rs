//! [`InstantMap`]: the tokio instant of a reserved slot.
//!
//! A reservation names its slot as a reading of the limiter's clock
//! (`ready_at`, ns) and as a wait from the decision. Sleeping needs a tokio
//! [`Instant`]. In virtual time (paused tokio time) the two clocks are the
//! same clock shifted, so the map is a fixed pairing and exact; in real time
//! the limiter's clock may be the CPU counter (the fast [`TokioClock`]) or
//! any other real-time clock, so the slot is `Instant::now()` plus the wait,
//! read when the wait begins, and no drift between the two clocks can
//! accumulate.
//!
//! Invariant: a deadline is never earlier than the slot, up to the
//! nanoseconds between the decision and the `Instant` read in real time
//! (which only make it later).

use core::time::Duration;

use tokio::time::Instant;

use crate::clock::{TokioClock, saturating_add};
use crate::real_time::tokio_follows_real_time;

/// Maps a limiter's clock readings (ns) to tokio instants, for the
/// deadline of a reserved slot.
///
/// * `Fixed`: in virtual time, the pair `(instant, nanos)` read together
///   once, then `instant_at(n) = instant + (n − nanos)`. For a limiter on a
///   [`TokioClock`] the pair is `(origin, 0)` and the map is exact; for any
///   other limiter it is read when the
///   [`AsyncLimiter`](crate::AsyncLimiter) is made, and is exact as long as
///   the limiter's clock runs at tokio's pace (build it on a `TokioClock`).
/// * `Live`: in real time, a slot's instant is `Instant::now()` plus the
///   reservation's wait, read when the wait begins: the limiter's clock and
///   tokio's are paired at every wait, so they cannot drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InstantMap {
    /// Virtual time: a fixed pairing.
    Fixed {
        /// The tokio instant paired with `nanos`.
        instant: Instant,
        /// The limiter reading paired with `instant`.
        nanos: u64,
    },
    /// Real time: paired at each wait.
    Live,
}

impl InstantMap {
    /// The map of a limiter on `clock`.
    pub(crate) fn of_clock(clock: &TokioClock) -> InstantMap {
        if clock.reads_tokio() {
            InstantMap::Fixed {
                instant: clock.origin(),
                nanos: 0,
            }
        } else {
            InstantMap::Live
        }
    }

    /// The map of a limiter whose clock reads `nanos` now: fixed in virtual
    /// time, live in real time.
    pub(crate) fn pairing_now_with(nanos: u64) -> InstantMap {
        if tokio_follows_real_time() {
            InstantMap::Live
        } else {
            InstantMap::Fixed {
                instant: Instant::now(),
                nanos,
            }
        }
    }

    /// The tokio instant of a slot at the limiter reading `ready_at`, which
    /// is `wait` from the decision that reserved it.
    pub(crate) fn deadline(&self, ready_at: u64, wait: Duration) -> Instant {
        match *self {
            InstantMap::Fixed { instant, nanos } => shifted(instant, nanos, ready_at),
            InstantMap::Live => saturating_add(Instant::now(), wait),
        }
    }
}

/// The instant of the reading `nanos`, given that `now` and `now_nanos`
/// were read together.
fn shifted(now: Instant, now_nanos: u64, nanos: u64) -> Instant {
    match nanos.checked_sub(now_nanos) {
        Some(after) => saturating_add(now, Duration::from_nanos(after)),
        None => now
            .checked_sub(Duration::from_nanos(now_nanos - nanos))
            .unwrap_or(now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_map_is_exact_and_a_live_one_adds_the_wait() {
        let origin = Instant::now();
        let fixed = InstantMap::of_clock(&TokioClock::tokio_time(origin));
        assert_eq!(
            fixed.deadline(5_000, Duration::from_secs(9)),
            origin + Duration::from_micros(5)
        );
        let live = InstantMap::Live;
        assert!(live.deadline(0, Duration::from_secs(9)) >= origin + Duration::from_secs(9));
    }
}
