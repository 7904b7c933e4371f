//! [`PenaltyBox`]: a key that is refused `after` times within `within` is
//! blocked outright for `block`, in a capped table with lock-free checks.
//!
//! # Semantics
//!
//! A key's strikes are counted in a window that opens at its first strike
//! and lasts `within`; the strike that brings the count to `after` blocks
//! the key until `block` after it, and the count starts again from zero
//! once the block ends. A strike during a block changes nothing (the block
//! is not extended: its `Retry-After` stays true). [`PenaltyBox::release`]
//! ends a block early.
//!
//! # The state word
//!
//! One `AtomicU64` per key, moved by CAS:
//!
//! ```text
//!  63  62                                   20 19              0
//! +---+---------------------------------------+-----------------+
//! | 0 | window start: ms since the box's epoch | strikes: u20    |
//! +---+---------------------------------------+-----------------+
//! | 1 | blocked until: ns since the box's epoch (≤ 2^60)         |
//! +---+---------------------------------------------------------+
//! ```
//!
//! or `RETIRED` (`u64::MAX`): taken out by the sweeper, look the key up
//! again. Because the block lives in the same word as the count, a sweep
//! (which retires only a word it saw idle: not blocked and no live window)
//! and a strike that blocks are ordered by one CAS: the sweep can never
//! drop a block it did not see.
//!
//! # Memory
//!
//! At most `max_keys` keys. A key enters only on its first strike. When the
//! table is full, one pass removes the idle keys, at most once per
//! `SWEEP_EVERY` (1 s of the box's clock), so a flood of new keys costs one
//! pass per second, not one per strike; a strike that still finds the table
//! full is [`Strike::Untracked`] (counted by the caller; the key is still
//! limited by its rule).

use core::hash::Hash;
use core::time::Duration;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use limiter_core::{Clock, DefaultClock, MonotonicClock};
use scc::HashIndex;

/// The word of a key the sweeper took out.
const RETIRED: u64 = u64::MAX;
const BLOCKED: u64 = 1 << 63;
const COUNT_BITS: u32 = 20;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const MS: u64 = 1_000_000;
const SWEEP_EVERY: u64 = 1_000_000_000;

/// The most strikes a [`Penalty`] can count (`2^20 − 1`).
pub const MAX_STRIKES: u32 = (1 << COUNT_BITS) - 1;

/// When a key is penalized, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Penalty {
    after: u32,
    within_ms: u64,
    block: u64,
}

/// Why a [`Penalty`] could not be built. Each variant names what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PenaltyError {
    /// `after` must be between 1 and [`MAX_STRIKES`].
    After {
        /// The number given.
        after: u32,
    },
    /// `within` must be at least 1 ms and under 2^42 ms (139 years).
    Within {
        /// The duration given.
        within: Duration,
    },
    /// `block` must be at least 1 ns and at most 2^60 ns (36 years).
    Block {
        /// The duration given.
        block: Duration,
    },
}

impl core::fmt::Display for PenaltyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PenaltyError::After { after } => write!(
                f,
                "penalty `after: {after}` must count between 1 and {MAX_STRIKES} rejections"
            ),
            PenaltyError::Within { within } => write!(
                f,
                "penalty `within: {within:?}` must be at least 1ms and under 139 years"
            ),
            PenaltyError::Block { block } => write!(
                f,
                "penalty `block: {block:?}` must be longer than 0 and at most 36 years"
            ),
        }
    }
}

impl std::error::Error for PenaltyError {}

impl Penalty {
    /// Block for `block` after `after` rejections within `within`.
    ///
    /// # Errors
    ///
    /// A [`PenaltyError`] naming the number out of range (`within` is
    /// counted in whole milliseconds, so it must be at least 1 ms).
    pub fn new(after: u32, within: Duration, block: Duration) -> Result<Penalty, PenaltyError> {
        if after == 0 || after > MAX_STRIKES {
            return Err(PenaltyError::After { after });
        }
        let within_ms = u64::try_from(within.as_millis()).unwrap_or(u64::MAX);
        if within_ms == 0 || within_ms >= 1 << 42 {
            return Err(PenaltyError::Within { within });
        }
        let block_ns = u64::try_from(block.as_nanos()).unwrap_or(u64::MAX);
        if block_ns == 0 || block_ns > limiter_core::clock::MAX_SPAN {
            return Err(PenaltyError::Block { block });
        }
        Ok(Penalty {
            after,
            within_ms,
            block: block_ns,
        })
    }

    /// The strikes that block.
    pub fn after(&self) -> u32 {
        self.after
    }

    /// The window the strikes are counted in (whole milliseconds).
    pub fn within(&self) -> Duration {
        Duration::from_millis(self.within_ms)
    }

    /// How long a block lasts.
    pub fn block(&self) -> Duration {
        Duration::from_nanos(self.block)
    }

    /// The word after a strike at `now` (ns; `now_ms` the same in ms) on
    /// `word`, and what it did. Pure: the CAS loop is the caller's.
    fn strike(&self, word: u64, now: u64) -> (u64, Strike) {
        let now_ms = now / MS;
        if word & BLOCKED != 0 {
            let until = word & !BLOCKED;
            if now < until {
                return (
                    word,
                    Strike::Blocked {
                        retry_after: Duration::from_nanos(until - now),
                    },
                );
            }
        }
        let (start, count) = if word & BLOCKED != 0 {
            (now_ms, 0)
        } else {
            let (start, count) = (word >> COUNT_BITS, word & COUNT_MASK);
            if count == 0 || now_ms >= start.saturating_add(self.within_ms) {
                (now_ms, 0)
            } else {
                (start, count)
            }
        };
        let count = count + 1;
        if count >= u64::from(self.after) {
            let until = now
                .saturating_add(self.block)
                .min(limiter_core::clock::MAX_SPAN);
            (
                BLOCKED | until,
                Strike::Penalized {
                    retry_after: Duration::from_nanos(until - now),
                },
            )
        } else {
            (
                (start << COUNT_BITS) | count,
                Strike::Counted {
                    strikes: count as u32,
                },
            )
        }
    }

    /// Whether `word` carries nothing at `now`: no block in force and no
    /// strike in a live window.
    fn is_idle(&self, word: u64, now: u64) -> bool {
        if word & BLOCKED != 0 {
            return now >= word & !BLOCKED;
        }
        let (start, count) = (word >> COUNT_BITS, word & COUNT_MASK);
        count == 0 || now / MS >= start.saturating_add(self.within_ms)
    }
}

/// What one strike did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strike {
    /// Counted: the key has this many strikes in its window.
    Counted {
        /// Strikes so far in the window.
        strikes: u32,
    },
    /// This strike blocked the key for `retry_after`.
    Penalized {
        /// The whole block.
        retry_after: Duration,
    },
    /// The key was already blocked; the block is unchanged.
    Blocked {
        /// What is left of the block.
        retry_after: Duration,
    },
    /// The table is full of keys with live strikes or blocks: not counted.
    Untracked,
}

/// Keys refused too often, blocked for a while (see the module
/// documentation for the exact semantics).
///
/// # Memory ordering
///
/// Each key's strikes and block are one word moved by CAS, so strikes on a
/// key are linearizable and a check ([`blocked`](PenaltyBox::blocked)) sees
/// the last strike's effect or an earlier one. Nothing else is published
/// with the word (relaxed orderings throughout).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::ManualClock;
/// use limiter_keyed::{Penalty, PenaltyBox, Strike};
///
/// let clock = ManualClock::new();
/// let penalty = Penalty::new(3, Duration::from_secs(60), Duration::from_secs(300))?;
/// let jail = PenaltyBox::with_clock(penalty, 1_000, clock.clone());
/// assert_eq!(jail.strike(&"10.0.0.9"), Strike::Counted { strikes: 1 });
/// assert_eq!(jail.strike(&"10.0.0.9"), Strike::Counted { strikes: 2 });
/// let five_minutes = Duration::from_secs(300);
/// assert_eq!(jail.strike(&"10.0.0.9"), Strike::Penalized { retry_after: five_minutes });
/// clock.advance(Duration::from_secs(100));
/// assert_eq!(jail.blocked(&"10.0.0.9"), Some(Duration::from_secs(200)));
/// assert!(jail.release(&"10.0.0.9"));
/// assert_eq!(jail.blocked(&"10.0.0.9"), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PenaltyBox<K: 'static, C: Clock = DefaultClock> {
    penalty: Penalty,
    map: HashIndex<K, Box<AtomicU64>>,
    len: AtomicUsize,
    max_keys: usize,
    /// The box's time of the last full sweep, plus one (0: never).
    swept: AtomicU64,
    origin: u64,
    clock: C,
}

impl<K, C: Clock> core::fmt::Debug for PenaltyBox<K, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PenaltyBox")
            .field("penalty", &self.penalty)
            .field("len", &self.len.load(Ordering::Relaxed))
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone + 'static> PenaltyBox<K, MonotonicClock> {
    /// A box for `penalty` holding at most `max_keys` keys, on a monotonic
    /// clock.
    pub fn new(penalty: Penalty, max_keys: usize) -> PenaltyBox<K, MonotonicClock> {
        PenaltyBox::with_clock(penalty, max_keys, MonotonicClock::new())
    }
}

impl<K: Hash + Eq + Clone + 'static, C: Clock> PenaltyBox<K, C> {
    /// A box for `penalty` holding at most `max_keys` keys, on `clock`.
    pub fn with_clock(penalty: Penalty, max_keys: usize, clock: C) -> PenaltyBox<K, C> {
        PenaltyBox {
            penalty,
            map: HashIndex::new(),
            len: AtomicUsize::new(0),
            max_keys,
            swept: AtomicU64::new(0),
            origin: clock.now(),
            clock,
        }
    }

    /// The penalty.
    pub fn penalty(&self) -> Penalty {
        self.penalty
    }

    /// Keys held now (with strikes or blocks, or idle and not yet swept).
    pub fn len(&self) -> usize {
        // Relaxed: a statistic.
        self.len.load(Ordering::Relaxed)
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn now(&self) -> u64 {
        self.clock.now().saturating_sub(self.origin)
    }

    /// What is left of `key`'s block, if it is blocked now. Lock-free: one
    /// epoch-protected lookup and one load.
    pub fn blocked(&self, key: &K) -> Option<Duration> {
        let now = self.now();
        self.map
            .peek_with(key, |_, word| {
                // Relaxed: one word, nothing published with it.
                let word = word.load(Ordering::Relaxed);
                let until = word & !BLOCKED;
                (word != RETIRED && word & BLOCKED != 0 && now < until)
                    .then(|| Duration::from_nanos(until - now))
            })
            .flatten()
    }

    /// `key`'s strikes in its live window (0 when blocked or idle).
    pub fn strikes(&self, key: &K) -> u32 {
        let now = self.now();
        self.map
            .peek_with(key, |_, word| {
                let word = word.load(Ordering::Relaxed);
                if word == RETIRED || word & BLOCKED != 0 || self.penalty.is_idle(word, now) {
                    0
                } else {
                    (word & COUNT_MASK) as u32
                }
            })
            .unwrap_or(0)
    }

    /// Records a refusal of `key`.
    pub fn strike(&self, key: &K) -> Strike {
        let now = self.now();
        loop {
            let outcome = self.map.peek_with(key, |_, word| self.strike_on(word, now));
            match outcome {
                Some(Some(strike)) => return strike,
                // Retired: the sweeper is removing it; look again.
                Some(None) => {
                    let _ = self.remove_retired(key);
                }
                None => {
                    if self.len() >= self.max_keys && !self.sweep(now) {
                        return Strike::Untracked;
                    }
                    let (word, strike) = self.penalty.strike(0, now);
                    if self
                        .map
                        .insert_sync(key.clone(), Box::new(AtomicU64::new(word)))
                        .is_ok()
                    {
                        // Relaxed: a counter bounded by the check above
                        // (racing inserters may pass it together: at most
                        // one extra key per racing thread).
                        self.len.fetch_add(1, Ordering::Relaxed);
                        return strike;
                    }
                    // Inserted by another thread first: strike on its entry.
                }
            }
        }
    }

    /// The CAS loop on one key's word; `None` if it is retired.
    fn strike_on(&self, word: &AtomicU64, now: u64) -> Option<Strike> {
        // Relaxed: the CAS below orders strikes on this word.
        let mut current = word.load(Ordering::Relaxed);
        loop {
            if current == RETIRED {
                return None;
            }
            let (next, strike) = self.penalty.strike(current, now);
            if next == current {
                return Some(strike);
            }
            // Relaxed: one word, nothing else published with it.
            match word.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(strike),
                Err(actual) => current = actual,
            }
        }
    }

    /// Ends `key`'s block (and forgets its strikes) now. Returns whether the
    /// key was held.
    pub fn release(&self, key: &K) -> bool {
        let removed = self.map.remove_sync(key);
        if removed {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    fn remove_retired(&self, key: &K) -> bool {
        let removed = self
            .map
            .remove_if_sync(key, |w| w.load(Ordering::Relaxed) == RETIRED);
        if removed {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Removes the idle keys if the last pass is at least `SWEEP_EVERY` old;
    /// returns whether there is room now.
    fn sweep(&self, now: u64) -> bool {
        // Relaxed: the pass is claimed by the CAS; its effects are the map's.
        let last = self.swept.load(Ordering::Relaxed);
        if last != 0 && now < (last - 1).saturating_add(SWEEP_EVERY) {
            return false;
        }
        if self
            .swept
            .compare_exchange(last, now + 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false; // another thread sweeps
        }
        let mut removed = 0;
        self.map.retain_sync(|_, word| {
            let w = word.load(Ordering::Relaxed);
            // Retire only a word seen idle: a strike that moved it since
            // makes this CAS fail and keeps the key.
            let retire = w == RETIRED
                || (self.penalty.is_idle(w, now)
                    && word
                        .compare_exchange(w, RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok());
            removed += usize::from(retire);
            !retire
        });
        self.len.fetch_sub(removed, Ordering::Relaxed);
        self.len() < self.max_keys
    }
}

#[cfg(test)]
mod tests;
