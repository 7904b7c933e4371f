//! Bounded memory: the key count, amortised sweeps of idle keys, and what a
//! full limiter does with a new key.
//!
//! # Idle keys
//!
//! A key whose cell is full again (`tat ≤ now`) would grant a whole burst,
//! exactly like a key never seen: it carries no information and may go. A
//! sweep walks the map once, retires every idle cell (one CAS each, which
//! fails if the key was used meanwhile, so the key stays) and removes it.
//! The walk also records the smallest `tat` of the keys that stay: no key
//! can become idle before it (`next_idle_at`, lowered by every insertion).
//!
//! # When sweeps run (the amortisation)
//!
//! * After every `max_keys / 2` insertions of new keys, the inserting call
//!   sweeps: `O(len)` work per `max_keys / 2` insertions, so `O(1)`
//!   amortised per new key, and idle keys never pile up to the cap.
//! * When a new key finds the cap reached: if `now < next_idle_at`, no key
//!   can be idle and nothing is scanned (the refusal costs `O(1)`);
//!   otherwise one sweep runs. Under [`WhenFull::EvictLeastRecent`], if the
//!   sweep freed nothing, the `max(1, max_keys / 64)` keys with the smallest
//!   `tat` (the least recently used under one quota, and those whose debt is
//!   smallest) are evicted in the same pass, so the next insertions find
//!   room without scanning: `O(64)` amortised map operations per new key at
//!   worst.
//!
//! One thread sweeps at a time (a flag); the others do not wait for it: a
//! new key that finds the cap reached while another thread sweeps is
//! refused (or, when evicting, retries once the sweep is done).

use core::hash::Hash;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;

use limiter_core::Clock;

use crate::error::KeyedError;
use crate::limiter::{KeyedLimiter, WhenFull};

/// Sweeps to make room before a new key is refused.
const ROOM_ATTEMPTS: usize = 3;

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Claims a slot in the key count for a new key, making room if full.
    pub(crate) fn claim_slot(&self, now: u64) -> Result<(), KeyedError> {
        let mut attempts = 0;
        // Relaxed: the count is a bound on its own; the CAS keeps it ≤ max.
        let mut n = self.count.load(Ordering::Relaxed);
        loop {
            if n < self.max_keys {
                match self.count.compare_exchange_weak(
                    n,
                    n + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Ok(()),
                    Err(actual) => {
                        n = actual;
                        continue;
                    }
                }
            }
            if attempts == ROOM_ATTEMPTS || !self.make_room(now) {
                return Err(KeyedError::TooManyKeys {
                    max_keys: self.max_keys,
                });
            }
            attempts += 1;
            n = self.count.load(Ordering::Relaxed);
        }
    }

    /// Counts an insertion; every `max_keys / 2` of them, sweeps.
    pub(crate) fn after_insert(&self, now: u64) {
        let every = (self.max_keys / 2).max(1);
        // Relaxed: a counter; reset by the sweep.
        if self.inserted.fetch_add(1, Ordering::Relaxed) + 1 >= every {
            self.try_sweep(now, false);
        }
    }

    /// Called when full: sweeps (and evicts, if so configured) unless no key
    /// can be idle yet. Returns whether a retry may find room.
    fn make_room(&self, now: u64) -> bool {
        let evict = self.when_full == WhenFull::EvictLeastRecent;
        // Relaxed: a hint; a stale value at worst sweeps once for nothing or
        // refuses a key that a sweep a moment later would have admitted.
        if !evict && now < self.next_idle_at.load(Ordering::Relaxed) {
            return false;
        }
        match self.try_sweep(now, evict) {
            Some(freed) => freed > 0,
            // Another thread is sweeping: retry after it, if evicting.
            None => {
                while evict && self.sweeping.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                evict
            }
        }
    }

    /// Retires and removes every idle key; with `evict`, if none was idle,
    /// also the least recent batch. `None` if another thread is sweeping,
    /// otherwise how many keys were freed.
    pub(crate) fn try_sweep(&self, now: u64, evict: bool) -> Option<usize> {
        // Acquire: see the previous sweeper's writes; the flag is a lock
        // around the walk, not around any decision.
        if self
            .sweeping
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        // Relaxed: a hint. Parked at MAX during the walk so that insertions
        // meanwhile (which lower it to their `now`) survive the final
        // fetch_min; until then full callers refuse, as they would anyway
        // while a sweep runs.
        self.next_idle_at.store(u64::MAX, Ordering::Relaxed);
        let batch = (self.max_keys / 64).max(1);
        let mut freed = 0;
        let mut min_tat = u64::MAX;
        // The `batch` smallest tats seen, as a max-heap of (tat, key).
        let mut oldest: BinaryHeap<(u64, HeapKey<K>)> = BinaryHeap::new();
        // Locks one bucket at a time; readers of that bucket do not wait. A
        // resize by another thread may show an entry twice: its retiring CAS
        // succeeds once, so it is counted once.
        self.map.retain_sync(|key, e| {
            if e.cell.retire_if_idle(now) {
                freed += 1;
                return false;
            }
            let Some(tat) = e.cell.tat() else {
                return false; // retired by someone else, who counted it
            };
            min_tat = min_tat.min(tat);
            if evict {
                oldest.push((tat, HeapKey(key.clone())));
                if oldest.len() > batch {
                    oldest.pop();
                }
            }
            true
        });
        if evict && freed == 0 {
            for (_, HeapKey(key)) in oldest {
                let retired = self
                    .map
                    .peek_with(&key, |_, e| e.cell.retire())
                    .unwrap_or(false);
                if retired {
                    freed += 1;
                }
                self.remove_retired(&key);
            }
            min_tat = 0; // unknown after evicting; the next full call sweeps
        }
        // Relaxed: counters and a hint, published by the flag's release.
        self.count.fetch_sub(freed, Ordering::Relaxed);
        self.inserted.store(0, Ordering::Relaxed);
        self.next_idle_at.fetch_min(min_tat, Ordering::Relaxed);
        // Release: the next sweeper sees this one's writes.
        self.sweeping.store(false, Ordering::Release);
        Some(freed)
    }

    /// Removes every key that is idle now; returns how many. Normal calls do
    /// this on their own (see the module doc); this is for callers who want
    /// memory back at a moment of their choosing. Returns 0 if another
    /// thread is sweeping.
    pub fn evict_idle(&self) -> usize {
        self.try_sweep(self.clock.now(), false).unwrap_or(0)
    }
}

/// A key in the eviction heap, ordered as equal to every other: only the
/// `tat` orders the heap.
struct HeapKey<K>(K);

impl<K> PartialEq for HeapKey<K> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<K> Eq for HeapKey<K> {}
impl<K> PartialOrd for HeapKey<K> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for HeapKey<K> {
    fn cmp(&self, _: &Self) -> core::cmp::Ordering {
        core::cmp::Ordering::Equal
    }
}
