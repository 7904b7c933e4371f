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
//! `gen` (4 bits) names the entry in [`QuotaVersions`] that holds the quota in
//! force; `tat` is the GCRA theoretical arrival time.
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
//! An entry is reused after 16 quota changes, so the word can come back to a
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
//!    make the limiter stricter. (Voiding needs 16 quota changes within one
//!    decision; nothing else triggers it.)
//! 3. If the version is unchanged after the CAS, no setter rewrote the entry
//!    between the decision's read and its CAS. Returning the word to
//!    generation `g` takes a setter that rewrites entry `g` first, and that
//!    setter's version store happens before the word the CAS succeeded on
//!    (release sequence of the word), so the re-read would see it. Hence
//!    the parameters the decision used are the ones the word names.
//!
//! # Torn reads, and the decision path that does not check for them
//!
//! A reader that races a setter rewriting the same entry may see `t` of one
//! quota and `burst` of another. Each field alone is always a valid quota's
//! (`1 ≤ t ≤ MAX_SPAN`, `burst ≥ 1`), but the pair may break `t · burst ≤
//! MAX_SPAN`. There are two ways to read an entry:
//!
//! * [`QuotaVersions::read`] (quota reports, keyed cells, setters) re-reads
//!   until the pair satisfies the quota invariants and the entry is not
//!   being written.
//! * [`QuotaVersions::read_unchecked`] (the decision of `RateLimiter`) reads
//!   the version and the pair once and checks nothing: a decision that does
//!   not race a change pays one load for the version and, after deciding,
//!   one load and a compare ([`QuotaVersions::unchanged_since`] after a
//!   grant's CAS, [`QuotaVersions::whole_since`] after a refusal). The
//!   decision takes the span from the entry instead of multiplying, and
//!   saturates where it multiplies (`gcra::reserve_in_span`), so a torn
//!   read cannot overflow it, and its outcome is never used: a torn read
//!   is caught by the check after it.
//!
//! Why the check catches a torn pair: a setter marks the entry before it
//! writes the pair (the version with [`WRITING`] set, then `t` and `burst`
//! with release) and stores the finished version last. A reader loads the
//! version, then the pair with acquire, then the version again. If it read
//! either field from a setter's store, that setter's mark happens before the
//! second load, which therefore sees the mark or a later version: the two
//! loads differ. If both loads saw the same finished version, no setter
//! wrote the pair in between and the pair is that version's. A first load
//! that saw a mark is never accepted by [`QuotaVersions::whole_since`]; a
//! grant made on one cannot pass [`QuotaVersions::unchanged_since`] either,
//! since its CAS can succeed only on a word that names the entry again,
//! installed after the setter stored the finished version (rule 3).
//!
//! Cancellation does not rely on the tag at all: [`QuotaVersions`] counts every
//! quota change in a full 64-bit counter, a reservation records it, and
//! `cancel` refuses when it has moved, checking it and undoing the word
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

/// How many generations quota changes cycle through before an entry is
/// reused: all 16, except under loom, where a cycle of 2 lets a model reach
/// entry reuse (and the ABA it could cause) with two quota changes.
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
struct Versioned {
    t: AtomicU64,
    burst: AtomicU32,
    /// `t · burst`, so a decision needs no product of the two (and a torn
    /// read no overflow check): each field alone is at most `MAX_SPAN`.
    span: AtomicU64,
    /// The number of the quota change that wrote this entry.
    version: AtomicU64,
}

/// The parameters of one generation as a decision read them, with the
/// entry's version at the time, for [`QuotaVersions::unchanged_since`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QuotaRead {
    pub(crate) params: Params,
    /// `t · burst` as the entry holds it (the burst span).
    pub(crate) span: u64,
    generation: usize,
    version: u64,
}

/// The parameters of each quota generation and the count of quota changes
/// so far. Changes are serialised by the [`ChangeLock`] beside it.
#[derive(Debug)]
pub(crate) struct QuotaVersions {
    entries: [Versioned; GENERATIONS],
    changes: AtomicU64,
}

impl QuotaRead {
    /// The number of the quota change that wrote the entry (0: the first
    /// quota).
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version
    }
}

impl QuotaVersions {
    /// Slots holding `quota` as generation 0.
    pub(crate) fn new(quota: Quota) -> QuotaVersions {
        let p = Params::from(quota);
        QuotaVersions {
            entries: core::array::from_fn(|_| Versioned {
                t: AtomicU64::new(p.t),
                burst: AtomicU32::new(p.burst),
                span: AtomicU64::new(p.span()),
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

    /// The parameters of the generation named by `word`, with the entry's
    /// version, so that a decision can check after its CAS that the entry was
    /// not rewritten meanwhile (module docs, rule 2). The pair satisfies the
    /// quota invariants and the version is a finished one.
    #[inline]
    pub(crate) fn read(&self, word: u64) -> QuotaRead {
        loop {
            let read = self.read_unchecked(word);
            let p = read.params;
            // A marked version, or a pair that breaks the quota invariants,
            // can only come from a setter rewriting this entry 16 generations
            // on: our word is stale. The setter finishes its stores; read
            // again.
            if read.version & WRITING == 0
                && p.t != 0
                && p.burst != 0
                && p.t
                    .checked_mul(u64::from(p.burst))
                    .is_some_and(|s| s <= MAX_SPAN && s == read.span)
            {
                return read;
            }
            spin_hint();
        }
    }

    /// The entry of the generation named by `word` as it is now, unchecked:
    /// the version may carry [`WRITING`] and the pair may be torn (each field
    /// valid alone, see the module docs). Only for a decision whose
    /// arithmetic saturates and that checks its outcome with
    /// [`unchanged_since`](QuotaVersions::unchanged_since) (a grant, after
    /// its CAS) or [`whole_since`](QuotaVersions::whole_since) (a refusal)
    /// before using it.
    #[inline]
    pub(crate) fn read_unchecked(&self, word: u64) -> QuotaRead {
        let generation = generation(word);
        let entry = &self.entries[generation];
        // Acquire: pairs with the setter's release store of the finished
        // version, made after its parameter stores, so a reader that sees
        // this version sees at least those parameters.
        let version = entry.version.load(Ordering::Acquire);
        // Acquire: a load that reads a setter's (release) store of a field
        // sees the setter's mark, made before it, in every later load of
        // the version (module docs, "Torn reads"). The acquire that
        // produced `word` already made the entry it names visible.
        let params = Params {
            t: entry.t.load(Ordering::Acquire),
            burst: entry.burst.load(Ordering::Acquire),
        };
        // Acquire: as the pair.
        let span = entry.span.load(Ordering::Acquire);
        QuotaRead {
            params,
            span,
            generation,
            version,
        }
    }

    /// Whether the entry `read` came from still holds what it held then: no
    /// quota change has rewritten it. Called after a successful CAS.
    #[inline]
    pub(crate) fn unchanged_since(&self, read: QuotaRead) -> bool {
        // Acquire: the successful CAS acquired the word; a setter that
        // rewrote this entry stored the new version before the word that CAS
        // read (module docs, rule 3), so this load cannot miss it. It also
        // follows the acquire loads of the pair, so a setter whose stores
        // they read has its mark seen here (module docs, "Torn reads").
        self.entries[read.generation]
            .version
            .load(Ordering::Acquire)
            == read.version
    }

    /// Whether the parameters of `read` are one finished version's, whole:
    /// the version was not being written when first read and is unchanged
    /// now. Called after a decision that wrote nothing (a refusal), which
    /// has no CAS to order it: the acquire loads of the pair do (module
    /// docs, "Torn reads").
    #[inline]
    pub(crate) fn whole_since(&self, read: QuotaRead) -> bool {
        read.version & WRITING == 0 && self.unchanged_since(read)
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
        // (The stores of the fields below publish the mark to a torn read.)
        entry.version.store(change | WRITING, Ordering::Release);
        // Release: a reader whose (acquire) load reads either store sees the
        // mark above in its next load of the version.
        entry.t.store(params.t, Ordering::Release);
        entry.burst.store(params.burst, Ordering::Release);
        entry.span.store(params.span(), Ordering::Release);
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
    }

    #[test]
    fn slots_publish_by_generation() {
        let q = Quota::per_second(10).unwrap();
        let entries = QuotaVersions::new(q);
        let lock = ChangeLock::new();
        let before = entries.read(pack(1, 0));
        entries.begin_change(&lock.lock(), 1, Params { t: 7, burst: 2 });
        assert_eq!(entries.params(pack(0, 0)), Params::from(q));
        assert_eq!(entries.params(pack(1, 0)), Params { t: 7, burst: 2 });
        assert_eq!(entries.changes(), 1);
        assert!(!entries.unchanged_since(before));
        assert!(entries.unchanged_since(entries.read(pack(1, 0))));
        assert!(entries.unchanged_since(entries.read(pack(0, 0))));
    }

    #[test]
    fn a_read_that_overlaps_a_rewrite_is_never_whole() {
        let q = Quota::per_second(10).unwrap();
        let entries = QuotaVersions::new(q);
        let before = entries.read_unchecked(pack(1, 0));
        assert!(entries.whole_since(before), "no change: whole");
        // A setter half-way through rewriting entry 1: marked, `t` stored,
        // `burst` and the span not yet.
        let entry = &entries.entries[1];
        entry.version.store(1 | WRITING, Ordering::Relaxed);
        entry.t.store(7, Ordering::Release);
        let torn = entries.read_unchecked(pack(1, 0));
        assert_eq!(torn.params.t, 7);
        assert_ne!(torn.span, torn.params.span(), "a torn read");
        assert!(!entries.whole_since(before), "read before the mark");
        assert!(!entries.whole_since(torn), "read during the rewrite");
        // The setter finishes: the torn read stays rejected, a fresh one is
        // whole, and the checked read returns it.
        entry.burst.store(2, Ordering::Release);
        entry.span.store(14, Ordering::Release);
        entry.version.store(1, Ordering::Release);
        assert!(!entries.whole_since(torn));
        let after = entries.read_unchecked(pack(1, 0));
        assert!(entries.whole_since(after));
        assert_eq!(entries.read(pack(1, 0)), after);
        assert_eq!(after.params, Params { t: 7, burst: 2 });
    }
}
