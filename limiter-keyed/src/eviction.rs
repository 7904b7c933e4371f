//! Bounded memory: the key count, an incremental sweep of idle keys, and
//! what a full limiter does with a new key, all with bounded work per call.
//!
//! # Idle keys
//!
//! A key whose cell is full again (`tat ≤ now`) would grant a whole burst,
//! exactly like a key never seen: it carries no information and may go.
//! Retiring it is one CAS (which fails if the key was used meanwhile, so the
//! key stays), then it is removed from the map.
//!
//! # The sweep: a cursor, a few entries per call
//!
//! The map is swept by a cursor that remembers the key of the next entry to
//! examine. A *step* resumes at the cursor, examines at most a fixed number
//! of entries in table order (retiring and removing the idle ones), and
//! leaves the cursor at the next entry; at the end of the table a pass is
//! complete and the next step starts over. No call ever walks the whole map:
//!
//! * once the map is more than half full, every insertion of a new key
//!   takes a step of [`STEP`] entries (skipped when another thread holds
//!   the cursor), so a pass over `len` keys takes `len / STEP` insertions
//!   and idle keys never pile up to the cap (below half full no step is
//!   taken: walking a sparse table costs more than the idle keys do);
//! * a new key that finds the cap reached takes a step of [`FULL_STEP`]
//!   entries if the cursor is free (`try_lock`: no request ever waits for
//!   a lock). If another thread holds it, that thread is making room: the
//!   new key tries once more for a free slot, and otherwise is served
//!   without one, on a cell that is not kept (under
//!   [`WhenFull::EvictLeastRecent`]), or refused (under
//!   [`WhenFull::RejectNewKeys`]).
//!
//! One pass also records the smallest `tat` of the keys that stay: no key
//! can become idle before it (`next_idle_at`, lowered by every insertion).
//! Under [`WhenFull::RejectNewKeys`] a new key at a full map with
//! `now < next_idle_at` is refused in `O(1)`, without a step.
//!
//! # Room for a new key at a full map
//!
//! A slot freed by a step goes to the caller that freed it (the count is
//! not lowered and raised again, so no other thread can take it first).
//!
//! * [`WhenFull::RejectNewKeys`]: if the step freed an idle key, the new
//!   key takes its slot; otherwise it is refused
//!   ([`KeyedError::TooManyKeys`]).
//! * [`WhenFull::EvictLeastRecent`]: if the step found no idle key, it
//!   evicts, among the entries it examined, the key whose forgetting gives
//!   away the fewest permits, and the new key takes that slot. Forgetting a
//!   key restores its full burst, so it admits beyond the key's quota
//!   exactly its debt, `(tat − now) / t` permits under the key's own quota
//!   (`burst − available` of them at once, the rest as they would have come
//!   back): the victim is the key with the smallest debt in permits. Under
//!   one quota that is the smallest `tat`, the least recently used. A new
//!   key always gets a cell: when another thread holds the cursor, or every
//!   slot belongs to a key that another thread is still inserting (possible
//!   only with fewer slots than inserting threads), there is nothing this
//!   call may evict, and the new key is decided on a fresh cell that is not
//!   kept, exactly as if it had been inserted and at once evicted.

use core::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, TryLockError};

use limiter_core::Clock;
use scc::hash_index::OccupiedEntry;

use crate::entry::{Cursor, Entry, Room, WhenFull};
use crate::error::KeyedError;
use crate::limiter::KeyedLimiter;

/// Entries examined by the step that follows each insertion of a new key.
pub(crate) const STEP: usize = 4;
/// Entries examined by a new key that finds the map full.
pub(crate) const FULL_STEP: usize = 32;

/// The entry a step would evict: the smallest debt `debt / t` in permits.
struct Victim<K> {
    debt: u64,
    t: u64,
    key: K,
}

impl<K> Victim<K> {
    /// Whether `debt / t` is below this victim's, exactly (in `u128`).
    fn costs_more_than(&self, debt: u64, t: u64) -> bool {
        u128::from(debt) * u128::from(self.t) < u128::from(self.debt) * u128::from(t)
    }
}

/// `fetch_min`, skipped when the bound is already at or below `now` (the
/// usual case: an RMW per new key would cost more than the rest).
pub(crate) fn lower(bound: &AtomicU64, now: u64) {
    // SeqCst: see `end_pass`; a skipped update read a value at or below
    // `now` at its place in the total order, which serves as well.
    if bound.load(Ordering::SeqCst) > now {
        bound.fetch_min(now, Ordering::SeqCst);
    }
}

type At<'h, K> = Option<OccupiedEntry<'h, K, Box<Entry>>>;

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Claims a slot in the key count if one is free. Relaxed: the count is
    /// a bound on its own; the CAS keeps it ≤ `max_keys`.
    fn try_claim(&self) -> bool {
        // Relaxed (set and fetch): the count orders nothing else; the CAS
        // inside `try_update` alone keeps it at most `max_keys`.
        self.count
            .try_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max_keys).then_some(n + 1)
            })
            .is_ok()
    }

    /// Room for a new key: a free slot, or one made by a step (see the
    /// module doc).
    pub(crate) fn claim_room(&self, now: u64) -> Result<Room, KeyedError> {
        if self.try_claim() {
            return Ok(Room::Claimed);
        }
        let evict = self.when_full == WhenFull::EvictLeastRecent;
        // SeqCst: pairs with the pass's publication (see `end_pass`); a
        // stale value at worst takes a step for nothing.
        if !evict && now < self.next_idle_at.load(Ordering::SeqCst) {
            return Err(self.too_many());
        }
        // Never wait for the cursor: its holder is making room already.
        let cursor = match self.cursor.try_lock() {
            Ok(cursor) => Some(cursor),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(mut cursor) = cursor {
            if self.try_claim() {
                return Ok(Room::Claimed);
            }
            if self.step(&mut cursor, now, FULL_STEP, evict, true) > 0 {
                return Ok(Room::Claimed);
            }
        }
        match (evict, self.try_claim()) {
            (_, true) => Ok(Room::Claimed),
            (true, false) => Ok(Room::Unkept),
            (false, false) => Err(self.too_many()),
        }
    }

    /// The refusal of a new key at a full map, counted.
    fn too_many(&self) -> KeyedError {
        // Relaxed: a statistic (see `new_keys_refused`).
        self.refused.fetch_add(1, Ordering::Relaxed);
        KeyedError::TooManyKeys {
            max_keys: self.max_keys,
        }
    }

    /// After an insertion: one step of [`STEP`] entries once the map is
    /// more than half full, unless another thread holds the cursor; then
    /// `next_idle_at` lowered to the new key's `now`.
    pub(crate) fn after_insert(&self, now: u64) {
        // SeqCst, then the same on `next_idle_at` below: see `end_pass`.
        lower(&self.inserted_min, now);
        // Relaxed: a counter read as a hint.
        if self.count.load(Ordering::Relaxed) > self.max_keys / 2
            && let Ok(mut cursor) = self.cursor.try_lock()
        {
            self.step(&mut cursor, now, STEP, false, false);
        }
        // SeqCst: inserted_min first, then this (see `end_pass`): a lower
        // bound, only lowered here.
        lower(&self.next_idle_at, now);
    }

    /// Examines at most `budget` entries from the cursor, retiring and
    /// removing the idle ones; with `evict` and none idle, evicts the
    /// cheapest examined key. Frees the slots it made, except one kept for
    /// the caller if `keep_one`. Returns how many keys it freed.
    fn step(
        &self,
        cursor: &mut Cursor<K>,
        now: u64,
        budget: usize,
        evict: bool,
        keep_one: bool,
    ) -> usize {
        let mut freed = 0;
        let mut victim: Option<Victim<K>> = None;
        let mut examined = 0;
        let mut wrapped = false;
        let mut at: At<'_, K> = match cursor.next.take() {
            Some(key) => self.map.get_sync(&key),
            None => None,
        };
        if at.is_none() {
            at = self.start_pass(cursor);
        }
        loop {
            let Some(entry) = at else {
                // The end of the table: the pass is complete.
                self.end_pass(cursor);
                if wrapped {
                    break;
                }
                wrapped = true;
                at = self.start_pass(cursor);
                if at.is_none() {
                    break;
                }
                continue;
            };
            if examined == budget {
                cursor.next = Some(entry.key().clone());
                break;
            }
            examined += 1;
            #[cfg(test)]
            tests::examined(1);
            let e: &Entry = entry.get();
            let tat = if e.cell.retire_if_idle(now) {
                freed += 1;
                None
            } else {
                // None: retired by an eviction that counted it; remove it.
                e.cell.tat()
            };
            let Some(tat) = tat else {
                at = entry.remove_and_sync();
                continue;
            };
            cursor.pass_min = cursor.pass_min.min(tat);
            if evict {
                let (debt, t) = (tat.saturating_sub(now), e.quota.quota().period_nanos());
                if victim.as_ref().is_none_or(|v| v.costs_more_than(debt, t)) {
                    victim = Some(Victim {
                        debt,
                        t,
                        key: entry.key().clone(),
                    });
                }
            }
            at = entry.next_sync();
        }
        if evict
            && freed == 0
            && let Some(Victim { key, .. }) = victim
        {
            // No bucket lock is held here. Only a step retires a cell
            // whatever its state, and steps run under the cursor, so this
            // swap is the one that retires it.
            if self
                .map
                .peek_with(&key, |_, e| e.cell.retire())
                .unwrap_or(false)
            {
                freed += 1;
                // Relaxed: a statistic (see `evictions`).
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
            self.remove_retired(&key);
        }
        let released = freed - usize::from(keep_one && freed > 0);
        // Relaxed: a counter; a slot freed here may be claimed at once.
        self.count.fetch_sub(released, Ordering::Relaxed);
        freed
    }

    fn start_pass<'h>(&'h self, cursor: &mut Cursor<K>) -> At<'h, K> {
        cursor.pass_min = u64::MAX;
        self.map.begin_sync()
    }

    /// Publishes the pass's bound: no key kept by the pass, and none
    /// inserted since the previous pass ended, can be idle before it.
    fn end_pass(&self, cursor: &mut Cursor<K>) {
        // SeqCst on these and on an insertion's two fetch_min (inserted_min
        // first, then next_idle_at): in the single total order, an
        // insertion whose next_idle_at update the store below overwrites
        // made its inserted_min update before the final load, which
        // restores it. So `next_idle_at` never exceeds a live key's tat
        // (but for cancelled reservations: see docs/keyed.md).
        let inserted = self.inserted_min.swap(u64::MAX, Ordering::SeqCst);
        self.next_idle_at
            .store(cursor.pass_min.min(inserted), Ordering::SeqCst);
        let since = self.inserted_min.load(Ordering::SeqCst);
        self.next_idle_at.fetch_min(since, Ordering::SeqCst);
        cursor.pass_min = u64::MAX;
    }

    /// Removes every key that is idle now, in one full pass from the
    /// cursor; returns how many. Normal calls do this a few entries at a
    /// time (see the module doc); this is for callers who want memory back
    /// at a moment of their choosing. Waits for a step another thread is
    /// taking.
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
    /// limiter.try_acquire(&"alice")?;
    /// clock.advance(Duration::from_millis(50));
    /// limiter.try_acquire(&"bob")?;
    /// clock.advance(Duration::from_millis(50)); // "alice" is full again, "bob" is not
    /// assert_eq!(limiter.evict_idle(), 1);
    /// assert_eq!(limiter.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn evict_idle(&self) -> usize {
        let now = self.now();
        let mut cursor = self.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        self.step(&mut cursor, now, usize::MAX, false, false)
    }
}

#[cfg(test)]
mod tests {
    use core::cell::Cell;
    use core::time::Duration;

    use limiter_core::{ManualClock, Quota};

    use crate::{KeyedLimiter, WhenFull};

    std::thread_local! {
        static EXAMINED: Cell<usize> = const { Cell::new(0) };
    }

    /// Counts map entries examined by this thread.
    pub(super) fn examined(n: usize) {
        EXAMINED.with(|c| c.set(c.get() + n));
    }

    fn taken() -> usize {
        EXAMINED.with(|c| c.replace(0))
    }

    /// The most entries any one call examined, over `calls` calls.
    fn worst(mut calls: impl FnMut(u64)) -> impl FnMut(core::ops::Range<u64>) -> usize {
        move |keys| {
            keys.map(|k| {
                taken();
                calls(k);
                taken()
            })
            .max()
            .unwrap_or(0)
        }
    }

    #[test]
    fn a_new_key_at_the_cap_never_waits_for_the_cursor() {
        for when_full in [WhenFull::EvictLeastRecent, WhenFull::RejectNewKeys] {
            let l = KeyedLimiter::builder(Quota::per_second(1).unwrap())
                .max_keys(2)
                .when_full(when_full)
                .clock(ManualClock::new())
                .build()
                .unwrap();
            assert_eq!((l.try_acquire(&1), l.try_acquire(&2)), (Ok(()), Ok(())));
            // Another request is stepping: the cursor is held (here by this
            // thread, so a call that waited for it would never return).
            let held = l.cursor.lock().unwrap();
            let new_key = l.try_acquire(&3);
            drop(held);
            if when_full == WhenFull::EvictLeastRecent {
                // Served on a cell not kept: nothing evicted from the map.
                assert_eq!(new_key, Ok(()));
                assert_eq!((l.len(), l.evictions()), (2, 1));
                assert_eq!(l.available(&3), 1, "key 3 was not kept");
                assert_eq!(l.available(&1), 0, "key 1 was not evicted");
                // The cursor free again, the next new key evicts and stays.
                assert_eq!(l.try_acquire(&4), Ok(()));
                assert_eq!((l.len(), l.evictions(), l.available(&4)), (2, 2, 0));
            } else {
                assert_eq!(new_key, Err(crate::KeyedError::TooManyKeys { max_keys: 2 }));
                assert_eq!(l.new_keys_refused(), 1);
            }
        }
    }

    const KEYS: u64 = 4_096;
    /// What one call may examine, whatever the map holds.
    const BOUND: usize = 64;

    #[test]
    fn no_call_examines_more_than_a_bounded_number_of_entries() {
        for when_full in [WhenFull::RejectNewKeys, WhenFull::EvictLeastRecent] {
            let clock = ManualClock::new();
            let quota = Quota::per_second(1).unwrap();
            let l = KeyedLimiter::builder(quota)
                .max_keys(KEYS as usize)
                .when_full(when_full)
                .clock(clock.clone())
                .build()
                .unwrap();
            let mut call = worst(|k| {
                let _ = l.try_acquire(&k);
            });
            // Filling the map, then new keys at a full map with nothing idle.
            assert!(call(0..KEYS) <= BOUND, "{when_full:?}: filling");
            assert!(
                call(KEYS..3 * KEYS) <= BOUND,
                "{when_full:?}: full, none idle"
            );
            // Every key idle: new keys find room after bounded work.
            clock.advance(Duration::from_secs(2));
            assert!(call(3 * KEYS..6 * KEYS) <= BOUND, "{when_full:?}: all idle");
        }
    }
}
