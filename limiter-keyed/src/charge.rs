//! [`ChargeKeyAfter`]: "admit now, charge the rest later" for one key of a
//! [`KeyedLimiter`], as capped GCRA debt in the key's own quota (see
//! `limiter_core::debt::ChargeAfter` for the cap and the cost).

use core::hash::Hash;
use core::time::Duration;

use limiter_core::{AcquireError, Clock, debt::Debt, debt::charge_in_chunks};

use crate::error::KeyedError;
use crate::limiter::KeyedLimiter;

/// Charges a key permits after admission, as capped debt.
pub trait ChargeKeyAfter<K> {
    /// Charges `key` `permits` more, never pushing its next permit more than
    /// `max(cap, t)` away (`t` of the key's quota). A key the limiter cannot
    /// hold (full, refusing new keys) is charged nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{debt::Debt, ManualClock, Quota};
    /// use limiter_keyed::{ChargeKeyAfter, KeyedLimiter};
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(100)?.with_burst(100)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire(&"tenant-7")?;
    /// // The response reports 250 tokens: 99 from the burst, 151 of debt.
    /// let debt = limiter.charge_key_after(&"tenant-7", 250, Duration::from_secs(60));
    /// assert_eq!(debt, Debt { charged: 250, dropped: 0 });
    /// let wait = limiter.try_acquire(&"tenant-7").unwrap_err().retry_after();
    /// assert_eq!(wait, Some(Duration::from_millis(1_520))); // 151 owed, then t
    /// assert!(limiter.try_acquire(&"tenant-8").is_ok()); // other keys untouched
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn charge_key_after(&self, key: &K, permits: u64, cap: Duration) -> Debt;
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> ChargeKeyAfter<K> for KeyedLimiter<K, C> {
    fn charge_key_after(&self, key: &K, permits: u64, cap: Duration) -> Debt {
        charge_in_chunks(permits, cap, self.quota_of(key), |n, max_wait| {
            match self.reserve_n(key, n, max_wait) {
                Ok(_spent) => Ok(()),
                Err(KeyedError::Limited(e)) => Err(e),
                // Any refusal other than a wait ends the charge.
                Err(KeyedError::TooManyKeys { .. }) => Err(AcquireError::TimeOutOfRange { now: 0 }),
            }
        })
    }
}
