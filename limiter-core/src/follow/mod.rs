//! Cells that follow a shared quota changed live: [`SharedQuota`] (the
//! quota of many cells, versioned) and [`CellQuota`] (the quota one cell's
//! `tat` is expressed in, and the version it came from). A keyed limiter
//! changes every key's quota by changing its `SharedQuota` once; each cell
//! moves to the new quota on its own next decision, keeping its fill level
//! in permits as [`RateLimiter::set_quota`](crate::RateLimiter::set_quota)
//! does. No pass over the cells, nothing on the decision path but two
//! loads and a compare when nothing changed.
//!
//! # The shared quota
//!
//! The [`QuotaVersions`] of the global limiter, with the generation in a word
//! of its own: a change writes the next entry (its version is the full
//! 64-bit number of the change) and then publishes the generation with a
//! release store, under a lock that serialises changes. A reader loads the
//! word (acquire) and reads the entry with its version.
//!
//! # The protocol of a following cell
//!
//! The cell's word is `tat`, [`GcraCell::RETIRED`](crate::cell::GcraCell::RETIRED),
//! or `LOCKED` (`u64::MAX − 1`, also above every `tat`): a cell being moved
//! to a new quota. The cell's [`CellQuota`] (`t`, `burst`, `version`) is
//! written only by the thread that holds `LOCKED`.
//!
//! A decision loads the word (acquire), the cell's version `v` (acquire)
//! and the shared quota (version `V`, parameters `p`).
//!
//! 1. `v == V`: it decides on `tat` under `p` and CASes the word. After a
//!    successful CAS it checks that the cell's version is still `v` and the
//!    shared entry it read was not rewritten; otherwise the outcome is void
//!    (nothing is granted on it, its permits stay counted, and it decides
//!    again), as rule 2 of [`crate::quota_versions`].
//! 2. `v < V`: it moves the cell: CAS `tat → LOCKED` (acquire), rescale
//!    `tat` through each change from `v + 1` to `V` at that change's own
//!    time, as `RateLimiter::set_quota` would have then (the debt scaled by
//!    `t_new / t_old`, an idle cell moved to the change's time); when a
//!    entry of that chain has been reused (more than 15 changes behind),
//!    from the cell's quota straight to `V`'s at `V`'s time. Then it stores
//!    the cell's `t`, `burst` and `version = V`, and the new `tat` with
//!    release, and decides again from a fresh load.
//! 3. The word is `LOCKED`: another thread is moving the cell; spin, load
//!    again. (The only wait in the protocol: a few stores, once per key and
//!    quota change. It is the one place a decision is not lock-free.)
//!
//! Why no decision mixes quotas: a decision's CAS can succeed only on the
//! value it loaded. If a move happened in between, the CAS succeeds only
//! when the moved `tat` equals the loaded one (ABA); the CAS then reads
//! from the mover's release store (or a later RMW in its release sequence),
//! so the version check after it sees the mover's `version = V' ≠ v` and
//! voids the decision. If the decision read the mover's new version with
//! the old word (the loads are not ordered against the mover), it decided
//! under the new parameters, and its CAS succeeds only on a word equal to
//! the moved one: the state it decided on is the state it wrote to. A
//! cell's record, read by a mover after its acquire CAS to `LOCKED`, is the
//! one the previous mover published with its release store (the words in
//! between are RMWs, so its release sequence continues), which is the quota
//! the word's `tat` is expressed in.
//!
//! A cell made for a per-key override is *pinned* (`version =
//! PINNED`): it never moves and is decided under its own record.
//!
//! Files: this one (the shared quota and a cell's record), `quota_of`
//! (what a decision reads, and the move).

use crate::change_lock::ChangeLock;
use crate::gcra::Params;
use crate::quota::{MAX_SPAN, Quota};
use crate::quota_versions::{
    CYCLE, GENERATIONS, QuotaRead, QuotaVersions, generation, next_generation, pack,
};
use crate::sync::{AtomicU32, AtomicU64, Ordering, spin_hint};

mod quota_of;

pub use quota_of::QuotaOf;

/// The word of a cell being moved to a new quota: above every `tat`, below
/// [`GcraCell::RETIRED`](crate::cell::GcraCell::RETIRED).
pub(crate) const LOCKED: u64 = u64::MAX - 1;

/// The version of a pinned [`CellQuota`], which never follows a change.
const PINNED: u64 = u64::MAX;

// The moving word is never a tat.
const _: () = assert!(LOCKED > MAX_SPAN);

/// A quota shared by many cells and changed live, each cell following on
/// its next decision (see the module docs of `follow`).
///
/// # Memory ordering
///
/// A change writes the next of 16 versioned entries and publishes it with a
/// release store; a reader acquires it. Changes are serialised by a lock
/// that no decision takes.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{cell::CellClock, cell::CellQuota, cell::GcraCell, ManualClock, Quota, cell::QuotaOf, cell::SharedQuota};
///
/// let shared = SharedQuota::new(Quota::per_second(10)?.with_burst(4)?);
/// let (cell, record) = (GcraCell::new(), CellQuota::following(&shared));
/// let clock = ManualClock::new();
/// let on = CellClock { clock: &clock, origin: 0 };
/// let follow = QuotaOf::Following { shared: &shared, record: &record };
/// cell.reserve_n_on(on, follow, 2, Duration::ZERO).unwrap()?; // half empty
/// shared.set(Quota::per_second(1)?.with_burst(4)?, 0);
/// assert_eq!(cell.available(follow, 0), 2); // still half empty, in permits
/// assert_eq!(record.quota(), shared.quota()); // moved by that look
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SharedQuota {
    /// `pack(generation, 0)`: the entry of the quota in force.
    word: AtomicU64,
    quotas: QuotaVersions,
    /// The time (on the cells' clock) of the change each entry holds,
    /// written before the entry's version is published.
    changed_at: [AtomicU64; GENERATIONS],
    lock: ChangeLock,
}

/// The quota in force as a decision read it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Current {
    pub(crate) read: QuotaRead,
}

impl Current {
    /// The number of the change that made this quota (0: the first).
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.read.version()
    }
}

impl SharedQuota {
    /// `quota` in force, as version 0.
    pub fn new(quota: Quota) -> SharedQuota {
        SharedQuota {
            word: AtomicU64::new(pack(0, 0)),
            quotas: QuotaVersions::new(quota),
            changed_at: core::array::from_fn(|_| AtomicU64::new(0)),
            lock: ChangeLock::new(),
        }
    }

    /// The quota in force.
    pub fn quota(&self) -> Quota {
        self.current().read.params.into()
    }

    /// Replaces the quota at `now` (nanoseconds on the cells' clock, as
    /// their decisions count it); every following cell moves to it on its
    /// next decision, keeping its fill level in permits as of `now`, as if
    /// the change had been applied to it then.
    pub fn set(&self, quota: Quota, now: u64) {
        let guard = self.lock.lock();
        // Relaxed: only setters write the word, under the lock we hold.
        let current = self.word.load(Ordering::Relaxed);
        let next = next_generation(generation(current));
        // Relaxed: published by the entry's release version store below.
        self.changed_at[next].store(now.min(MAX_SPAN), Ordering::Relaxed);
        self.quotas.begin_change(&guard, next, Params::from(quota));
        // Release: a reader that sees this generation sees its entry.
        self.word.store(pack(next, 0), Ordering::Release);
        drop(guard);
    }

    /// How many changes have been made.
    pub fn changes(&self) -> u64 {
        self.quotas.changes()
    }

    /// The parameters and change time of version `version`, if its entry
    /// still holds it (an entry is reused after 16 changes).
    fn version_of(&self, version: u64) -> Option<(Params, u64)> {
        // Versions and generations advance together from (0, 0).
        let generation = (version % CYCLE as u64) as usize;
        let read = self.quotas.read(pack(generation, 0));
        // Relaxed: the acquire of the version in `read` orders it.
        let at = self.changed_at[generation].load(Ordering::Relaxed);
        (read.version() == version && self.quotas.unchanged_since(read))
            .then_some((read.params, at))
    }

    #[inline]
    pub(crate) fn current(&self) -> Current {
        // Acquire: pairs with the release store in `set`.
        let word = self.word.load(Ordering::Acquire);
        Current {
            read: self.quotas.read(word),
        }
    }

    /// Whether the entry `current` came from still holds it.
    #[inline]
    pub(crate) fn unchanged_since(&self, current: Current) -> bool {
        self.quotas.unchanged_since(current.read)
    }
}

/// The quota one cell's `tat` is expressed in, and the version of the
/// [`SharedQuota`] it came from (or pinned: a quota of its own). 24 bytes.
///
/// # Examples
///
/// ```
/// use limiter_core::{cell::CellQuota, Quota, cell::SharedQuota};
///
/// let shared = SharedQuota::new(Quota::per_second(10)?);
/// assert_eq!(CellQuota::following(&shared).quota(), Quota::per_second(10)?);
/// assert_eq!(CellQuota::pinned(Quota::per_second(1)?).quota(), Quota::per_second(1)?);
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct CellQuota {
    t: AtomicU64,
    burst: AtomicU32,
    version: AtomicU64,
}

impl CellQuota {
    /// A record of `shared`'s quota in force, for a new (full) cell.
    pub fn following(shared: &SharedQuota) -> CellQuota {
        let current = shared.current();
        CellQuota::with(current.read.params, current.version())
    }

    /// A record of `quota` that never follows a shared quota.
    pub fn pinned(quota: Quota) -> CellQuota {
        CellQuota::with(Params::from(quota), PINNED)
    }

    fn with(p: Params, version: u64) -> CellQuota {
        CellQuota {
            t: AtomicU64::new(p.t),
            burst: AtomicU32::new(p.burst),
            version: AtomicU64::new(version),
        }
    }

    /// The quota the cell's state is expressed in (a snapshot: the cell
    /// may be moving).
    pub fn quota(&self) -> Quota {
        loop {
            let p = self.params();
            if p.t != 0
                && p.burst != 0
                && p.t
                    .checked_mul(u64::from(p.burst))
                    .is_some_and(|s| s <= MAX_SPAN)
            {
                return p.into();
            }
            spin_hint();
        }
    }

    /// Whether the record never follows a shared quota.
    pub fn is_pinned(&self) -> bool {
        // Relaxed: pinned records never change.
        self.version.load(Ordering::Relaxed) == PINNED
    }

    #[inline]
    fn params(&self) -> Params {
        // Relaxed: the caller acquired the word that published them (or
        // holds LOCKED, or the record is pinned and never written).
        Params {
            t: self.t.load(Ordering::Relaxed),
            burst: self.burst.load(Ordering::Relaxed),
        }
    }
}
