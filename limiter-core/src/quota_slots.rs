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
//! # The 4-bit tag and ABA
//!
//! A slot is reused after 16 quota changes. Three defences keep that from
//! mattering:
//!
//! 1. `set_quota` moves an idle `tat` (before `now`) up to `now`, which is
//!    equivalent for every later reading and stricter for a clock that steps
//!    back. So with a clock that advances between changes, 16 changes on an
//!    idle limiter cannot bring the word back to a value a stalled decision
//!    loaded. Where the limiter owes time and `t` is unchanged, the rescale
//!    is the identity, and a stalled decision that passes its CAS is exactly
//!    as if it had been made before the changes; where `t` changes, the debt
//!    is rescaled and returning to the same word takes an exact numeric
//!    coincidence across 16 changes.
//! 2. Reading a slot never yields unusable parameters: a reader that races
//!    a setter rewriting the same slot may see `t` of one quota and `burst`
//!    of another, so [`QuotaSlots::params`] re-reads until the pair satisfies
//!    the quota invariants (`t ≥ 1`, `burst ≥ 1`, `t · burst ≤ MAX_SPAN`).
//!    The arithmetic can therefore never overflow, whatever interleaving.
//! 3. Cancellation does not rely on the tag at all: [`QuotaSlots`] counts
//!    every quota change in a full 64-bit counter, a reservation records it,
//!    and `cancel` refuses when it has moved (see `RateLimiter::cancel`).
//!
//! Setters are serialised by a spin lock (quota changes are rare and never on
//! the acquisition path, which never touches the lock).

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

/// The generation after `generation`, wrapping at 16.
#[inline]
pub(crate) fn next_generation(generation: usize) -> usize {
    (generation + 1) % GENERATIONS
}

#[derive(Debug)]
struct Slot {
    t: AtomicU64,
    burst: AtomicU32,
}

/// The parameters of each quota generation, the lock that serialises
/// quota changes, and the count of quota changes so far.
#[derive(Debug)]
pub(crate) struct QuotaSlots {
    slots: [Slot; GENERATIONS],
    setter: AtomicU32,
    changes: AtomicU64,
}

impl QuotaSlots {
    /// Slots holding `quota` as generation 0.
    pub(crate) fn new(quota: Quota) -> QuotaSlots {
        let p = Params::from(quota);
        QuotaSlots {
            slots: core::array::from_fn(|_| Slot {
                t: AtomicU64::new(p.t),
                burst: AtomicU32::new(p.burst),
            }),
            setter: AtomicU32::new(0),
            changes: AtomicU64::new(0),
        }
    }

    /// The parameters of the generation named by `word`.
    ///
    /// The caller must have obtained `word` with acquire ordering (every
    /// load and failed CAS in [`crate::state`] does).
    #[inline]
    pub(crate) fn params(&self, word: u64) -> Params {
        let slot = &self.slots[generation(word)];
        loop {
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
                return p;
            }
            spin_hint();
        }
    }

    /// How many quota changes have begun so far.
    #[inline]
    pub(crate) fn changes(&self) -> u64 {
        // Acquire: pairs with the release increment in `begin_change`, so a
        // reader that sees the count also sees the change's slot write.
        self.changes.load(Ordering::Acquire)
    }

    /// Takes the setter lock; the returned guard releases it.
    pub(crate) fn lock(&self) -> SetterGuard<'_> {
        // Acquire: the previous setter's slot writes and word CAS happen before
        // ours. Weak CAS in a spin loop; setters are rare.
        while self
            .setter
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin_hint();
        }
        SetterGuard { slots: self }
    }
}

/// Proof that the setter lock is held; writing a slot requires it.
#[derive(Debug)]
pub(crate) struct SetterGuard<'a> {
    slots: &'a QuotaSlots,
}

impl SetterGuard<'_> {
    /// Counts a quota change and writes `params` into the slot of
    /// `generation`, which must not be the generation in force. The caller
    /// then installs the generation with a CAS on the state word.
    pub(crate) fn begin_change(&self, generation: usize, params: Params) {
        // Release: a canceller that reads the new count (acquire) knows a
        // change has begun; only setters write it, under the lock.
        self.slots.changes.fetch_add(1, Ordering::Release);
        let slot = &self.slots.slots[generation];
        // Relaxed: published by the release CAS that installs the generation.
        slot.t.store(params.t, Ordering::Relaxed);
        slot.burst.store(params.burst, Ordering::Relaxed);
    }
}

impl Drop for SetterGuard<'_> {
    fn drop(&mut self) {
        // Release: the next setter sees our writes.
        self.slots.setter.store(0, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

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
        let guard = slots.lock();
        guard.begin_change(1, Params { t: 7, burst: 2 });
        drop(guard);
        assert_eq!(slots.params(pack(0, 0)), Params::from(q));
        assert_eq!(slots.params(pack(1, 0)), Params { t: 7, burst: 2 });
        assert_eq!(slots.changes(), 1);
    }
}
