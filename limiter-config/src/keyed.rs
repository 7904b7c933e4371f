//! [`KeyedRule`]: one GCRA [`RateLimiter`] per key under a quota that a
//! reload can change for every key at once, keeping each key's state.
//!
//! `limiter-keyed`'s `KeyedLimiter` has no `set_quota` (its quota is fixed
//! at build), and a hot reload must not reset the keys (that would be a
//! free burst for every client). So a keyed rule keeps a full core
//! `RateLimiter` per key: [`KeyedRule::set_quota`] calls the core's
//! `set_quota` on each, which keeps every key's fill level in permits
//! exactly as it does for a global limiter.
//!
//! Invariants: every key is decided under the quota in force (a key created
//! during a quota change is created under the new one: both happen under the
//! write lock); at most `max_keys` keys are held; when full, keys whose
//! limiter is full again (idle, carrying no information) are dropped before
//! a new key is refused. The price of the per-key `RateLimiter` (640
//! bytes, about 700 a key with its map entry, against 16 for `KeyedLimiter`'s
//! cell) and of the
//! `RwLock` (a shared read lock per decision) is what buys the state-keeping
//! quota change; `docs/config.md` says so.

use crate::RuleClock;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use limiter_core::{Quota, RateLimiter};

/// A new key was refused: `max_keys` keys are held and none is idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeysFull {
    /// The cap.
    pub max_keys: usize,
}

impl fmt::Display for KeysFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the rule holds its maximum of {} keys and none is idle; raise `max_keys`",
            self.max_keys
        )
    }
}

impl std::error::Error for KeysFull {}

struct Keys<C: RuleClock> {
    quota: Quota,
    map: HashMap<String, Arc<RateLimiter<C>>>,
}

/// One GCRA limiter per key, all under one quota that can change.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_config::KeyedRule;
/// use limiter_core::{ManualClock, Quota};
///
/// let clock = ManualClock::new();
/// let rule = KeyedRule::new(Quota::per_second(10)?.with_burst(2)?, 100, clock.clone());
/// rule.limiter("alice")?.try_acquire_n(2)?; // drained
/// rule.set_quota(Quota::per_second(1)?.with_burst(2)?);
/// assert_eq!(rule.limiter("alice")?.available(), 0); // still drained
/// assert_eq!(rule.limiter("bob")?.available(), 2); // a new key is full
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(rule.limiter("alice")?.available(), 1); // at the new rate
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedRule<C: RuleClock> {
    keys: RwLock<Keys<C>>,
    clock: C,
    max_keys: usize,
}

impl<C: RuleClock> fmt::Debug for KeyedRule<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRule")
            .field("quota", &self.quota())
            .field("keys", &self.len())
            .field("max_keys", &self.max_keys)
            .finish()
    }
}

impl<C: RuleClock> KeyedRule<C> {
    /// No keys yet, `quota` for each, at most `max_keys` of them.
    pub fn new(quota: Quota, max_keys: usize, clock: C) -> KeyedRule<C> {
        KeyedRule {
            keys: RwLock::new(Keys {
                quota,
                map: HashMap::new(),
            }),
            clock,
            max_keys,
        }
    }

    /// The limiter of `key`, made (full) if the key is new.
    ///
    /// # Errors
    ///
    /// [`KeysFull`] when the key is new, `max_keys` keys are held and none
    /// of them is idle.
    pub fn limiter(&self, key: &str) -> Result<Arc<RateLimiter<C>>, KeysFull> {
        // A poisoned lock only means a panic elsewhere; the map is intact.
        if let Some(l) = self
            .keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .get(key)
        {
            return Ok(Arc::clone(l));
        }
        let mut keys = self.keys.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(l) = keys.map.get(key) {
            return Ok(Arc::clone(l));
        }
        if keys.map.len() >= self.max_keys {
            // Idle keys are full again: dropping them loses nothing.
            keys.map
                .retain(|_, l| Arc::strong_count(l) > 1 || l.available() < l.quota().burst());
            if keys.map.len() >= self.max_keys {
                return Err(KeysFull {
                    max_keys: self.max_keys,
                });
            }
        }
        let limiter = Arc::new(RateLimiter::with_clock(keys.quota, self.clock.clone()));
        keys.map.insert(key.to_owned(), Arc::clone(&limiter));
        Ok(limiter)
    }
}

impl<C: RuleClock> KeyedRule<C> {
    /// Applies `quota` to every key (each keeps its fill level in permits,
    /// see `RateLimiter::set_quota`) and to every key made from now on.
    pub fn set_quota(&self, quota: Quota) {
        let mut keys = self.keys.write().unwrap_or_else(PoisonError::into_inner);
        keys.quota = quota;
        for limiter in keys.map.values() {
            limiter.set_quota(quota);
        }
    }

    /// The quota in force.
    pub fn quota(&self) -> Quota {
        self.keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .quota
    }

    /// How many keys are held.
    pub fn len(&self) -> usize {
        self.keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap on keys.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use limiter_core::ManualClock;

    #[test]
    fn full_table_drops_idle_keys_first() {
        let clock = ManualClock::new();
        let q = Quota::per_second(1).unwrap();
        let rule = KeyedRule::new(q, 2, clock.clone());
        rule.limiter("a").unwrap().try_acquire().unwrap();
        rule.limiter("b").unwrap().try_acquire().unwrap();
        assert_eq!(rule.limiter("c").unwrap_err(), KeysFull { max_keys: 2 });
        clock.advance(std::time::Duration::from_secs(1)); // a and b idle again
        rule.limiter("c").unwrap().try_acquire().unwrap();
        assert_eq!(rule.len(), 1);
    }

    #[test]
    fn set_quota_reaches_every_key() {
        let rule = KeyedRule::new(Quota::per_second(1).unwrap(), 10, ManualClock::new());
        let a = rule.limiter("a").unwrap();
        let q = Quota::per_second(5).unwrap().with_burst(5).unwrap();
        rule.set_quota(q);
        assert_eq!((a.quota(), rule.limiter("z").unwrap().quota()), (q, q));
    }
}
