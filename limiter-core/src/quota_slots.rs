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
//! so a reader that sees generation `g + 1` sees its slot. A slot is reused
//! only after 16 more quota changes; a decision that stays preempted between
//! its load and its CAS across 16 quota changes that happen to bring `tat`
//! back to the same value could mix parameters. That is the ABA bound of a
//! 4-bit tag, stated in `docs/design.md`.
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

/// The parameters of each quota generation, and the lock that serialises
/// quota changes.
#[derive(Debug)]
pub(crate) struct QuotaSlots {
    slots: [Slot; GENERATIONS],
    setter: AtomicU32,
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
        }
    }

    /// The parameters of the generation named by `word`.
    ///
    /// The caller must have obtained `word` with acquire ordering (every
    /// load and failed CAS in [`crate::state`] does).
    #[inline]
    pub(crate) fn params(&self, word: u64) -> Params {
        let slot = &self.slots[generation(word)];
        // Relaxed: the acquire that produced `word` synchronises with the
        // release CAS that published this generation after writing the slot.
        Params {
            t: slot.t.load(Ordering::Relaxed),
            burst: slot.burst.load(Ordering::Relaxed),
        }
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
    /// Writes `params` into the slot of `generation`, which must not be the
    /// generation in force.
    pub(crate) fn write(&self, generation: usize, params: Params) {
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
        guard.write(1, Params { t: 7, burst: 2 });
        drop(guard);
        assert_eq!(slots.params(pack(0, 0)), Params::from(q));
        assert_eq!(slots.params(pack(1, 0)), Params { t: 7, burst: 2 });
    }
}
