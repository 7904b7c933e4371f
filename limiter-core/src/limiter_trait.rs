//! [`Limiter`]: the one interface every algorithm offers, so that waiting
//! (blocking or async), metering and composition are written once.

use core::time::Duration;

use crate::clock::Clock;
use crate::error::AcquireError;
use crate::limiter::RateLimiter;
use crate::reservation::Reservation;

/// A rate-limiting algorithm: all-or-nothing tries, reservations of future
/// slots where the algorithm can hold them, and cancellation.
///
/// Implemented by [`RateLimiter`] and by every other algorithm of this crate.
/// An algorithm whose state cannot hold a future slot (a sliding window,
/// say) documents what its `reserve_n` does; the rule is that it never
/// admits more than its limit.
pub trait Limiter: Send + Sync {
    /// Takes `n` permits now, all or nothing.
    ///
    /// # Errors
    ///
    /// [`AcquireError::InsufficientCapacity`] when `n` can never be granted,
    /// [`AcquireError::RateLimited`] with the exact wait otherwise, and
    /// [`AcquireError::TimeOutOfRange`] past the limiter's span.
    fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError>;

    /// Claims the earliest slot for `n` permits if it comes within
    /// `max_wait`; fails at once, consuming nothing, otherwise.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](Limiter::try_acquire_n), with the wait compared
    /// to `max_wait`.
    fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError>;

    /// Gives back an unused reservation; returns whether its permits are
    /// back in the limiter. [`RateLimiter`] gives them back whether or not
    /// later reservations depend on them (see [`RateLimiter::cancel`]); each
    /// algorithm documents what it can give back. A reservation of another
    /// limiter is always refused.
    fn cancel(&self, reservation: Reservation) -> bool;

    /// Nanoseconds on the clock that [`Reservation::ready_at`] is measured
    /// on. Waiting layers read it to turn a slot into a deadline.
    fn now(&self) -> u64;

    /// Takes one permit now.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](Limiter::try_acquire_n).
    fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }
}

impl<C: Clock> Limiter for RateLimiter<C> {
    #[inline]
    fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        RateLimiter::try_acquire_n(self, n)
    }

    #[inline]
    fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        RateLimiter::reserve_n(self, n, max_wait)
    }

    fn cancel(&self, reservation: Reservation) -> bool {
        RateLimiter::cancel(self, reservation)
    }

    fn now(&self) -> u64 {
        self.clock().now()
    }
}

/// A pointer to a limiter is that limiter: `&L`, `Arc<L>`.
macro_rules! forward_limiter {
    ($($pointer:ty),*) => {$(
        impl<L: Limiter + ?Sized> Limiter for $pointer {
            #[inline]
            fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
                (**self).try_acquire_n(n)
            }
            #[inline]
            fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
                (**self).reserve_n(n, max_wait)
            }
            fn cancel(&self, reservation: Reservation) -> bool {
                (**self).cancel(reservation)
            }
            fn now(&self) -> u64 {
                (**self).now()
            }
        }
    )*};
}

forward_limiter!(&L, alloc::sync::Arc<L>);
