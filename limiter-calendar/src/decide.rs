//! The calendar decision as a pure function of `(word, window, n, limit)`,
//! and the layout of the state word.
//!
//! # The state word
//!
//! ```text
//!  63                    32 31                     0
//! +------------------------+------------------------+
//! | start: u32             | used: u32              |
//! +------------------------+------------------------+
//! ```
//!
//! `start` is the first second (since the Unix epoch) of the period the
//! count belongs to, so it names the period and orders periods; `used` is
//! the permits granted in it. A word whose `start` is older than the period
//! of `now` counts nothing: the first decision in a new period starts from
//! zero and installs the new `start` with its own grant. A word whose
//! `start` is *newer* than `now`'s period (the clock stepped back across a
//! boundary, or a racing thread read a later clock) is decided as it is: the
//! decision is charged to the newer period, never to one already reset, so a
//! clock that steps back can only make the quota stricter.

/// Packs a period start and a count.
#[inline]
pub(crate) fn pack(start: u32, used: u32) -> u64 {
    (u64::from(start) << 32) | u64::from(used)
}

/// The period start of a word.
#[inline]
pub(crate) fn start(word: u64) -> u32 {
    (word >> 32) as u32
}

/// The count of a word.
#[inline]
pub(crate) fn used(word: u64) -> u32 {
    word as u32
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `n > limit`: never satisfiable.
    Insufficient,
    /// The period holds fewer than `n` permits; its start names it.
    Exhausted {
        /// The start of the period that is exhausted.
        period_start: u32,
    },
}

/// Decides `n` permits against `word` when `now`'s period starts at
/// `current_start`: the new word, or the refusal. Writes nothing itself;
/// `n == 0` returns the word unchanged.
#[inline]
pub(crate) fn decide(word: u64, current_start: u32, n: u32, limit: u32) -> Result<u64, Refusal> {
    if n > limit {
        return Err(Refusal::Insufficient);
    }
    let (period_start, used_before) = if start(word) < current_start {
        (current_start, 0)
    } else {
        (start(word), used(word))
    };
    // used ≤ limit after every grant, but a lowered limit can leave it above.
    match used_before.checked_add(n) {
        Some(total) if total <= limit => {
            if n == 0 {
                Ok(word)
            } else {
                Ok(pack(period_start, total))
            }
        }
        _ => Err(Refusal::Exhausted { period_start }),
    }
}

/// The permits left in `now`'s period (starting at `current_start`) under
/// `word`.
#[inline]
pub(crate) fn remaining(word: u64, current_start: u32, limit: u32) -> u32 {
    if start(word) < current_start {
        limit
    } else {
        limit.saturating_sub(used(word))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_period_admits_exactly_its_limit() {
        let mut word = pack(100, 0);
        for k in 1..=3 {
            word = decide(word, 100, 1, 3).unwrap();
            assert_eq!(used(word), k);
        }
        assert_eq!(
            decide(word, 100, 1, 3),
            Err(Refusal::Exhausted { period_start: 100 })
        );
        assert_eq!(remaining(word, 100, 3), 0);
        // The next period starts from zero with this grant.
        assert_eq!(decide(word, 200, 2, 3), Ok(pack(200, 2)));
        assert_eq!(remaining(word, 200, 3), 3);
    }

    #[test]
    fn a_backwards_clock_charges_the_newer_period() {
        let word = pack(200, 2);
        assert_eq!(decide(word, 100, 1, 3), Ok(pack(200, 3)));
        assert_eq!(
            decide(pack(200, 3), 100, 1, 3),
            Err(Refusal::Exhausted { period_start: 200 })
        );
    }

    #[test]
    fn all_or_nothing_and_never_more_than_the_limit() {
        assert_eq!(decide(pack(1, 0), 1, 4, 3), Err(Refusal::Insufficient));
        assert_eq!(
            decide(pack(1, 2), 1, 2, 3),
            Err(Refusal::Exhausted { period_start: 1 })
        );
        assert_eq!(decide(pack(1, 2), 1, 0, 3), Ok(pack(1, 2)));
        // A lowered limit below the count refuses without overflow.
        assert_eq!(
            decide(pack(1, u32::MAX), 1, 1, 5),
            Err(Refusal::Exhausted { period_start: 1 })
        );
    }

    proptest! {
        /// Against a sequential model: a map from period to count, over
        /// periods that never go back.
        #[test]
        fn matches_a_per_period_count(
            limit in 1u32..20,
            requests in proptest::collection::vec((0u32..4, 0u32..6), 1..60),
        ) {
            let mut word = 0;
            let mut counts = std::collections::BTreeMap::<u32, u32>::new();
            let mut period = 0u32;
            for (advance, n) in requests {
                period += advance;
                let c = counts.entry(period).or_default();
                let model_ok = n <= limit && *c + n <= limit;
                match decide(word, period, n, limit) {
                    Ok(w) => {
                        prop_assert!(model_ok);
                        *c += n;
                        word = w;
                    }
                    Err(_) => prop_assert!(!model_ok),
                }
                prop_assert_eq!(remaining(word, period, limit), limit - counts[&period]);
                prop_assert!(counts.values().all(|&c| c <= limit));
            }
        }
    }
}
