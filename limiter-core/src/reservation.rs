//! A claimed slot: permits granted now or at a future instant.

use core::time::Duration;

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
    /// The state word before and after this reservation; cancelling swaps
    /// `after` back to `before` if nothing has changed the word since.
    pub(crate) before: u64,
    pub(crate) after: u64,
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
            before: 0,
            after: 0,
        }
    }

    /// The state words before and after the reservation, for algorithms in
    /// this crate that cancel by swapping them back.
    pub(crate) fn words(&self) -> (u64, u64) {
        (self.before, self.after)
    }
}
