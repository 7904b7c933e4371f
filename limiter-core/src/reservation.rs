//! A claimed slot: permits granted now or at a future instant, and the
//! [`Headroom`] a decision leaves behind.

use core::time::Duration;

use crate::identity::Owner;

/// Permits claimed by [`RateLimiter::reserve_n`](crate::RateLimiter::reserve_n):
/// they may be used from [`ready_at`](Reservation::ready_at) on.
///
/// A reservation is a promise already counted against the quota. Give it back
/// with [`RateLimiter::cancel`](crate::RateLimiter::cancel) if the permits
/// will not be used; dropping it keeps them spent.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a reservation is already counted; wait for it, or cancel it"]
pub struct Reservation {
    pub(crate) permits: u32,
    pub(crate) ready_at: u64,
    pub(crate) wait: u64,
    /// The limiter (or per-key cell) that issued it; `cancel` refuses any
    /// other's.
    pub(crate) owner: Owner,
    pub(crate) undo: Undo,
}

/// How the limiter that made a reservation can take it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undo {
    /// Nothing to undo (zero permits, or an algorithm that cannot).
    Nothing,
    /// Swap a 64-bit state word from `after` back to `before` if nothing has
    /// changed it since and no quota change has begun since the `changes`-th
    /// (GCRA, priority tiers).
    Word {
        before: u64,
        after: u64,
        changes: u64,
    },
    /// Permits handed out of a refund that was only partly taken: cancelling
    /// records them as a refund at `slot` (limiter time) again, if no quota
    /// change has begun since the `changes`-th (GCRA).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    Refund { slot: u64, changes: u64 },
    /// The same for a 128-bit state word (warm-up).
    WideWord { before: u128, after: u128 },
    /// Take the permits out of the count of window `window` (sliding window).
    Window { window: u64 },
}

impl Reservation {
    /// How long after the decision the permits may be used (zero if at once).
    pub fn wait(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }

    /// The instant, in the limiter clock's nanoseconds, from which the permits
    /// may be used.
    pub fn ready_at(&self) -> u64 {
        self.ready_at
    }

    /// How many permits were reserved.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// A reservation for `permits` ready at `ready_at` after `wait`, that no
    /// state can cancel. For algorithms whose state cannot hold a future slot
    /// (their reservations are immediate grants).
    pub fn uncancellable(permits: u32, ready_at: u64, wait: Duration) -> Reservation {
        let wait = crate::quota::saturating_nanos(wait);
        Reservation {
            permits,
            ready_at,
            wait,
            owner: Owner::NONE,
            undo: Undo::Nothing,
        }
    }
}

/// What a limiter has left right after a decision, computed from the state
/// that decision wrote (not from a second look, which a concurrent caller
/// could already have moved): the `r` and `t` of an HTTP `RateLimit` header.
///
/// Returned beside the reservation by
/// [`RateLimiter::reserve_n_with_headroom`](crate::RateLimiter::reserve_n_with_headroom)
/// and [`GcraCell::headroom_of`](crate::cell::GcraCell::headroom_of).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{Headroom, ManualClock, Quota, RateLimiter};
///
/// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(3)?, ManualClock::new());
/// let (_r, headroom) = limiter.reserve_n_with_headroom(1, Duration::ZERO)?;
/// assert_eq!(headroom, Headroom { remaining: 2, refill_in: Duration::from_millis(100) });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headroom {
    /// Permits a request made right after the decision would be granted at
    /// once (0 after a reservation that has to wait: the slots up to it are
    /// taken).
    pub remaining: u32,
    /// Time from the decision until one more permit than `remaining` is
    /// available; zero when the limiter is full.
    pub refill_in: Duration,
}
