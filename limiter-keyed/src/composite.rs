//! One key of a [`KeyedLimiter`] as a [`Limit`] of a composite decision
//! (`limiter_core::composite::try_acquire_all` / `reserve_all`): per user *and* per
//! route *and* global, all or nothing.
//!
//! A [`KeyLimit`] borrows the limiter and holds the key; reserving and
//! cancelling go through [`KeyedLimiter::reserve_n`] and
//! [`KeyedLimiter::cancel`] on that key, so a refused composite gives the
//! key's permits back exactly as `cancel` does (see
//! `limiter_core::composite::reserve_all` for the invariants). Its error type is
//! [`KeyedError`]; a plain `RateLimiter` joins the same list as a
//! `Limit<KeyedError>` through `KeyedError: From<AcquireError>`.

use core::hash::Hash;
use core::time::Duration;

use limiter_core::{Clock, Reservation, composite::Limit};

use crate::error::KeyedError;
use crate::limiter::KeyedLimiter;

/// The limit of one key of a [`KeyedLimiter`], for a composite decision.
/// Made by [`KeyedLimiter::limit`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{composite::Limit, ManualClock, Quota, RateLimiter, composite::try_acquire_all};
/// use limiter_keyed::{KeyedError, KeyedLimiter};
///
/// let clock = ManualClock::new();
/// let per_user = KeyedLimiter::builder(Quota::per_second(1)?)
///     .clock(clock.clone())
///     .build()?;
/// let global = RateLimiter::with_clock(Quota::per_second(100)?.with_burst(10)?, clock.clone());
/// let alice = per_user.limit("alice");
/// let parts: [(&dyn Limit<KeyedError>, u32); 2] = [(&alice, 1), (&global, 1)];
/// try_acquire_all(&parts)?;
/// let refused = try_acquire_all(&parts).unwrap_err();
/// assert_eq!(refused.index, 0); // alice's own limit
/// assert_eq!(refused.error.retry_after(), Some(Duration::from_secs(1)));
/// assert_eq!(global.available(), 9); // one permit, not two
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct KeyLimit<'a, K, C: Clock> {
    limiter: &'a KeyedLimiter<K, C>,
    key: K,
}

impl<K, C: Clock> KeyLimit<'_, K, C> {
    /// The key this limit decides for.
    pub fn key(&self) -> &K {
        &self.key
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// `key`'s limit as a part of a composite decision
    /// (`limiter_core::composite::try_acquire_all`, `reserve_all`); see [`KeyLimit`].
    pub fn limit(&self, key: K) -> KeyLimit<'_, K, C> {
        KeyLimit { limiter: self, key }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> Limit<KeyedError> for KeyLimit<'_, K, C> {
    fn reserve_part(&self, n: u32, max_wait: Duration) -> Result<Reservation, KeyedError> {
        self.limiter.reserve_n(&self.key, n, max_wait)
    }

    fn cancel_part(&self, reservation: Reservation) -> bool {
        self.limiter.cancel(&self.key, reservation)
    }
}
