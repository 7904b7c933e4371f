//! The key table of a [`KeyedLimiter`]: how many keys it holds, their
//! quotas, and how a key's entry is found, inserted or removed.

use core::hash::Hash;
use std::sync::atomic::Ordering;

use limiter_core::{AcquireError, Clock, Quota, cell::GcraCell, cell::QuotaOf};

use super::KeyedLimiter;
use crate::entry::{Entry, Room};
use crate::error::KeyedError;

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// How many keys hold state; never more than
    /// [`max_keys`](KeyedLimiter::max_keys).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert_eq!(limiter.len(), 0);
    /// limiter.try_acquire(&"alice")?;
    /// limiter.try_acquire(&"bob")?;
    /// assert!(limiter.try_acquire_n(&"carol", 2).is_err()); // refused: not kept
    /// assert_eq!(limiter.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        // Relaxed: a snapshot of a counter.
        self.count.load(Ordering::Relaxed)
    }

    /// Whether no key holds state.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert!(limiter.is_empty());
    /// limiter.try_acquire(&"alice")?;
    /// assert!(!limiter.is_empty());
    /// clock.advance(Duration::from_millis(100)); // "alice" is idle again
    /// limiter.evict_idle();
    /// assert!(limiter.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many keys were forgotten while still limited, to make room for a
    /// new key, since the limiter was made: a cumulative count that only
    /// grows (wrapping after 2^64), for a caller that reports table
    /// pressure once per interval by the difference of two readings.
    ///
    /// Only [`WhenFull::EvictLeastRecent`](crate::WhenFull::EvictLeastRecent) evicts: each step that found no
    /// idle key and forgot the cheapest one counts 1, and so does a new key
    /// decided on a cell that is not kept (as if inserted and at once
    /// evicted, see `docs/keyed.md`). Idle keys swept away carry no
    /// information (they are full again) and are not counted. Under
    /// [`WhenFull::RejectNewKeys`](crate::WhenFull::RejectNewKeys) it stays 0; see
    /// [`new_keys_refused`](KeyedLimiter::new_keys_refused).
    ///
    /// # Memory ordering
    ///
    /// A relaxed counter: a reading is exact for the calls that happened
    /// before it in this thread, and eventually counts every other one.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::{KeyedLimiter, WhenFull};
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(1)?)
    ///     .max_keys(2)
    ///     .when_full(WhenFull::EvictLeastRecent)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire(&"alice")?;
    /// limiter.try_acquire(&"bob")?;
    /// assert_eq!(limiter.evictions(), 0);
    /// limiter.try_acquire(&"carol")?; // the map is full: a limited key goes
    /// assert_eq!(limiter.evictions(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn evictions(&self) -> u64 {
        // Relaxed: a statistic; see "Memory ordering".
        self.evictions.load(Ordering::Relaxed)
    }

    /// How many new keys were refused with [`KeyedError::TooManyKeys`]
    /// because the map was full and no key was idle, since the limiter was
    /// made: a cumulative count, like [`evictions`](KeyedLimiter::evictions).
    /// Only [`WhenFull::RejectNewKeys`](crate::WhenFull::RejectNewKeys) refuses; under
    /// [`WhenFull::EvictLeastRecent`](crate::WhenFull::EvictLeastRecent) it stays 0.
    ///
    /// # Memory ordering
    ///
    /// A relaxed counter, as [`evictions`](KeyedLimiter::evictions).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(1)?)
    ///     .max_keys(1)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire(&"alice")?;
    /// assert!(limiter.try_acquire(&"bob").is_err());
    /// assert!(limiter.try_acquire(&"carol").is_err());
    /// assert_eq!(limiter.new_keys_refused(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new_keys_refused(&self) -> u64 {
        // Relaxed: a statistic; see "Memory ordering".
        self.refused.load(Ordering::Relaxed)
    }

    /// The cap on keys.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::builder(Quota::per_second(10)?).max_keys(500).build()?;
    /// assert_eq!(limiter.max_keys(), 500);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The shared quota.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(Quota::per_second(10)?);
    /// assert_eq!(limiter.quota(), Quota::per_second(10)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.shared.quota()
    }

    /// Replaces the shared quota of every key (those with their own quota
    /// from [`quota_for`](crate::KeyedBuilder::quota_for) keep it), each key
    /// keeping its fill level in permits, as
    /// [`RateLimiter::set_quota`](limiter_core::RateLimiter::set_quota)
    /// does: where a key owes time, the debt is scaled by `t_new / t_old`
    /// (rounded up); an idle key stays full at the new burst.
    ///
    /// The change is applied lazily: it costs one write now, and each key
    /// moves to the new quota on its own next decision (or look), so no
    /// call ever passes over all keys. No decision mixes the old and the new
    /// quota (`docs/design.md`, "Keyed quota changes"). Reservations made
    /// before the change keep their slots but can no longer be cancelled,
    /// and refunds of cancelled reservations are dropped.
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
    /// limiter.try_acquire_n(&"alice", 2)?; // half empty
    /// limiter.set_quota(Quota::per_second(1)?.with_burst(4)?);
    /// assert_eq!(limiter.available(&"alice"), 2); // still half empty, in permits
    /// assert_eq!(limiter.available(&"bob"), 4); // a new key: full
    /// let wait = limiter.try_acquire_n(&"alice", 3).unwrap_err().retry_after();
    /// assert_eq!(wait, Some(Duration::from_secs(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) {
        self.shared.set_clearing(quota, self.now(), &self.refunds);
    }

    /// The quota `entry` is decided under: the shared one it follows, or
    /// its pinned override.
    #[inline]
    pub(crate) fn quota_of_entry<'a>(&'a self, entry: &'a Entry) -> QuotaOf<'a> {
        QuotaOf::Following {
            shared: &self.shared,
            record: &entry.quota,
        }
    }

    /// The quota `key` is (or would be) decided under.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let (shared, admin) = (Quota::per_second(10)?, Quota::per_second(1_000)?);
    /// let limiter = KeyedLimiter::builder(shared).quota_for("admin", admin).build()?;
    /// assert_eq!(limiter.quota_of(&"admin"), admin);
    /// assert_eq!(limiter.quota_of(&"anyone"), shared);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota_of(&self, key: &K) -> Quota {
        self.override_of(key).unwrap_or_else(|| self.shared.quota())
    }

    /// The clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// use limiter_core::Clock;
    /// limiter.try_acquire(&"alice")?;
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(limiter.clock().now(), 1_000_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Runs `decide` on `key`'s entry, inserting the key if it is new, and
    /// looking again when the entry turns out retired. `decide` reads the
    /// clock itself (through [`cell_clock`](KeyedLimiter::cell_clock)), so a
    /// decision made again on an entry another thread published first is
    /// made on a reading taken after that thread's.
    ///
    /// A new key's first decision is made on its entry *before* the entry
    /// is published, so a key enters the map already carrying its first
    /// admission: a concurrent sweep can never mistake it for idle and
    /// retire it between insertion and use. If another thread inserts the
    /// key first, that private decision is discarded (it touched nothing
    /// shared) and the decision is made again on the published entry.
    #[inline]
    pub(super) fn decide<T>(
        &self,
        key: &K,
        decide: impl Fn(&Entry) -> Option<Result<T, AcquireError>>,
    ) -> Result<T, KeyedError> {
        loop {
            // Lock-free: the guard pins this thread's epoch, nothing shared
            // is written; the entry outlives the closure (see the module doc).
            let found = self.map.peek_with(key, |_, entry| decide(entry));
            match found {
                Some(Some(result)) => return result.map_err(KeyedError::Limited),
                // Retired: it is being removed; help, then look again.
                Some(None) => {
                    self.remove_retired(key);
                    continue;
                }
                None => {}
            }
            if let Some(result) = self.insert(key, &decide)? {
                return result.map_err(KeyedError::Limited);
            }
        }
    }

    /// Claims a slot, decides on a private new entry, and publishes it.
    /// `None` if another thread published the key first.
    ///
    /// No map lock is held while claiming the slot, which may sweep.
    #[cold]
    fn insert<T>(
        &self,
        key: &K,
        decide: &impl Fn(&Entry) -> Option<Result<T, AcquireError>>,
    ) -> Result<Option<Result<T, AcquireError>>, KeyedError> {
        // Read before the decision, which reads the clock again: a lower
        // bound of the new key's tat (for `lower` below), and the time the
        // sweep that may make room runs at.
        let now = self.now();
        let room = self.claim_room(now)?;
        let quota = self.new_record(key);
        let quota_pinned = quota.is_pinned();
        let entry = Entry {
            cell: GcraCell::new(),
            quota,
        };
        // A fresh cell is never retired, so this is always `Some`.
        let result = decide(&entry);
        if room == Room::Unkept {
            // Decided as if inserted and at once evicted (see eviction).
            // Relaxed: a statistic.
            self.evictions.fetch_add(1, Ordering::Relaxed);
            return Ok(result);
        }
        if matches!(result, Some(Err(_))) {
            // Refused on a full cell (more than the burst, or out of
            // range): the key's state is still that of a key never seen,
            // so it is not kept. Relaxed: a counter.
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Ok(result);
        }
        // Publishing locks the key's bucket; the error hands the box back
        // when the key is already there.
        if self.map.insert_sync(key.clone(), Box::new(entry)).is_ok() {
            // Lowers `inserted_min`, steps the sweep, lowers `next_idle_at`.
            self.after_insert(now);
            // An override set or removed while this entry was private:
            // move it now (`overrides`, "Racing a new key's insertion").
            // Relaxed: a writer changes the count before it takes this
            // key's bucket lock; if it took it after our publication it
            // moves the entry itself, else the lock orders its count
            // before this load.
            if quota_pinned || self.override_count.load(Ordering::Relaxed) > 0 {
                self.reconcile(key);
            }
            Ok(result)
        } else {
            // Another thread inserted it first: free our slot and decide
            // on its entry instead. Relaxed: a counter.
            self.count.fetch_sub(1, Ordering::Relaxed);
            Ok(None)
        }
    }

    /// Removes `key` if its entry is retired.
    pub(crate) fn remove_retired(&self, key: &K) {
        let _ = self.map.remove_if_sync(key, |e| e.cell.tat().is_none());
    }
}
