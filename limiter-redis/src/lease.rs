//! Leases: take up to `L` permits from Redis in one call and spend them
//! locally, one round trip per `L` permits instead of one per permit.
//!
//! # The trade-off
//!
//! Leased permits are *consumed in Redis* when leased, so the cluster never
//! admits more than the quota: every permit spent locally was granted by the
//! script first. What leases cost is accuracy the other way:
//!
//! * **stranded permits**: a lease that is not spent before it expires (or a
//!   request for more permits than the lease holds, which drops the remainder
//!   and asks Redis afresh) is lost; other clients were denied them;
//! * **shifted admissions**: a permit leased at `s` may be spent up to the
//!   lease's `ttl` later, so in a window the admissions can include up to `L`
//!   permits earned before it. Over any interval from the key's start, the
//!   total never exceeds `burst + elapsed / t`.
//!
//! Use leases for hot keys on few instances, with `L` well under the burst
//! and a `ttl` of about `L · t`; do not use them when many instances share a
//! key at a rate near its quota.

use std::collections::HashMap;
use std::sync::Mutex;

/// The most keys that hold a lease at once; when full, expired leases are
/// dropped, and a lease that still does not fit is not kept (its permits are
/// stranded, never over-spent).
pub(crate) const MAX_KEYS: usize = 16_384;

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
    /// until `expires`.
    pub(crate) fn store(&self, key: &str, permits: u32, now: u64, expires: u64) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if permits == 0 {
            held.remove(key);
            return;
        }
        if held.len() >= MAX_KEYS && !held.contains_key(key) {
            held.retain(|_, h| h.expires > now);
        }
        if held.len() < MAX_KEYS || held.contains_key(key) {
            // Whatever was held before is stranded (spend() found it short).
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
}
