//! Per-key quotas changed live: [`KeyedLimiter::set_quota_for`] gives one
//! key its own quota (or a new one), [`KeyedLimiter::remove_quota_for`]
//! puts it back on the shared quota, each keeping the key's fill level in
//! permits, as [`set_quota`](KeyedLimiter::set_quota) does for all keys.
//!
//! # The table
//!
//! The overrides live in an `scc::HashIndex` beside the key map, read
//! without a lock by a new key's insertion (which pins its entry to the
//! override it finds). Writers are serialised by a mutex, which makes the
//! cap exact: at most [`max_overrides`](KeyedLimiter::max_overrides)
//! overrides ([`DEFAULT_MAX_OVERRIDES`](crate::DEFAULT_MAX_OVERRIDES) unless the builder says otherwise);
//! one more is [`OverrideError::TooManyOverrides`]. An override outlives
//! its key's state: an idle or evicted key comes back under it.
//!
//! # Moving a key that holds state
//!
//! Under the key's bucket lock (`entry_sync`), the key's cell is retired
//! and its fill level handed to a new cell under the new quota
//! ([`GcraCell::retire_into`](limiter_core::cell::GcraCell::retire_into), the
//! rescale of `set_quota`), and the entry is replaced in place
//! (`OccupiedEntry::update`): the key keeps its slot, and never leaves the
//! map. A decision that read the old cell fails its CAS on `RETIRED`, tries
//! to remove the retired entry (under the same bucket lock, so after the
//! swap: it finds the new entry, which is not retired, and keeps it) and
//! looks the key up again. No decision mixes the two quotas. Reservations
//! made on the old cell can no longer be cancelled (a new identity).
//!
//! # Racing a new key's insertion
//!
//! An insertion reads the table, decides on a private entry, then
//! publishes it under the bucket lock. A writer stores the table, then
//! takes that lock. Either the writer's lock comes second (it finds the
//! published entry and moves it) or the insertion's does; then the table
//! store happened before the insertion's publication, and the insertion
//! reads the table again after publishing and moves its own entry
//! ([`KeyedLimiter::reconcile`]). Moving is idempotent (an entry already
//! under the quota the table names is left alone), so both may run.

use core::fmt;
use core::hash::Hash;
use core::sync::atomic::Ordering;

use limiter_core::{Clock, Quota, cell::CellQuota};
use scc::hash_index::Entry as MapEntry;

use crate::entry::Entry;
use crate::limiter::KeyedLimiter;

/// Why a per-key quota was not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OverrideError {
    /// The limiter already holds `max_overrides` per-key quotas and the key
    /// has none: remove one, or raise
    /// [`max_overrides`](crate::KeyedBuilder::max_overrides).
    TooManyOverrides {
        /// The cap in force.
        max_overrides: usize,
    },
}

impl fmt::Display for OverrideError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverrideError::TooManyOverrides { max_overrides } => write!(
                f,
                "per-key quota refused: {max_overrides} keys already have their own quota; remove one or raise max_overrides"
            ),
        }
    }
}

impl std::error::Error for OverrideError {}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Gives `key` its own `quota` from now on (or replaces the one it
    /// has), keeping its fill level in permits: the permits it owes stay
    /// owed under the new quota (its debt in time is scaled by
    /// `t_new / t_old`, rounded up), an idle key stays full. A key with no state yet is
    /// made under `quota` when it first comes. Returns the override it
    /// replaced, if any. The key's quota no longer follows
    /// [`set_quota`](KeyedLimiter::set_quota) until
    /// [`remove_quota_for`](KeyedLimiter::remove_quota_for).
    ///
    /// # Errors
    ///
    /// [`OverrideError::TooManyOverrides`] when the key has no override and
    /// [`max_overrides`](KeyedLimiter::max_overrides) keys already have
    /// one; nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(4)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire_n(&"tenant-7", 2)?; // 2 permits owed
    /// let gold = Quota::per_second(100)?.with_burst(40)?;
    /// assert_eq!(limiter.set_quota_for(&"tenant-7", gold)?, None);
    /// assert_eq!(limiter.available(&"tenant-7"), 38); // still 2 owed
    /// assert_eq!(limiter.quota_of(&"tenant-7"), gold);
    /// assert_eq!(limiter.available(&"tenant-8"), 4); // others: the shared quota
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota_for(&self, key: &K, quota: Quota) -> Result<Option<Quota>, OverrideError> {
        let previous = {
            let _writer = self.override_writer();
            let previous = self.overrides.peek_with(key, |_, q| *q);
            // Relaxed: written only under the writer lock we hold.
            let count = self.override_count.load(Ordering::Relaxed);
            if previous.is_none() && count >= self.max_overrides {
                return Err(OverrideError::TooManyOverrides {
                    max_overrides: self.max_overrides,
                });
            }
            match self.overrides.entry_sync(key.clone()) {
                MapEntry::Occupied(mut o) => o.update(quota),
                MapEntry::Vacant(v) => {
                    // Relaxed: ordered before our bucket lock below, which
                    // is what an insertion's re-check relies on.
                    self.override_count.store(count + 1, Ordering::Relaxed);
                    v.insert_entry(quota);
                }
            }
            previous
        };
        self.reconcile(key);
        Ok(previous)
    }

    /// Puts `key` back on the shared quota, keeping its fill level in
    /// permits (as [`set_quota_for`](KeyedLimiter::set_quota_for) does).
    /// Returns the override removed, `None` if the key had none (then
    /// nothing changes).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let shared = Quota::per_second(10)?.with_burst(4)?;
    /// let gold = Quota::per_second(100)?.with_burst(40)?;
    /// let limiter = KeyedLimiter::builder(shared)
    ///     .quota_for("tenant-7", gold)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire_n(&"tenant-7", 3)?; // 3 permits owed
    /// assert_eq!(limiter.remove_quota_for(&"tenant-7"), Some(gold));
    /// assert_eq!(limiter.quota_of(&"tenant-7"), shared);
    /// assert_eq!(limiter.available(&"tenant-7"), 1); // still 3 owed, of 4
    /// assert_eq!(limiter.remove_quota_for(&"tenant-7"), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_quota_for(&self, key: &K) -> Option<Quota> {
        let removed = {
            let _writer = self.override_writer();
            let removed = self.overrides.peek_with(key, |_, q| *q)?;
            self.overrides.remove_sync(key);
            // Relaxed: as in `set_quota_for`.
            let count = self.override_count.load(Ordering::Relaxed);
            self.override_count
                .store(count.saturating_sub(1), Ordering::Relaxed);
            removed
        };
        self.reconcile(key);
        Some(removed)
    }

    /// The quota `key` has of its own, if any (from
    /// [`quota_for`](crate::KeyedBuilder::quota_for) or
    /// [`set_quota_for`](KeyedLimiter::set_quota_for)).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<&str>::new(Quota::per_second(10)?);
    /// assert_eq!(limiter.override_of(&"tenant-7"), None);
    /// limiter.set_quota_for(&"tenant-7", Quota::per_second(1)?)?;
    /// assert_eq!(limiter.override_of(&"tenant-7"), Some(Quota::per_second(1)?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn override_of(&self, key: &K) -> Option<Quota> {
        self.overrides.peek_with(key, |_, q| *q)
    }

    /// Every key with its own quota, in no particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<&str>::new(Quota::per_second(10)?);
    /// limiter.set_quota_for(&"tenant-7", Quota::per_second(1)?)?;
    /// assert_eq!(limiter.overrides(), vec![("tenant-7", Quota::per_second(1)?)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn overrides(&self) -> Vec<(K, Quota)> {
        // Relaxed: a capacity hint.
        let mut out = Vec::with_capacity(self.override_count.load(Ordering::Relaxed));
        self.overrides.iter_sync(|k, q| {
            out.push((k.clone(), *q));
            true
        });
        out
    }

    /// The most keys that may have their own quota.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::{DEFAULT_MAX_OVERRIDES, KeyedLimiter};
    ///
    /// let limiter = KeyedLimiter::<u64>::new(Quota::per_second(10)?);
    /// assert_eq!(limiter.max_overrides(), DEFAULT_MAX_OVERRIDES);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn max_overrides(&self) -> usize {
        self.max_overrides
    }

    fn override_writer(&self) -> std::sync::MutexGuard<'_, ()> {
        // A poisoned lock guards no data of its own (the table is the
        // HashIndex): carry on.
        self.override_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The record a new entry for `key` starts with: its override, pinned,
    /// or the shared quota's.
    pub(crate) fn new_record(&self, key: &K) -> CellQuota {
        match self.override_of(key) {
            Some(own) => CellQuota::pinned(own),
            None => CellQuota::following(&self.shared),
        }
    }

    /// Moves `key`'s entry, if it has one, to the quota the table names
    /// now: a pinned record of its override, or a record following the
    /// shared quota; nothing if it is already there (see the module docs).
    pub(crate) fn reconcile(&self, key: &K) {
        let MapEntry::Occupied(mut occupied) = self.map.entry_sync(key.clone()) else {
            return;
        };
        // Read under the bucket lock: a writer's table store that precedes
        // a later holder of this lock is seen by it.
        let wanted = self.override_of(key);
        let entry = occupied.get();
        let record = &entry.quota;
        let in_place = match wanted {
            Some(own) => record.is_pinned() && record.quota() == own,
            None => !record.is_pinned(),
        };
        if in_place {
            return;
        }
        let now = self.now();
        // Bring a following record up to the shared quota first, so the
        // move starts from the state the key would have now.
        let _ = entry.cell.available(self.quota_of_entry(entry), now);
        let quota = match wanted {
            Some(own) => CellQuota::pinned(own),
            None => CellQuota::following(&self.shared),
        };
        let Some(cell) = entry
            .cell
            .retire_into(self.quota_of_entry(entry), quota.quota(), now)
        else {
            // Retired by a sweep or an eviction, which frees its slot and
            // removes it; the key comes back under the table's quota.
            return;
        };
        // The retired entry's slot passes to its replacement.
        occupied.update(Box::new(Entry { cell, quota }));
    }
}

#[cfg(test)]
mod tests {
    use core::time::Duration;

    use limiter_core::{ManualClock, Quota};

    use crate::{KeyedLimiter, OverrideError};

    #[test]
    fn the_cap_is_exact_and_replacing_is_free() {
        let limiter = KeyedLimiter::builder(Quota::per_second(10).unwrap())
            .max_overrides(2)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let q = Quota::per_second(1).unwrap();
        limiter.set_quota_for(&1, q).unwrap();
        limiter.set_quota_for(&2, q).unwrap();
        assert_eq!(
            limiter.set_quota_for(&3, q),
            Err(OverrideError::TooManyOverrides { max_overrides: 2 })
        );
        assert_eq!(limiter.quota_of(&3), Quota::per_second(10).unwrap());
        let q2 = Quota::per_second(2).unwrap();
        assert_eq!(limiter.set_quota_for(&2, q2), Ok(Some(q)));
        limiter.remove_quota_for(&1);
        assert_eq!(limiter.set_quota_for(&3, q), Ok(None));
    }

    #[test]
    fn a_debt_is_rescaled_and_the_slot_kept() {
        let clock = ManualClock::new();
        let limiter = KeyedLimiter::builder(Quota::per_second(10).unwrap())
            .max_keys(1)
            .clock(clock.clone())
            .build()
            .unwrap();
        limiter.try_acquire(&"a").unwrap();
        // One permit owed 100 ms; under 1/s it is owed 1 s.
        limiter
            .set_quota_for(&"a", Quota::per_second(1).unwrap())
            .unwrap();
        assert_eq!(limiter.len(), 1);
        let wait = limiter.try_acquire(&"a").unwrap_err().retry_after();
        assert_eq!(wait, Some(Duration::from_secs(1)));
        clock.advance(Duration::from_millis(500));
        limiter.remove_quota_for(&"a");
        // Half a second of 1 s owed is half a permit: 50 ms at 10/s.
        let wait = limiter.try_acquire(&"a").unwrap_err().retry_after();
        assert_eq!(wait, Some(Duration::from_millis(50)));
        assert_eq!(limiter.len(), 1);
    }
}
