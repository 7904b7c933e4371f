//! Hot quota changes: the quota generation in the state word and the slots
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
//! `gen` (4 bits) names the slot in [`QuotaSlots`] that holds the quota in
//! force; `tat` is the GCRA theoretical arrival time.
//!
//! # Why the generation lives in the state word
//!
//! A decision reads the word, then the parameters of its generation, then
//! CASes the word. `set_quota` writes the next slot and then CASes the word
//! to the next generation (with `tat` rescaled). Because the generation is
//! part of the word, any decision that read the old word fails its CAS once
//! the new generation is installed and decides again with the new
//! parameters: no decision ever combines one quota's `t` with another's
//! `tau`, or old parameters with a rescaled `tat`. If the generation lived
//! elsewhere, a decision could pass its CAS on a `tat` that `set_quota` left
//! unchanged (an idle limiter) while using the old quota.
//!
//! The slot for generation `g + 1` is written before the word that names it
//! is published with a release CAS, and readers load the word with acquire,
//! so a reader that sees generation `g + 1` sees its slot.
//!
//! # The 4-bit tag, and why ABA cannot admit under a stale quota
//!
//! A slot is reused after 16 quota changes, so the word can come back to a
//! value a stalled decision loaded: with a clock that stands still, an idle
//! `tat` is the same after any number of changes, and a speed-up followed by
//! a slow-down by the same factor restores an owed `tat` exactly. A decision
//! whose CAS then succeeds would have decided with the parameters it read
//! before the slot was rewritten. Three rules make that impossible rather
//! than improbable:
//!
//! 1. Every slot carries a **version**: the full 64-bit number of the quota
//!    change that wrote it (0 for the initial quota). A setter stores `t`
//!    and `burst`, then the version with release, then installs the
//!    generation with a release CAS on the word.
//! 2. A decision reads the slot's version (acquire) before its parameters,
//!    and after a *successful* CAS reads the version again. If it changed,
//!    the slot was rewritten while the decision was in flight, so the
//!    decision may have used a stale quota: its outcome is void. The caller
//!    is not granted anything on it; the decision is made again from a fresh
//!    load. The permits the void CAS claimed stay counted, which can only
//!    make the limiter stricter. (Voiding needs 16 quota changes within one
//!    decision; nothing else triggers it.)
//! 3. If the version is unchanged after the CAS, no setter rewrote the slot
//!    between the decision's read and its CAS. Returning the word to
//!    generation `g` takes a setter that rewrites slot `g` first, and that
//!    setter's version store happens before the word the CAS succeeded on
//!    (release sequence of the word), so the re-read would see it. Hence
//!    the parameters the decision used are the ones the word names.
//!
//! Reading a slot never yields unusable parameters either: a reader that
//! races a setter rewriting the same slot may see `t` of one quota and
//! `burst` of another, so [`QuotaSlots::params`] re-reads until the pair
//! satisfies the quota invariants (`t ≥ 1`, `burst ≥ 1`, `t · burst ≤
//! MAX_SPAN`), and rule 2 voids any decision made on such a pair. The
//! arithmetic can therefore never overflow, whatever interleaving.
//!
//! Cancellation does not rely on the tag at all: [`QuotaSlots`] counts every
//! quota change in a full 64-bit counter, a reservation records it, and
//! `cancel` refuses when it has moved, checking it and undoing the word
//! under the same lock that serialises quota changes (see
//! [`crate::change_lock`]).

use crate::change_lock::ChangeGuard;
use crate::gcra::Params;
use crate::quota::{MAX_SPAN, Quota};
use crate::sync::{AtomicU32, AtomicU64, Ordering, spin_hint};

/// Bits of the state word that hold the generation.
const GEN_BITS: u32 = 4;
/// How many quota slots there are.
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

/// How many generations quota changes cycle through before a slot is
/// reused: all 16, except under loom, where a cycle of 2 lets a model reach
/// slot reuse (and the ABA it could cause) with two quota changes.
#[cfg(not(loom))]
pub(crate) const CYCLE: usize = GENERATIONS;
#[cfg(loom)]
pub(crate) const CYCLE: usize = 2;

/// The generation after `generation`, wrapping after [`CYCLE`].
#[inline]
pub(crate) fn next_generation(generation: usize) -> usize {
    (generation + 1) % CYCLE
}

#[derive(Debug)]
struct Slot {
    t: AtomicU64,
    burst: AtomicU32,
    /// The number of the quota change that wrote this slot.
    version: AtomicU64,
}

/// The parameters of one generation as a decision read them, with the
/// slot's version at the time, for [`QuotaSlots::unchanged_since`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotRead {
    pub(crate) params: Params,
    generation: usize,
    version: u64,
}

/// The parameters of each quota generation and the count of quota changes
/// so far. Changes are serialised by the [`ChangeLock`] beside it.
#[derive(Debug)]
pub(crate) struct QuotaSlots {
    slots: [Slot; GENERATIONS],
    changes: AtomicU64,
}

impl SlotRead {
    /// The number of the quota change that wrote the slot (0: the first
    /// quota).
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version
    }
}

impl QuotaSlots {
    /// Slots holding `quota` as generation 0.
    pub(crate) fn new(quota: Quota) -> QuotaSlots {
        let p = Params::from(quota);
        QuotaSlots {
            slots: core::array::from_fn(|_| Slot {
                t: AtomicU64::new(p.t),
                burst: AtomicU32::new(p.burst),
                version: AtomicU64::new(0),
            }),
            changes: AtomicU64::new(0),
        }
    }

    /// The parameters of the generation named by `word`.
    ///
    /// The caller must have obtained `word` with acquire ordering (every
    /// load and failed CAS in [`crate::state`] does).
    #[inline]
    pub(crate) fn params(&self, word: u64) -> Params {
        self.read(word).params
    }

    /// The parameters of the generation named by `word`, with the slot's
    /// version, so that a decision can check after its CAS that the slot was
    /// not rewritten meanwhile (module docs, rule 2).
    #[inline]
    pub(crate) fn read(&self, word: u64) -> SlotRead {
        let generation = generation(word);
        let slot = &self.slots[generation];
        loop {
            // Acquire: pairs with the setter's release store of the version,
            // made after its parameter stores, so a reader that sees this
            // version sees at least those parameters.
            let version = slot.version.load(Ordering::Acquire);
            // Relaxed: the acquire that produced `word` synchronises with the
            // release CAS that published this generation after writing the slot.
            let p = Params {
                t: slot.t.load(Ordering::Relaxed),
                burst: slot.burst.load(Ordering::Relaxed),
            };
            // A pair that breaks the quota invariants can only be torn by a
            // setter rewriting this slot 16 generations on; our word is stale
            // and its CAS will fail, but the arithmetic must not overflow
            // first. The setter finishes its two stores; read again.
            if p.t != 0
                && p.burst != 0
                && p.t
                    .checked_mul(u64::from(p.burst))
                    .is_some_and(|s| s <= MAX_SPAN)
            {
                return SlotRead {
                    params: p,
                    generation,
                    version,
                };
            }
            spin_hint();
        }
    }

    /// Whether the slot `read` came from still holds what it held then: no
    /// quota change has rewritten it. Called after a successful CAS.
    #[inline]
    pub(crate) fn unchanged_since(&self, read: SlotRead) -> bool {
        // Acquire: the successful CAS acquired the word; a setter that
        // rewrote this slot stored the new version before the word that CAS
        // read (module docs, rule 3), so this load cannot miss it.
        self.slots[read.generation].version.load(Ordering::Acquire) == read.version
    }

    /// How many quota changes have begun so far.
    #[inline]
    pub(crate) fn changes(&self) -> u64 {
        // Acquire: pairs with the release increment in `begin_change`, so a
        // reader that sees the count also sees the change's slot write.
        self.changes.load(Ordering::Acquire)
    }

    /// Counts a quota change and writes `params` into the slot of
    /// `generation`, which must not be the generation in force. The caller
    /// holds the change lock (`_proof`) and then installs the generation
    /// with a CAS on the state word.
    pub(crate) fn begin_change(&self, _proof: &ChangeGuard<'_>, generation: usize, params: Params) {
        // Release: a canceller that reads the new count (acquire) knows a
        // change has begun. Only setters write it, under the lock.
        let change = self.changes.fetch_add(1, Ordering::Release) + 1;
        let slot = &self.slots[generation];
        // Relaxed: the version store below publishes them.
        slot.t.store(params.t, Ordering::Relaxed);
        slot.burst.store(params.burst, Ordering::Relaxed);
        // Release: a reader that sees this version sees the stores above;
        // and it is sequenced before the release CAS that installs the
        // generation, so a decision whose CAS reads that word sees it too.
        slot.version.store(change, Ordering::Release);
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
    }

    #[test]
    fn slots_publish_by_generation() {
        let q = Quota::per_second(10).unwrap();
        let slots = QuotaSlots::new(q);
        let lock = ChangeLock::new();
        let before = slots.read(pack(1, 0));
        slots.begin_change(&lock.lock(), 1, Params { t: 7, burst: 2 });
        assert_eq!(slots.params(pack(0, 0)), Params::from(q));
        assert_eq!(slots.params(pack(1, 0)), Params { t: 7, burst: 2 });
        assert_eq!(slots.changes(), 1);
        assert!(!slots.unchanged_since(before));
        assert!(slots.unchanged_since(slots.read(pack(1, 0))));
        assert!(slots.unchanged_since(slots.read(pack(0, 0))));
    }
}
