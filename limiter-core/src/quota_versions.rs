//! Hot quota changes: the quota generation in the state word and the entries
//! that hold each generation's parameters.
//!
//! # Layout of the GCRA state word
//!
//! ```text
//!  63     60 59                                                    0
//! +---------+-------------------------------------------------------+
//! |   gen   |   tat: ns since the clock's origin, at most MAX_SPAN   |
//! +---------+-------------------------------------------------------+
//! ```
//!
//! `gen` (4 bits) names the quota in force; `tat` is the GCRA theoretical
//! arrival time. For a [`RateLimiter`](crate::RateLimiter), generation 0 is
//! the quota it was made with, held inline and never rewritten; quota
//! changes cycle through generations 1 to 15, whose entries live in a
//! [`QuotaVersions`] table allocated by the first change. A
//! [`SharedQuota`](crate::cell::SharedQuota) keeps all 16 generations in its table.
//!
//! # Why the generation lives in the state word
//!
//! A decision reads the word, then the parameters of its generation, then
//! CASes the word. `set_quota` writes the next entry and then CASes the word
//! to the next generation (with `tat` rescaled). Because the generation is
//! part of the word, any decision that read the old word fails its CAS once
//! the new generation is installed and decides again with the new
//! parameters: no decision ever combines one quota's `t` with another's
//! `tau`, or old parameters with a rescaled `tat`. If the generation lived
//! elsewhere, a decision could pass its CAS on a `tat` that `set_quota` left
//! unchanged (an idle limiter) while using the old quota.
//!
//! The entry for generation `g + 1` is written before the word that names it
//! is published with a release CAS, and readers load the word with acquire,
//! so a reader that sees generation `g + 1` sees its entry.
//!
//! # The 4-bit tag, and why ABA cannot admit under a stale quota
//!
//! An entry is reused after 15 quota changes, so the word can come back to a
//! value a stalled decision loaded: with a clock that stands still, an idle
//! `tat` is the same after any number of changes, and a speed-up followed by
//! a slow-down by the same factor restores an owed `tat` exactly. A decision
//! whose CAS then succeeds would have decided with the parameters it read
//! before the entry was rewritten. Three rules make that impossible rather
//! than improbable:
//!
//! 1. Every entry carries a **version**: the full 64-bit number of the quota
//!    change that wrote it (0 for the initial quota). A setter stores `t`
//!    and `burst`, then the version with release, then installs the
//!    generation with a release CAS on the word.
//! 2. A decision reads the entry's version (acquire) before its parameters,
//!    and after a *successful* CAS reads the version again. If it changed,
//!    the entry was rewritten while the decision was in flight, so the
//!    decision may have used a stale quota: its outcome is void. The caller
//!    is not granted anything on it; the decision is made again from a fresh
//!    load. The permits the void CAS claimed stay counted, which can only
//!    make the limiter stricter. (Voiding needs 15 quota changes within one
//!    decision; nothing else triggers it.)
//! 3. If the version is unchanged after the CAS, no setter rewrote the entry
//!    between the decision's read and its CAS. Returning the word to
//!    generation `g` takes a setter that rewrites entry `g` first, and that
//!    setter's version store happens before the word the CAS succeeded on
//!    (release sequence of the word), so the re-read would see it. Hence
//!    the parameters the decision used are the ones the word names.
//!
//! A limiter's generation 0 is never rewritten, so a decision on it needs
//! none of this: its parameters are the limiter's own, fixed at construction.
//!
//! # Torn reads
//!
//! A reader that races a setter rewriting the same entry could see `t` of
//! one quota and `burst` of another. [`QuotaVersions::read`] never returns
//! such a pair: a setter marks the entry before it writes the pair (the
//! version with [`WRITING`] set, then `t` and `burst` with release) and
//! stores the finished version last; a reader loads the version, then the
//! pair with acquire, then the version again, and retries unless both loads
//! saw the same finished version. If it read either field from a setter's
//! store, that setter's mark happens before the second load, which
//! therefore sees the mark or a later version: the two loads differ. If both
//! saw the same finished version, no setter wrote the pair in between, and
//! the pair is that version's.
//!
//! Cancellation does not rely on the tag at all: [`QuotaVersions`] counts
//! every quota change in a full 64-bit counter, a reservation records it,
//! and `cancel` refuses when it has moved, checking it and undoing the word
//! under the same lock that serialises quota changes (see
//! [`crate::change_lock`]).

use crate::change_lock::ChangeGuard;
use crate::gcra::Params;
use crate::quota::{MAX_SPAN, Quota};
use crate::sync::{AtomicU32, AtomicU64, Ordering, spin_hint};

/// Set in an entry's version while a setter writes the entry's parameters
/// (see the module docs, "Torn reads"). Change numbers never reach it.
pub(crate) const WRITING: u64 = 1 << 63;

/// Bits of the state word that hold the generation.
const GEN_BITS: u32 = 4;
/// How many quota entries there are.
pub(crate) const GENERATIONS: usize = 1 << GEN_BITS;
const TAT_BITS: u32 = 64 - GEN_BITS;

// The tat field must hold exactly MAX_SPAN.
const _: () = assert!(MAX_SPAN == (1 << TAT_BITS) - 1);

/// Packs a generation and a `tat` into a state word.
#[inline]
pub(crate) fn pack(generation: usize, tat: u64) -> u64 {
    debug_assert!(generation < GENERATIONS && tat <= MAX_SPAN);
    ((generation as u64) << TAT_BITS) | tat
}

/// The `tat` field of a state word.
#[inline]
pub(crate) fn tat(word: u64) -> u64 {
    word & MAX_SPAN
}

/// The generation field of a state word.
#[inline]
pub(crate) fn generation(word: u64) -> usize {
    (word >> TAT_BITS) as usize
}

/// How many generations a [`SharedQuota`](crate::cell::SharedQuota)'s changes
/// cycle through before an entry is reused: all 16, except under loom,
/// where a cycle of 2 lets a model reach entry reuse (and the ABA it could
/// cause) with two quota changes.
#[cfg(not(loom))]
pub(crate) const CYCLE: usize = GENERATIONS;
#[cfg(loom)]
pub(crate) const CYCLE: usize = 2;

/// The generation after `generation` for a [`SharedQuota`](crate::cell::SharedQuota),
/// wrapping after [`CYCLE`].
#[inline]
pub(crate) fn next_generation(generation: usize) -> usize {
    (generation + 1) % CYCLE
}

/// The generation a [`RateLimiter`](crate::RateLimiter)'s quota change
/// installs after `generation`: 1 to 15 in turn (1 and 2 under loom, so a
/// model reaches entry reuse with three changes), never 0, which names the
/// limiter's first quota.
#[inline]
pub(crate) fn next_change_generation(generation: usize) -> usize {
    #[cfg(not(loom))]
    const CHANGE_CYCLE: usize = GENERATIONS - 1;
    #[cfg(loom)]
    const CHANGE_CYCLE: usize = 2;
    generation % CHANGE_CYCLE + 1
}

#[derive(Debug)]
struct Versioned {
    t: AtomicU64,
    burst: AtomicU32,
    /// The number of the quota change that wrote this entry, with
    /// [`WRITING`] set while a setter writes the pair.
    version: AtomicU64,
}

/// The parameters of one generation as a decision read them, with the
/// entry's version at the time, for [`QuotaVersions::unchanged_since`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QuotaRead {
    pub(crate) params: Params,
    generation: usize,
    version: u64,
}

/// The parameters of each quota generation and the count of quota changes
/// so far. Changes are serialised by a [`ChangeLock`](crate::change_lock::ChangeLock).
#[derive(Debug)]
pub(crate) struct QuotaVersions {
    entries: [Versioned; GENERATIONS],
    changes: AtomicU64,
}

impl QuotaRead {
    /// A limiter's first quota, generation 0, which no change rewrites.
    #[inline]
    pub(crate) fn first(params: Params) -> QuotaRead {
        QuotaRead {
            params,
            generation: 0,
            version: 0,
        }
    }

    /// The generation read.
    #[inline]
    pub(crate) fn generation(&self) -> usize {
        self.generation
    }

    /// The number of the quota change that wrote the entry (0: the first
    /// quota).
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version
    }
}

impl QuotaVersions {
    /// Entries holding `quota` as generation 0 (and, unused, every other).
    pub(crate) fn new(quota: Quota) -> QuotaVersions {
        let p = Params::from(quota);
        QuotaVersions {
            entries: core::array::from_fn(|_| Versioned {
                t: AtomicU64::new(p.t),
                burst: AtomicU32::new(p.burst),
                version: AtomicU64::new(0),
            }),
            changes: AtomicU64::new(0),
        }
    }

    /// The parameters of the generation named by `word`, whole (one finished
    /// version's, see "Torn reads"), with the entry's version, so that a
    /// decision can check after its CAS that the entry was not rewritten
    /// meanwhile (module docs, rule 2). The caller must have obtained `word`
    /// with acquire ordering (every load and failed CAS in [`crate::state`]
    /// does).
    #[inline]
    pub(crate) fn read(&self, word: u64) -> QuotaRead {
        let generation = generation(word);
        let entry = &self.entries[generation];
        loop {
            // Acquire: pairs with the setter's release store of the finished
            // version, made after its parameter stores, so a reader that sees
            // this version sees at least those parameters.
            let version = entry.version.load(Ordering::Acquire);
            // Acquire: a load that reads a setter's (release) store of a
            // field sees the setter's mark, made before it, in the load of
            // the version below ("Torn reads"). The acquire that produced
            // `word` already made the entry it names visible.
            let params = Params {
                t: entry.t.load(Ordering::Acquire),
                burst: entry.burst.load(Ordering::Acquire),
            };
            // Acquire: as the first load.
            if version & WRITING == 0 && entry.version.load(Ordering::Acquire) == version {
                return QuotaRead {
                    params,
                    generation,
                    version,
                };
            }
            // A setter is rewriting this entry 15 generations on: our word is
            // stale. The setter finishes its stores; read again.
            spin_hint();
        }
    }

    /// Whether the entry `read` came from still holds what it held then: no
    /// quota change has rewritten it. Called after a successful CAS.
    #[inline]
    pub(crate) fn unchanged_since(&self, read: QuotaRead) -> bool {
        // Acquire: the successful CAS acquired the word; a setter that
        // rewrote this entry stored the new version before the word that CAS
        // read (module docs, rule 3), so this load cannot miss it.
        self.entries[read.generation]
            .version
            .load(Ordering::Acquire)
            == read.version
    }

    /// How many quota changes have begun so far.
    #[inline]
    pub(crate) fn changes(&self) -> u64 {
        // Acquire: pairs with the release increment in `begin_change`, so a
        // reader that sees the count also sees the change's entry write.
        self.changes.load(Ordering::Acquire)
    }

    /// Counts a quota change and writes `params` into the entry of
    /// `generation`, which must not be the generation in force. The caller
    /// holds the change lock (`_proof`) and then installs the generation
    /// with a CAS on the state word.
    pub(crate) fn begin_change(&self, _proof: &ChangeGuard<'_>, generation: usize, params: Params) {
        // Release: a canceller that reads the new count (acquire) knows a
        // change has begun. Only setters write it, under the lock.
        let change = self.changes.fetch_add(1, Ordering::Release) + 1;
        let entry = &self.entries[generation];
        // Release: a reader that sees the mark (acquire) then sees the word
        // this change's predecessors installed, so the fresh load it decides
        // on after rejecting a torn read names another entry: progress.
        entry.version.store(change | WRITING, Ordering::Release);
        // Release: a reader whose (acquire) load reads either store sees the
        // mark above in its next load of the version.
        entry.t.store(params.t, Ordering::Release);
        entry.burst.store(params.burst, Ordering::Release);
        // Release: a reader that sees this version sees the stores above;
        // and it is sequenced before the release CAS that installs the
        // generation, so a decision whose CAS reads that word sees it too.
        entry.version.store(change, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::change_lock::ChangeLock;

    #[test]
    fn packing_round_trips() {
        let w = pack(15, MAX_SPAN);
        assert_eq!(generation(w), 15);
        assert_eq!(tat(w), MAX_SPAN);
        assert_eq!(tat(pack(3, 12345)), 12345);
        assert_eq!(next_generation(15), 0);
        // A limiter's changes skip generation 0, its first quota.
        assert_eq!(next_change_generation(0), 1);
        assert_eq!(next_change_generation(14), 15);
        assert_eq!(next_change_generation(15), 1);
    }

    #[test]
    fn slots_publish_by_generation() {
        let q = Quota::per_second(10).unwrap();
        let entries = QuotaVersions::new(q);
        let lock = ChangeLock::new();
        let before = entries.read(pack(1, 0));
        entries.begin_change(&lock.lock(), 1, Params { t: 7, burst: 2 });
        assert_eq!(entries.read(pack(0, 0)).params, Params::from(q));
        assert_eq!(entries.read(pack(1, 0)).params, Params { t: 7, burst: 2 });
        assert_eq!(entries.changes(), 1);
        assert!(!entries.unchanged_since(before));
        assert!(entries.unchanged_since(entries.read(pack(1, 0))));
        assert!(entries.unchanged_since(entries.read(pack(0, 0))));
    }

    #[test]
    fn a_read_never_returns_a_pair_being_rewritten() {
        let q = Quota::per_second(10).unwrap();
        let entries = QuotaVersions::new(q);
        let before = entries.read(pack(1, 0));
        // A setter half-way through rewriting entry 1 (marked, `t` stored,
        // `burst` not yet) on another thread; it finishes after a while.
        let entry = &entries.entries[1];
        entry.version.store(1 | WRITING, Ordering::Relaxed);
        entry.t.store(7, Ordering::Release);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                entry.burst.store(2, Ordering::Release);
                entry.version.store(1, Ordering::Release);
            });
            // The read waits for the finished version: never (7, 10's burst).
            let after = entries.read(pack(1, 0));
            assert_eq!(after.params, Params { t: 7, burst: 2 });
            assert_eq!(after.version(), 1);
        });
        assert!(!entries.unchanged_since(before));
    }
}
