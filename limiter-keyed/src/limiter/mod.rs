//! [`KeyedLimiter`]: one GCRA cell per key in a concurrent map with lock-free
//! reads, under one quota (or a per-key override), with at most `max_keys`
//! keys.
//!
//! # The paths
//!
//! * **Existing key**: `scc::HashIndex::peek_with`, which takes no lock and
//!   writes no shared word (it pins the thread's own epoch slot, then
//!   follows pointers with acquire loads), then the cell's CAS loop
//!   ([`GcraCell`](limiter_core::cell::GcraCell)). No allocation, no lock: a writer of the same bucket
//!   (an insertion, a removal, a sweep) never makes it wait. During a
//!   resize the lookup may help move a few buckets, with `try_lock` only
//!   (lock-free, not wait-free).
//! * **New key**: claim a slot in the key count (a CAS that refuses past
//!   `max_keys`), allocate the entry once, make the first decision on it
//!   while it is still private, then `insert_sync` it (under the bucket's
//!   lock); if another thread inserted the key first, give the slot back and
//!   decide on its entry. A first decision that refuses (more than the
//!   burst, or out of range) leaves the state of a key never seen, so the
//!   entry is not kept. When no slot is free, room is made with bounded
//!   work (see [`crate::eviction`]).
//!
//! # Time
//!
//! The limiter counts nanoseconds since its construction (the clock's
//! reading then, `origin`), so a clock of any origin (a Unix-time clock,
//! a TSC counter) works: the 36.5-year span is measured from the limiter's
//! birth. A reading before `origin` counts as 0. Reservations report
//! [`ready_at`](Reservation::ready_at) as a clock reading, `origin` plus
//! the slot.
//!
//! # Identity of a key's state
//!
//! Each cell has its own identity ([`GcraCell`](limiter_core::cell::GcraCell)), carried by its
//! reservations: when a key is evicted (or removed while idle) and comes
//! back in a new cell, a reservation made on the old one refunds nothing.
//!
//! # Why the entry is boxed
//!
//! A `HashIndex` moves entries bit for bit when it resizes, and a reader
//! that found the old copy may keep using it until its epoch guard is
//! dropped. A cell stored inline would then exist twice and an admission on
//! the stale copy would be lost. The map therefore holds a `Box<Entry>`:
//! resizing moves the pointer, every copy of it points to the one cell, and
//! the box is freed only once no reader can hold it (epoch reclamation).
//!
//! # Invariants
//!
//! * `count` (what [`len`](KeyedLimiter::len) reports) never exceeds
//!   `max_keys`: a key is inserted only after a successful slot claim, and a
//!   slot is freed (or handed to the new key that made it) only by the call
//!   that retired the key's cell.
//! * No decision is ever made on a cell that has left the map: removal
//!   first retires the cell with a CAS (see [`GcraCell`](limiter_core::cell::GcraCell)), and a caller
//!   that meets a retired cell helps remove it and looks the key up again.
//! * Under [`WhenFull::RejectNewKeys`] a cell is retired only when idle
//!   (full again), so no limited key is ever forgotten.
//!
//! Files: this one (the limiter and its construction), `builder`,
//! `acquire` (deciding per key), `table` (the key table: its size, quotas,
//! lookups and insertions).

use core::hash::Hash;
use std::collections::HashMap as StdHashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use limiter_core::{Clock, DefaultClock, Quota, QuotaError, cell::CellRefunds, cell::SharedQuota};

use scc::HashIndex;

mod acquire;
mod builder;
mod table;

pub use builder::KeyedBuilder;

use crate::entry::{Cursor, Entry, WhenFull};

/// See [`KeyedLimiter::DEFAULT_MAX_KEYS`].
const DEFAULT_MAX_KEYS: usize = 100_000;

/// How many keys may have their own quota when the builder is not told:
/// 10,000 (each about 100 bytes with its key).
pub const DEFAULT_MAX_OVERRIDES: usize = 10_000;

/// The map is created sized for `min(max_keys, PRESIZED_KEYS)` keys and
/// never shrinks below that: a `HashIndex` left free to shrink under
/// insert/remove churn shrank far below its live size and relocated every
/// entry into overflow chains (measured: 75 s instead of 1.1 s for a
/// million evicting insertions at `max_keys = 5_000`). 2^17 covers
/// [`KeyedLimiter::DEFAULT_MAX_KEYS`] and bounds the table reserved up front (about 2 MB
/// for `u64` keys) whatever `max_keys` says.
const PRESIZED_KEYS: usize = 1 << 17;

/// A rate limiter per key, sharing one quota, with bounded memory.
///
/// # Memory ordering
///
/// Decisions on one key are linearizable (one CAS on its cell per
/// admission); keys are independent. The map is an `scc::HashIndex`:
/// lookups are lock-free (epoch-protected reads), insertions and removals
/// lock one bucket.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{ManualClock, Quota};
/// use limiter_keyed::{KeyedError, KeyedLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = KeyedLimiter::builder(Quota::per_second(1)?)
///     .max_keys(1_000)
///     .clock(clock.clone())
///     .build()?;
/// assert!(limiter.try_acquire(&"alice").is_ok());
/// assert!(limiter.try_acquire(&"alice").is_err());
/// assert!(limiter.try_acquire(&"bob").is_ok()); // keys are independent
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.try_acquire(&"alice").is_ok());
/// assert_eq!(limiter.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedLimiter<K, C: Clock = DefaultClock> {
    pub(crate) map: HashIndex<K, Box<Entry>>,
    /// The quota every key without an override follows (see `set_quota`).
    pub(crate) shared: SharedQuota,
    /// Per-key quotas (see `overrides`): read lock-free by insertions,
    /// written under `override_lock`.
    pub(crate) overrides: HashIndex<K, Quota>,
    pub(crate) override_lock: Mutex<()>,
    /// How many overrides the table holds (its `len` scans the buckets).
    pub(crate) override_count: AtomicUsize,
    pub(crate) max_overrides: usize,
    pub(crate) clock: C,
    pub(crate) max_keys: usize,
    pub(crate) when_full: WhenFull,
    /// The clock reading at construction: the limiter counts time in ns
    /// since then, whatever the clock's origin.
    pub(crate) origin: u64,
    /// Refunds of reservations cancelled out of order, for every key's cell.
    pub(crate) refunds: CellRefunds,
    /// Keys holding a slot; at most `max_keys`.
    pub(crate) count: AtomicUsize,
    /// The sweep's position; held for one bounded step at a time.
    pub(crate) cursor: Mutex<Cursor<K>>,
    /// The smallest `now` of the insertions since the last complete pass.
    pub(crate) inserted_min: AtomicU64,
    /// No key can be idle before this instant (ns): a lower bound of every
    /// key's `tat`, refreshed by each complete pass and lowered by each
    /// insertion.
    pub(crate) next_idle_at: AtomicU64,
    /// Keys forgotten while still limited, to make room for a new key
    /// (see [`KeyedLimiter::evictions`]).
    pub(crate) evictions: AtomicU64,
    /// New keys refused because the map was full (see
    /// [`KeyedLimiter::new_keys_refused`]).
    pub(crate) refused: AtomicU64,
}

impl<K, C: Clock> core::fmt::Debug for KeyedLimiter<K, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("quota", &self.shared.quota())
            .field("len", &self.count.load(Ordering::Relaxed))
            .field("max_keys", &self.max_keys)
            .field("when_full", &self.when_full)
            .finish_non_exhaustive()
    }
}

impl KeyedLimiter<(), DefaultClock> {
    /// How many keys a limiter tracks when the builder is not told: 100,000
    /// (about 7 MB with `u64` keys at the measured ~69 bytes per key; see
    /// `docs/keyed.md`). It does not depend on the key or the clock; it is
    /// defined on `KeyedLimiter<()>` so that `KeyedLimiter::DEFAULT_MAX_KEYS`
    /// names it without a type annotation.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::<u64>::new(Quota::per_second(10)?);
    /// assert_eq!(limiter.max_keys(), KeyedLimiter::DEFAULT_MAX_KEYS);
    /// assert_eq!(KeyedLimiter::DEFAULT_MAX_KEYS, 100_000);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub const DEFAULT_MAX_KEYS: usize = DEFAULT_MAX_KEYS;
}

impl<K: Hash + Eq + Clone + Send + Sync> KeyedLimiter<K, DefaultClock> {
    /// A limiter giving every key `quota`, with
    /// [`DEFAULT_MAX_KEYS`](KeyedLimiter::DEFAULT_MAX_KEYS) and
    /// [`WhenFull::RejectNewKeys`], on a new [`DefaultClock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::new(Quota::per_second(1)?);
    /// assert!(limiter.try_acquire(&"alice").is_ok());
    /// assert!(limiter.try_acquire(&"alice").is_err()); // the next is a second away
    /// assert!(limiter.try_acquire(&"bob").is_ok());
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn new(quota: Quota) -> KeyedLimiter<K, DefaultClock> {
        KeyedBuilder::with_clock(quota, DefaultClock::default()).assemble()
    }

    /// A builder for a limiter giving every key `quota`, on a new
    /// [`DefaultClock`] unless [`clock`](KeyedBuilder::clock) says otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_keyed::{KeyedLimiter, WhenFull};
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(1)?)
    ///     .max_keys(1)
    ///     .when_full(WhenFull::EvictLeastRecent)
    ///     .build()?;
    /// limiter.try_acquire(&"alice")?;
    /// limiter.try_acquire(&"bob")?; // evicts "alice"
    /// assert_eq!(limiter.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(quota: Quota) -> KeyedBuilder<K, DefaultClock> {
        KeyedBuilder::with_clock(quota, DefaultClock::default())
    }
}
