//! [`KeyedLimiter`]: one GCRA cell per key in a concurrent map with lock-free
//! reads, under one quota (or a per-key override), with at most `max_keys`
//! keys.
//!
//! # The paths
//!
//! * **Existing key**: `scc::HashIndex::peek_with`, which takes no lock and
//!   writes no shared word (it pins the thread's own epoch slot, then
//!   follows pointers with acquire loads), then the cell's CAS loop
//!   ([`GcraCell`]). No allocation, no lock: a writer of the same bucket
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
//! Each cell has its own identity ([`GcraCell`]), carried by its
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
//!   first retires the cell with a CAS (see [`GcraCell`]), and a caller
//!   that meets a retired cell helps remove it and looks the key up again.
//! * Under [`WhenFull::RejectNewKeys`] a cell is retired only when idle
//!   (full again), so no limited key is ever forgotten.

use core::hash::Hash;
use core::time::Duration;
use std::collections::HashMap as StdHashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use limiter_core::{
    AcquireError, Clock, DefaultClock, Headroom, Policy, Quota, QuotaError, Reservation,
    cell::CellClock, cell::CellRefunds, cell::GcraCell, cell::QuotaOf, cell::SharedQuota,
};

use scc::HashIndex;

mod builder;
pub use builder::KeyedBuilder;

use crate::entry::{Cursor, Entry, Room, WhenFull};
use crate::error::KeyedError;

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

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Takes one permit for `key` now.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](KeyedLimiter::try_acquire_n).
    #[inline]
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
    /// use limiter_keyed::KeyedError;
    /// use limiter_core::AcquireError;
    /// limiter.try_acquire(&"alice")?;
    /// let wait = Duration::from_millis(100);
    /// assert_eq!(
    ///     limiter.try_acquire(&"alice"),
    ///     Err(KeyedError::Limited(AcquireError::RateLimited { wait }))
    /// );
    /// clock.advance(wait);
    /// limiter.try_acquire(&"alice")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self, key: &K) -> Result<(), KeyedError> {
        self.try_acquire_n(key, 1)
    }

    /// Takes `n` permits for `key` now, all or nothing.
    ///
    /// # Errors
    ///
    /// [`KeyedError::Limited`] with the core's error (the exact wait when
    /// rate limited); [`KeyedError::TooManyKeys`] for a new key when full.
    #[inline]
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(3)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire_n(&"alice", 2)?;
    /// assert!(limiter.try_acquire_n(&"alice", 2).is_err()); // all or nothing
    /// assert_eq!(limiter.available(&"alice"), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_n(&self, key: &K, n: u32) -> Result<(), KeyedError> {
        self.decide(key, |e| {
            e.cell
                .reserve_n_on(self.cell_clock(), self.quota_of_entry(e), n, Duration::ZERO)
                .map(|r| r.map(|_| ()))
        })
    }

    /// Claims the earliest slot for `n` permits for `key` if it comes within
    /// `max_wait`; consumes nothing otherwise. Slots of one key are handed
    /// out first come, first served.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](KeyedLimiter::try_acquire_n), with the wait
    /// compared to `max_wait`.
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
    /// assert!(limiter.reserve_n(&"alice", 1, Duration::from_millis(50)).is_err());
    /// let r = limiter.reserve_n(&"alice", 1, Duration::from_millis(100))?;
    /// assert_eq!(r.wait(), Duration::from_millis(100));
    /// assert_eq!(r.ready_at(), 100_000_000); // a reading of the limiter's clock
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<Reservation, KeyedError> {
        self.decide(key, |e| {
            e.cell.reserve_n_with_refunds(
                &self.refunds,
                self.cell_clock(),
                self.quota_of_entry(e),
                n,
                max_wait,
            )
        })
    }

    /// As [`reserve_n`](KeyedLimiter::reserve_n), with the [`Headroom`] the
    /// decision left for `key`: the permits a caller right after it would
    /// get at once, and the time until one more, computed from the state
    /// this decision wrote (see [`GcraCell::headroom_of`]).
    ///
    /// # Errors
    ///
    /// As [`reserve_n`](KeyedLimiter::reserve_n).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Headroom, ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(5)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// let (_, left) = limiter.reserve_n_with_headroom(&"alice", 2, Duration::ZERO)?;
    /// assert_eq!(left, Headroom { remaining: 3, refill_in: Duration::from_millis(100) });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n_with_headroom(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, Headroom), KeyedError> {
        self.decide_with_policy(key, n, max_wait)
            .map(|(reservation, headroom, _)| (reservation, headroom))
            .map_err(|(error, _)| error)
    }

    /// [`reserve_n_with_headroom`](KeyedLimiter::reserve_n_with_headroom)
    /// with the [`Policy`] the key's entry was decided under, on a grant and
    /// on a refusal alike (read from the entry the decision ran on: no
    /// second lookup of the key).
    #[inline]
    pub(crate) fn decide_with_policy(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, Headroom, Policy), (KeyedError, Policy)> {
        let decided_under = core::cell::Cell::new(None);
        let result = self.decide(key, |e| {
            let decided = e.cell.reserve_n_with_refunds(
                &self.refunds,
                self.cell_clock(),
                self.quota_of_entry(e),
                n,
                max_wait,
            )?;
            let policy = Policy::from(e.quota.quota());
            decided_under.set(Some(policy));
            Some(decided.map(|r| {
                // The cell made `r`, so this is always `Some`.
                let left = e
                    .cell
                    .headroom_of(&r, self.quota_of_entry(e), self.origin)
                    .unwrap_or(Headroom {
                        remaining: 0,
                        refill_in: r.wait(),
                    });
                (r, left, policy)
            }))
        });
        // No entry decided (a full key table): the quota a new key would get.
        result.map_err(|e| {
            (
                e,
                decided_under
                    .get()
                    .unwrap_or_else(|| self.quota_of(key).into()),
            )
        })
    }

    /// Gives back the permits of a reservation made for `key`, whether or
    /// not later reservations of the key depend on them; returns whether
    /// they are back. When nothing depends on them the key's state is
    /// restored; otherwise the slot is handed to the key's next reservation
    /// that would wait longer (see [`GcraCell::cancel_with_refunds`]). A
    /// slot already passed is not refunded. A reservation made on a state
    /// the key no longer has (it was evicted or idle and removed, and came
    /// back) is refused: each state has its own identity.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire(&"alice")?;
    /// let first = limiter.reserve_n(&"alice", 1, Duration::MAX)?; // 100 ms
    /// let _second = limiter.reserve_n(&"alice", 1, Duration::MAX)?; // 200 ms
    /// assert!(limiter.cancel(&"alice", first));
    /// // The next waiter gets the refunded slot.
    /// assert_eq!(limiter.reserve_n(&"alice", 1, Duration::MAX)?.wait(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, key: &K, reservation: Reservation) -> bool {
        self.map
            .peek_with(key, |_, e| {
                e.cell.cancel_with_refunds(
                    &self.refunds,
                    reservation,
                    self.cell_clock(),
                    self.quota_of_entry(e),
                )
            })
            .unwrap_or(false)
    }

    /// How many permits `key` could take now: exactly the largest `n` that
    /// [`try_acquire_n`](KeyedLimiter::try_acquire_n) would grant (for a key
    /// the limiter does not track, what a new state would grant: its whole
    /// burst, but near the end of the time range).
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
    /// assert_eq!(limiter.available(&"alice"), 1); // untracked: a whole burst
    /// limiter.try_acquire(&"alice")?;
    /// assert_eq!(limiter.available(&"alice"), 0);
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(limiter.available(&"alice"), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available(&self, key: &K) -> u32 {
        let now = self.now();
        self.map
            .peek_with(key, |_, e| {
                e.cell
                    .tat()
                    .map(|_| e.cell.available(self.quota_of_entry(e), now))
            })
            .flatten()
            .unwrap_or_else(|| GcraCell::available_when_new(self.quota_of(key), now))
    }

    /// Nanoseconds since the limiter was made (0 for a clock reading before
    /// that: the strict choice, time never runs ahead).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.cell_clock().now()
    }

    /// The clock every cell decides on: the limiter's, counted from its
    /// construction. A cell reads it at its decision, and again after a CAS
    /// lost to another decision.
    #[inline]
    pub(crate) fn cell_clock(&self) -> CellClock<'_, C> {
        CellClock {
            clock: &self.clock,
            origin: self.origin,
        }
    }

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
    /// Only [`WhenFull::EvictLeastRecent`] evicts: each step that found no
    /// idle key and forgot the cheapest one counts 1, and so does a new key
    /// decided on a cell that is not kept (as if inserted and at once
    /// evicted, see `docs/keyed.md`). Idle keys swept away carry no
    /// information (they are full again) and are not counted. Under
    /// [`WhenFull::RejectNewKeys`] it stays 0; see
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
    /// Only [`WhenFull::RejectNewKeys`] refuses; under
    /// [`WhenFull::EvictLeastRecent`] it stays 0.
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
    /// from [`quota_for`](KeyedBuilder::quota_for) keep it), each key
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
    fn decide<T>(
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
