//! Waiting for a key's permits on tokio (feature `tokio`), with the FIFO and
//! timeout semantics of `limiter-async`'s `AsyncLimiter`.
//!
//! Every wait is two steps: **reserve** the earliest slot for the key with
//! one CAS on its cell (slots of one key are handed out in CAS order, so
//! waiters on a key are served first come, first served), then **sleep
//! until** the slot's absolute instant on the [`TokioClock`]
//! (`sleep_until(instant_at(ready_at))`, never a relative sleep or a retry
//! loop). A timeout is decided before sleeping: a slot beyond it fails at
//! once and consumes nothing.
//!
//! Invariant (cancel safety): between the reservation and the end of the
//! sleep, the reservation is owned by a guard; dropping the future hands the
//! permits back through [`KeyedLimiter::cancel`]: the key's state is
//! restored when no later reservation of that key depends on them, and
//! otherwise the slot goes to the key's next waiter that would wait longer.
//! Only a slot already passed, or a key whose state was evicted meanwhile,
//! leaves them spent: stricter, never looser.

use core::hash::Hash;
use core::time::Duration;

use limiter_async::TokioClock;
use limiter_core::Reservation;
use tokio::time::sleep_until;

use crate::error::KeyedError;
use crate::limiter::KeyedLimiter;

/// Owns a key's reservation while it is waited for; cancels it on drop
/// unless kept.
struct Waiting<'a, K: Hash + Eq + Clone + Send + Sync> {
    limiter: &'a KeyedLimiter<K, TokioClock>,
    key: &'a K,
    reservation: Option<Reservation>,
}

impl<K: Hash + Eq + Clone + Send + Sync> Drop for Waiting<'_, K> {
    fn drop(&mut self) {
        if let Some(reservation) = self.reservation.take() {
            // Refused only for a slot already passed or an evicted state.
            let _given_back = self.limiter.cancel(self.key, reservation);
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync> KeyedLimiter<K, TokioClock> {
    /// Waits for one permit for `key`, served in FIFO order with the key's
    /// other waiters.
    ///
    /// # Errors
    ///
    /// [`KeyedError::TooManyKeys`] for a new key when full, at once;
    /// [`KeyedError::Limited`] only with `TimeOutOfRange` (36.5 years after
    /// the clock's origin).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future before it completes gives the permit
    /// back to the key (the slot goes to the key's next waiter when a later
    /// reservation depends on it).
    pub async fn take(&self, key: &K) -> Result<(), KeyedError> {
        self.take_n_within(key, 1, Duration::MAX).await
    }

    /// Waits for `n` permits for `key`.
    ///
    /// # Errors
    ///
    /// As [`take`](KeyedLimiter::take), plus
    /// `Limited(InsufficientCapacity)` if `n` exceeds the key's burst.
    ///
    /// # Cancel safety
    ///
    /// As [`take`](KeyedLimiter::take).
    pub async fn take_n(&self, key: &K, n: u32) -> Result<(), KeyedError> {
        self.take_n_within(key, n, Duration::MAX).await
    }

    /// Waits for one permit for `key` if its slot comes within `timeout`;
    /// otherwise fails at once, consuming nothing.
    ///
    /// # Errors
    ///
    /// `Limited(RateLimited { wait })` with the wait the slot would need
    /// when it exceeds `timeout`; otherwise as [`take`](KeyedLimiter::take).
    ///
    /// # Cancel safety
    ///
    /// As [`take`](KeyedLimiter::take).
    pub async fn take_with_timeout(&self, key: &K, timeout: Duration) -> Result<(), KeyedError> {
        self.take_n_within(key, 1, timeout).await
    }

    async fn take_n_within(&self, key: &K, n: u32, max_wait: Duration) -> Result<(), KeyedError> {
        let reservation = self.reserve_n(key, n, max_wait)?;
        let wait = reservation.wait();
        let deadline = self.clock.instant_at(reservation.ready_at());
        let mut waiting = Waiting {
            limiter: self,
            key,
            reservation: Some(reservation),
        };
        // A slot that is now needs no timer.
        if !wait.is_zero() {
            sleep_until(deadline).await;
        }
        waiting.reservation = None;
        Ok(())
    }
}
