//! The atomic state word and the CAS loop that every algorithm shares.
//!
//! An [`AtomicState`] is one atomic word (its owner keeps it off its
//! neighbours' cache lines: `CachePadded`, or an aligned limiter): an
//! `AtomicU64` for GCRA and the priority tiers, an
//! `AtomicU128` for the sliding window (a full window index beside two
//! counts) and the warm-up limiter (next free instant beside stored
//! permits), whose fields do not fit in 64 bits. Its meaning belongs
//! to the algorithm that owns it; this module only guarantees how it
//! changes:
//!
//! 1. [`AtomicState::update`] loads the word once, asks a pure `decide`
//!    function what to do with it, and, if `decide` wants a different word,
//!    installs it with one `compare_exchange_weak`. When the CAS fails
//!    (another thread got there first, or the weak CAS failed spuriously)
//!    `decide` runs again on the value the failed CAS returned: no extra load,
//!    and every decision is made on a value that was current at some instant.
//! 2. A refusal, or a decision that keeps the word, writes nothing: no CAS, no
//!    cache-line invalidation for the other threads.
//! 3. Every write is a read-modify-write. That keeps a release made by any
//!    earlier write (such as a new quota generation, see
//!    [`crate::quota_versions`]) visible to every later acquiring reader, through
//!    the release sequence.
//!
//! The loop is lock-free: a CAS fails only because another thread's
//! succeeded. It is not wait-free; under contention a thread may retry, each
//! retry costing one pure decision and one CAS.

use crate::sync::{AtomicU64, AtomicU128, Ordering};

/// An atomic integer that can serve as a state word.
pub(crate) trait AtomicWord {
    /// The integer it holds.
    type Value: Copy + Eq;
    fn new(value: Self::Value) -> Self;
    fn load(&self, order: Ordering) -> Self::Value;
    fn compare_exchange(
        &self,
        current: Self::Value,
        new: Self::Value,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Self::Value, Self::Value>;
    fn compare_exchange_weak(
        &self,
        current: Self::Value,
        new: Self::Value,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Self::Value, Self::Value>;
}

macro_rules! atomic_word {
    ($atomic:ty, $value:ty) => {
        impl AtomicWord for $atomic {
            type Value = $value;
            #[inline]
            fn new(value: $value) -> Self {
                <$atomic>::new(value)
            }
            #[inline]
            fn load(&self, order: Ordering) -> $value {
                <$atomic>::load(self, order)
            }
            #[inline]
            fn compare_exchange(
                &self,
                c: $value,
                n: $value,
                s: Ordering,
                f: Ordering,
            ) -> Result<$value, $value> {
                <$atomic>::compare_exchange(self, c, n, s, f)
            }
            #[inline]
            fn compare_exchange_weak(
                &self,
                c: $value,
                n: $value,
                s: Ordering,
                f: Ordering,
            ) -> Result<$value, $value> {
                <$atomic>::compare_exchange_weak(self, c, n, s, f)
            }
        }
    };
}

atomic_word!(AtomicU64, u64);
atomic_word!(AtomicU128, u128);

/// One state word.
#[derive(Debug)]
pub(crate) struct AtomicState<A: AtomicWord = AtomicU64> {
    word: A,
}

impl<A: AtomicWord> AtomicState<A> {
    pub(crate) fn new(word: A::Value) -> AtomicState<A> {
        AtomicState { word: A::new(word) }
    }

    /// The current word.
    #[inline]
    pub(crate) fn load(&self) -> A::Value {
        // Acquire: the word may name data published with a release by the
        // write that produced it (a quota generation); we may read that data.
        self.word.load(Ordering::Acquire)
    }

    /// Runs `decide` on the current word until its outcome is installed.
    ///
    /// `decide(word)` returns `Ok((new_word, out))` to move the word to
    /// `new_word` and return `out`, or `Err(e)` to refuse without writing.
    /// When `new_word == word` nothing is written.
    #[inline]
    pub(crate) fn update<T, E>(
        &self,
        decide: impl FnMut(A::Value) -> Result<(A::Value, T), E>,
    ) -> Result<T, E> {
        // Acquire on the load and on a failed CAS: the word may name data
        // published with a release by the write that produced it (a quota
        // generation), and we may read that data. AcqRel on success: acquire
        // as for the load, release so a word that publishes data (a new quota
        // generation) does so; on x86 all of these are free.
        update_word(
            &self.word,
            Ordering::Acquire,
            Ordering::AcqRel,
            Ordering::Acquire,
            decide,
        )
    }

    /// As [`update`](AtomicState::update), with `decide` saying `None` to
    /// keep the word (rather than returning it unchanged, so that a caller
    /// that always writes pays no comparison), and a refusal saying whether
    /// it was decided on a word that moved after the first load (`true`: a
    /// CAS was lost to another writer) while the caller's other inputs (its
    /// clock reading) stayed as they were.
    #[inline]
    pub(crate) fn update_retried<T, E>(
        &self,
        decide: impl FnMut(A::Value) -> Result<(Option<A::Value>, T), E>,
    ) -> Result<T, (E, bool)> {
        // Orderings as in `update`.
        update_word_retried(
            &self.word,
            Ordering::Acquire,
            Ordering::AcqRel,
            Ordering::Acquire,
            decide,
        )
    }

    /// Replaces `current` by `new` if the word still equals `current`.
    /// Returns whether it did. Used to undo an exact earlier transition (a
    /// cancelled reservation), and as the one CAS of a decision that does
    /// not retry (a plain try's first round, which leaves any retry to the
    /// full loop).
    #[inline]
    pub(crate) fn replace_if(&self, current: A::Value, new: A::Value) -> bool {
        // AcqRel/Acquire: as in `update`. The strong CAS because a spurious
        // failure here would be reported to the caller as "not refunded".
        self.word
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// The CAS loop of the module docs on any atomic word, with the caller's
/// orderings: `load` for the first read, `success` and `failure` for the
/// `compare_exchange_weak`. [`AtomicState::update`] runs it on a padded word
/// with acquire/release orderings; a bare word that names no other data (a
/// keyed limiter's [`GcraCell`](crate::cell::GcraCell)) may use relaxed ones,
/// since the CAS alone orders decisions on one word.
#[inline]
pub(crate) fn update_word<A: AtomicWord, T, E>(
    word: &A,
    load: Ordering,
    success: Ordering,
    failure: Ordering,
    mut decide: impl FnMut(A::Value) -> Result<(A::Value, T), E>,
) -> Result<T, E> {
    update_word_retried(word, load, success, failure, |current| {
        decide(current).map(|(next, out)| ((next != current).then_some(next), out))
    })
    .map_err(|(e, _)| e)
}

/// [`update_word`], with `None` from `decide` to keep the word, and a
/// refusal's flag of whether it was decided on another word than the first
/// one loaded (after a CAS lost to another writer; a spurious failure of
/// the weak CAS leaves the word as it was).
#[inline]
pub(crate) fn update_word_retried<A: AtomicWord, T, E>(
    word: &A,
    load: Ordering,
    success: Ordering,
    failure: Ordering,
    mut decide: impl FnMut(A::Value) -> Result<(Option<A::Value>, T), E>,
) -> Result<T, (E, bool)> {
    let first = word.load(load);
    let mut current = first;
    loop {
        let (next, out) = match decide(current) {
            Ok(decided) => decided,
            Err(e) => return Err((e, current != first)),
        };
        let Some(next) = next else {
            return Ok(out);
        };
        match word.compare_exchange_weak(current, next, success, failure) {
            Ok(_) => return Ok(out),
            Err(actual) => current = actual,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn update_installs_the_decision() {
        let s: AtomicState = AtomicState::new(5);
        let out: Result<u64, ()> = s.update(|w| Ok((w + 1, w)));
        assert_eq!(out, Ok(5));
        assert_eq!(s.load(), 6);
    }

    #[test]
    fn a_refusal_writes_nothing() {
        let s: AtomicState = AtomicState::new(5);
        let out: Result<(), &str> = s.update(|_| Err("no"));
        assert_eq!(out, Err("no"));
        assert_eq!(s.load(), 5);
    }

    #[test]
    fn replace_if_only_replaces_the_expected_word() {
        let s: AtomicState<AtomicU128> = AtomicState::new(5);
        assert!(!s.replace_if(4, 9));
        assert!(s.replace_if(5, 9));
        assert_eq!(s.load(), 9);
    }
}
