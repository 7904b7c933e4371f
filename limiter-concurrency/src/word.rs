//! The state word: the limit and the in-flight count in one `u64`, and the
//! decisions on it as pure functions.
//!
//! ```text
//!  63   62                 32 31                                 0
//! +----+---------------------+------------------------------------+
//! | Q  |   limit (31 bits)   |        in_flight (32 bits)         |
//! +----+---------------------+------------------------------------+
//! ```
//!
//! * `in_flight`: permits held now (granted and not yet released).
//! * `limit`: permits that may be held at once, `1..=MAX_LIMIT`.
//! * `Q` (queued): the wait queue is not empty. Set and cleared only by a
//!   thread holding the queue's lock, always by a CAS on this word.
//!
//! Invariants: `in_flight <= max(limit, in_flight before the last limit
//! cut)`: an admission only ever moves `in_flight` from below `limit` to at
//! most `limit`, and a cut of the limit never revokes a permit, so after a
//! cut `in_flight` may exceed the new limit until enough permits are
//! released. Every transition is one CAS from an observed word to the word a
//! function below computes from it, so a decision is never taken on a value
//! that has changed under it (no check-then-act gap).

/// The largest limit the word holds (31 bits).
pub const MAX_LIMIT: u32 = (1 << 31) - 1;

const IN_FLIGHT_MASK: u64 = 0xFFFF_FFFF;
const LIMIT_SHIFT: u32 = 32;
const LIMIT_MASK: u64 = (MAX_LIMIT as u64) << LIMIT_SHIFT;
const QUEUED: u64 = 1 << 63;

/// A word with `limit`, no permit held and an empty queue.
pub(crate) const fn new(limit: u32) -> u64 {
    (limit as u64) << LIMIT_SHIFT
}

/// Permits held.
pub(crate) const fn in_flight(w: u64) -> u32 {
    (w & IN_FLIGHT_MASK) as u32
}

/// The limit.
pub(crate) const fn limit(w: u64) -> u32 {
    ((w & LIMIT_MASK) >> LIMIT_SHIFT) as u32
}

/// Whether the wait queue holds a waiter.
pub(crate) const fn queued(w: u64) -> bool {
    w & QUEUED != 0
}

/// `w` with the queued flag set or cleared.
pub(crate) const fn with_queued(w: u64, q: bool) -> u64 {
    if q { w | QUEUED } else { w & !QUEUED }
}

/// `w` with `limit` in place of its limit (in-flight and flag kept).
pub(crate) const fn with_limit(w: u64, limit: u32) -> u64 {
    (w & !LIMIT_MASK) | ((limit as u64) << LIMIT_SHIFT)
}

/// The word after admitting one permit, or `None` when none is free. A
/// permit is free when `in_flight < limit` and nobody waits (a waiter is
/// served before a newcomer, see [`free_for_waiter`]).
pub(crate) const fn admit(w: u64) -> Option<u64> {
    if queued(w) || in_flight(w) >= limit(w) {
        None
    } else {
        Some(w + 1)
    }
}

/// The word after admitting one permit for a waiter of the queue (the
/// caller holds the queue's lock), or `None` when none is free.
pub(crate) const fn free_for_waiter(w: u64) -> Option<u64> {
    if in_flight(w) >= limit(w) {
        None
    } else {
        Some(w + 1)
    }
}

/// What a release does to the word it observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// Install this word (`in_flight - 1`): nobody waits, or the limit was
    /// cut below what is held so the freed permit is not free for anyone.
    Decrement(u64),
    /// Hand the permit to the next waiter (under the queue's lock):
    /// `in_flight` stays, the permit changes owner.
    HandOff,
}

/// The release decision. `w` must hold at least one permit.
pub(crate) const fn release(w: u64) -> Release {
    debug_assert!(in_flight(w) > 0);
    if queued(w) && in_flight(w) <= limit(w) {
        Release::HandOff
    } else {
        Release::Decrement(w - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let w = with_queued(new(MAX_LIMIT) + 7, true);
        assert_eq!((limit(w), in_flight(w), queued(w)), (MAX_LIMIT, 7, true));
        let w = with_limit(w, 3);
        assert_eq!((limit(w), in_flight(w), queued(w)), (3, 7, true));
        assert!(!queued(with_queued(w, false)));
    }

    #[test]
    fn admit_stops_at_the_limit_and_behind_waiters() {
        let w = new(2);
        let w1 = admit(w).unwrap();
        let w2 = admit(w1).unwrap();
        assert_eq!(in_flight(w2), 2);
        assert_eq!(admit(w2), None);
        assert_eq!(admit(with_queued(w1, true)), None);
        assert_eq!(
            free_for_waiter(with_queued(w1, true)).map(in_flight),
            Some(2)
        );
        assert_eq!(free_for_waiter(w2), None);
    }

    #[test]
    fn release_hands_off_only_a_permit_that_is_free() {
        let held = new(2) + 2;
        assert_eq!(release(held), Release::Decrement(new(2) + 1));
        assert_eq!(release(with_queued(held, true)), Release::HandOff);
        // A cut to 1 with 2 held: the freed permit is not free, decrement.
        let cut = with_queued(with_limit(held, 1), true);
        assert_eq!(release(cut), Release::Decrement(cut - 1));
    }
}
