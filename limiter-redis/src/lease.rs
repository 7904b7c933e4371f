//! Leases: permits Redis granted beyond a request, held per key and spent
//! locally until they expire. The trade-off (stranded permits, shifted
//! admissions, never more than the quota) is the contract documented on
//! [`RedisLimiterBuilder::lease`](crate::RedisLimiterBuilder::lease); this
//! module keeps the permits.
//!
//! Invariants: a key holds at most one lease; a lease stored while another
//! is live adds to it and keeps the earlier expiry (no permit is spent later
//! than `ttl` after it was leased); a lease that cannot cover a request, or
//! has expired, is dropped (its permits stranded, never re-spent); at most [`Leases::MAX_KEYS`] keys hold one: when full, expired
//! leases are dropped, and a lease that still does not fit is not kept.

use std::collections::HashMap;
use std::sync::Mutex;

/// Permits held locally for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    permits: u32,
    /// Local ns after which the permits are dropped.
    expires: u64,
}

/// Per-key leased permits.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    held: Mutex<HashMap<String, Held>>,
}

impl Leases {
    /// The most keys that hold a lease at once; when full, expired leases
    /// are dropped, and a lease that still does not fit is not kept (its
    /// permits are stranded, never over-spent).
    pub(crate) const MAX_KEYS: usize = 16_384;

    /// Spends `n` leased permits on `key` at local `now`; returns the permits
    /// left, or `None` (dropping an expired or too-small lease) if the lease
    /// cannot cover `n`.
    pub(crate) fn spend(&self, key: &str, n: u32, now: u64) -> Option<u32> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let h = held.get_mut(key)?;
        if now >= h.expires || h.permits < n {
            held.remove(key);
            return None;
        }
        h.permits -= n;
        let left = h.permits;
        if left == 0 {
            held.remove(key);
        }
        Some(left)
    }

    /// Stores `permits` granted beyond the request at local `now`, valid
    /// until `expires`; added to a live lease of the key (with the earlier
    /// expiry of the two).
    pub(crate) fn store(&self, key: &str, permits: u32, now: u64, expires: u64) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if permits == 0 {
            // Nothing extra was granted: a live lease another call stored
            // meanwhile stays (removing it stranded it).
            return;
        }
        if let Some(h) = held.get_mut(key)
            && h.expires > now
        {
            // Another call stored a lease meanwhile (concurrent misses):
            // keep both, until the earlier expiry, so no permit outlives its
            // own lease (replacing it stranded about 3 in 4 permits with 64
            // tasks on one key; see docs/distributed.md).
            h.permits = h.permits.saturating_add(permits);
            h.expires = h.expires.min(expires);
            return;
        }
        if held.len() >= Self::MAX_KEYS && !held.contains_key(key) {
            held.retain(|_, h| h.expires > now);
        }
        if held.len() < Self::MAX_KEYS || held.contains_key(key) {
            // An expired lease held before is stranded.
            held.insert(key.to_owned(), Held { permits, expires });
        }
    }

    /// Drops `key`'s lease.
    pub(crate) fn forget(&self, key: &str) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spends_until_empty_short_or_expired() {
        let l = Leases::default();
        assert_eq!(l.spend("k", 1, 0), None);
        l.store("k", 3, 0, 100);
        assert_eq!(l.spend("k", 2, 10), Some(1));
        assert_eq!(l.spend("k", 2, 10), None); // short: dropped
        assert_eq!(l.spend("k", 1, 10), None);
        l.store("k", 3, 0, 100);
        assert_eq!(l.spend("k", 1, 100), None); // expired
        l.store("k", 1, 0, 100);
        assert_eq!(l.spend("k", 1, 0), Some(0));
        assert_eq!(l.spend("k", 1, 0), None);
    }

    #[test]
    fn a_lease_stored_meanwhile_adds_and_keeps_the_earlier_expiry() {
        let l = Leases::default();
        l.store("k", 3, 0, 100);
        l.store("k", 2, 10, 110); // a concurrent miss
        assert_eq!(l.spend("k", 4, 20), Some(1));
        assert_eq!(l.spend("k", 1, 100), None); // the earlier expiry holds
        l.store("k", 2, 100, 200);
        l.store("k", 1, 200, 300); // the first had expired: replaced
        assert_eq!(l.spend("k", 2, 200), None);
        l.store("k", 2, 300, 400);
        l.store("k", 0, 310, 410); // a concurrent call that got no extra
        assert_eq!(l.spend("k", 2, 320), Some(0));
    }
}
