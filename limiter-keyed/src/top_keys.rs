//! [`TopKeys`]: the heaviest keys of a stream (the keys with the most
//! rejections, say) in fixed memory, with a proven error bound: a sharded
//! Space-Saving summary (Metwally, Agrawal and El Abbadi, 2005).
//!
//! # Guarantees
//!
//! A key always lands in the same shard (by its hash), and each shard is an
//! independent Space-Saving summary of `m` counters over the keys of that
//! shard. For a key `x` of a shard that has seen a total weight `n`:
//!
//! * a counter never undercounts: `count(x) ≥ true(x)`, and it overcounts by
//!   at most its own `error`: `count(x) − error(x) ≤ true(x)`;
//! * `error(x) ≤ n / m` (the minimum counter is at most the mean);
//! * every key with `true(x) > n / m` holds a counter, so it is reported.
//!
//! Memory is `shards · m` counters (each a key, two `u64`s and an index
//! entry), fixed at construction: a flood of distinct keys evicts the
//! smallest counters and never grows the summary.
//!
//! # Cost on the record path
//!
//! One hash of the key to pick the shard, that shard's mutex (uncontended
//! unless two recorders hit the same shard at once: with `S` shards the
//! chance is about `1/S`), one hash-map lookup; replacing the smallest
//! counter scans the shard's `m` counters. Reading ([`TopKeys::top`]) locks
//! each shard in turn, never all at once.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::Mutex;

/// One reported key: its counter and the most that counter may overcount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopKey<K> {
    /// The key.
    pub key: K,
    /// Its counter: at least the key's true weight.
    pub count: u64,
    /// How much of `count` may belong to keys evicted before it:
    /// `count − error ≤ true weight ≤ count`.
    pub error: u64,
}

/// One Space-Saving summary of `capacity` counters.
#[derive(Debug)]
struct Shard<K> {
    counters: Vec<TopKey<K>>,
    index: HashMap<K, usize>,
    capacity: usize,
    total: u64,
}

impl<K: Hash + Eq + Clone> Shard<K> {
    fn new(capacity: usize) -> Shard<K> {
        Shard {
            counters: Vec::with_capacity(capacity),
            index: HashMap::with_capacity(capacity),
            capacity,
            total: 0,
        }
    }

    fn record(&mut self, key: &K, weight: u64) {
        self.total = self.total.saturating_add(weight);
        if let Some(&i) = self.index.get(key) {
            let c = &mut self.counters[i];
            c.count = c.count.saturating_add(weight);
            return;
        }
        if self.counters.len() < self.capacity {
            self.index.insert(key.clone(), self.counters.len());
            self.counters.push(TopKey {
                key: key.clone(),
                count: weight,
                error: 0,
            });
            return;
        }
        // The smallest counter gives its place (and its count, as error).
        let Some((i, _)) = self
            .counters
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| c.count)
        else {
            return; // capacity 0 is refused at construction
        };
        let min = self.counters[i].count;
        let old = std::mem::replace(
            &mut self.counters[i],
            TopKey {
                key: key.clone(),
                count: min.saturating_add(weight),
                error: min,
            },
        );
        self.index.remove(&old.key);
        self.index.insert(key.clone(), i);
    }
}

/// The heaviest keys of a stream in fixed memory (a sharded Space-Saving
/// summary; see the module documentation for the error bound).
///
/// # Examples
///
/// ```
/// use limiter_keyed::TopKeys;
///
/// let top = TopKeys::new(4, 16); // 4 shards of 16 counters
/// for _ in 0..50 {
///     top.record(&String::from("10.0.0.9"), 1);
/// }
/// for i in 0..200 {
///     top.record(&format!("10.1.0.{i}"), 1); // 200 keys seen once
/// }
/// let heaviest = top.top(1);
/// assert_eq!(heaviest[0].key, "10.0.0.9");
/// assert!(heaviest[0].count - heaviest[0].error <= 50 && 50 <= heaviest[0].count);
/// ```
#[derive(Debug)]
pub struct TopKeys<K, S = RandomState> {
    shards: Box<[Mutex<Shard<K>>]>,
    hasher: S,
}

impl<K: Hash + Eq + Clone> TopKeys<K> {
    /// `shards` independent summaries of `per_shard` counters each (each at
    /// least 1: smaller numbers are raised to 1, which only adds memory).
    pub fn new(shards: usize, per_shard: usize) -> TopKeys<K> {
        let shards = shards.max(1);
        let per_shard = per_shard.max(1);
        TopKeys {
            shards: (0..shards)
                .map(|_| Mutex::new(Shard::new(per_shard)))
                .collect(),
            hasher: RandomState::new(),
        }
    }
}

impl<K: Hash + Eq + Clone, S: BuildHasher> TopKeys<K, S> {
    /// Adds `weight` to `key`.
    pub fn record(&self, key: &K, weight: u64) {
        self.shard(key)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .record(key, weight);
    }

    /// The `k` largest counters, largest first (ties in no fixed order).
    pub fn top(&self, k: usize) -> Vec<TopKey<K>> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            all.extend(shard.counters.iter().cloned());
        }
        all.sort_unstable_by_key(|c| std::cmp::Reverse(c.count));
        all.truncate(k);
        all
    }

    /// The total weight recorded.
    pub fn total(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).total)
            .fold(0, u64::saturating_add)
    }

    /// The number of counters (the summary's fixed capacity).
    pub fn capacity(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).capacity)
            .sum()
    }

    /// Forgets everything recorded.
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            shard.counters.clear();
            shard.index.clear();
            shard.total = 0;
        }
    }

    fn shard(&self, key: &K) -> &Mutex<Shard<K>> {
        let hash = self.hasher.hash_one(key);
        // The high bits: the map inside the shard uses the low ones.
        let i = ((hash >> 32) as usize) % self.shards.len();
        &self.shards[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_flood_of_distinct_keys_never_grows_the_summary() {
        let top = TopKeys::new(2, 8);
        for i in 0..10_000u32 {
            top.record(&i, 1);
        }
        assert_eq!(top.top(usize::MAX).len(), 16);
        assert_eq!(top.capacity(), 16);
        assert_eq!(top.total(), 10_000);
        top.clear();
        assert_eq!(top.total(), 0);
        assert!(top.top(10).is_empty());
    }

    #[test]
    fn space_saving_hands_the_minimum_to_the_newcomer_as_error() {
        let mut shard = Shard::new(2);
        shard.record(&"a", 5);
        shard.record(&"b", 2);
        shard.record(&"c", 1); // replaces b: count 3, error 2
        let c = &shard.counters[shard.index[&"c"]];
        assert_eq!((c.count, c.error), (3, 2));
        assert!(!shard.index.contains_key(&"b"));
    }

    proptest! {
        /// Against exact counts: no undercount, overcount within the
        /// counter's error, error ≤ n/m of the key's shard, and every key
        /// above n/m reported.
        #[test]
        fn the_space_saving_bounds_hold(
            shards in 1usize..4,
            per_shard in 1usize..8,
            stream in proptest::collection::vec((0u8..24, 1u64..5), 0..300),
        ) {
            let top = TopKeys::new(shards, per_shard);
            let mut exact = HashMap::<u8, u64>::new();
            for &(key, weight) in &stream {
                top.record(&key, weight);
                *exact.entry(key).or_default() += weight;
            }
            let reported: HashMap<u8, TopKey<u8>> =
                top.top(usize::MAX).into_iter().map(|t| (t.key, t)).collect();
            for (&key, &truth) in &exact {
                let n = top.shard(&key).lock().unwrap().total;
                let bound = n / per_shard as u64;
                match reported.get(&key) {
                    Some(t) => {
                        prop_assert!(t.count >= truth);
                        prop_assert!(t.count - t.error <= truth);
                        prop_assert!(t.error <= bound);
                    }
                    None => prop_assert!(truth <= bound, "key {key} ({truth} > {bound}) missing"),
                }
            }
            let total: u64 = stream.iter().map(|&(_, w)| w).sum();
            prop_assert_eq!(top.total(), total);
        }
    }
}
