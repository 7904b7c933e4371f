//! The deny cache: per-key denials Redis returned, answered locally until
//! their `retry_after`. Why that is exact for GCRA, and its caveat, is the
//! contract documented on
//! [`RedisLimiterBuilder::deny_cache`](crate::RedisLimiterBuilder::deny_cache);
//! this module keeps the entries.
//!
//! Invariants: an entry's deadline is `sent + retry_after`, with `sent` the
//! local time (ns) read *before* the call, so it never outlives Redis' own
//! `now + retry_after`; an entry covers requests of at least its `n` permits
//! whose wait allowance is below what remains of it. At most
//! [`DenyCache::MAX_KEYS`] keys: when full, lapsed entries are dropped, and a
//! new denial that still does not fit is not cached (the next request asks
//! Redis).

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Local ns from which the cached denial no longer holds.
    until: u64,
    /// The smallest request the denial covers.
    n: u32,
    /// Local ns at which the key was due to be full again.
    reset_at: u64,
}

/// A cached denial, as answered: time left until it lapses, and until reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CachedDenial {
    pub(crate) retry_after: u64,
    pub(crate) reset_after: u64,
}

/// Per-key cached denials.
#[derive(Debug, Default)]
pub(crate) struct DenyCache {
    entries: Mutex<HashMap<String, Entry>>,
}

impl DenyCache {
    /// The most keys the deny cache remembers at once.
    pub(crate) const MAX_KEYS: usize = 16_384;

    /// The cached denial that covers `n` permits on `key` at local `now` with
    /// `max_wait` ns allowed, if there is one.
    pub(crate) fn check(&self, key: &str, n: u32, max_wait: u64, now: u64) -> Option<CachedDenial> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let e = entries.get(key)?;
        let left = e.until.checked_sub(now)?;
        (n >= e.n && left > max_wait).then_some(CachedDenial {
            retry_after: left,
            reset_after: e.reset_at.saturating_sub(now),
        })
    }

    /// Remembers that Redis denied `n` permits on `key` for a call sent at
    /// local `sent`, with `retry_after` and `reset_after` in ns.
    pub(crate) fn record(&self, key: &str, n: u32, sent: u64, retry_after: u64, reset_after: u64) {
        let entry = Entry {
            until: sent.saturating_add(retry_after),
            n,
            reset_at: sent.saturating_add(reset_after),
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = entries.get_mut(key) {
            // Keep whichever covers more: a later deadline wins; at the same
            // deadline the smaller n covers more requests.
            if (entry.until, std::cmp::Reverse(entry.n)) > (old.until, std::cmp::Reverse(old.n)) {
                *old = entry;
            }
            return;
        }
        if entries.len() >= Self::MAX_KEYS {
            entries.retain(|_, e| e.until > sent);
        }
        if entries.len() < Self::MAX_KEYS {
            entries.insert(key.to_owned(), entry);
        }
    }

    /// Forgets `key`.
    pub(crate) fn forget(&self, key: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_larger_requests_until_the_deadline() {
        let c = DenyCache::default();
        c.record("k", 2, 1_000, 500, 900);
        assert_eq!(
            c.check("k", 2, 0, 1_100),
            Some(CachedDenial {
                retry_after: 400,
                reset_after: 800
            })
        );
        assert!(c.check("k", 3, 0, 1_100).is_some());
        assert_eq!(c.check("k", 1, 0, 1_100), None); // a smaller request may fit
        assert_eq!(c.check("k", 2, 400, 1_100), None); // the wait is allowed
        assert_eq!(c.check("k", 2, 0, 1_500), None); // lapsed
        assert_eq!(c.check("other", 2, 0, 1_100), None);
        c.forget("k");
        assert_eq!(c.check("k", 2, 0, 1_100), None);
    }

    #[test]
    fn a_later_deadline_replaces_an_earlier_one() {
        let c = DenyCache::default();
        c.record("k", 1, 0, 100, 100);
        c.record("k", 1, 50, 200, 200);
        assert_eq!(c.check("k", 1, 0, 200).unwrap().retry_after, 50);
        c.record("k", 1, 60, 10, 10); // earlier: ignored
        assert_eq!(c.check("k", 1, 0, 200).unwrap().retry_after, 50);
    }
}
