//! The deny cache: answer "rate limited" locally until the `retry_after`
//! Redis returned, saving the round trips a hot, exhausted key would cost.
//!
//! # Why it is exact for GCRA
//!
//! A denial of `n` permits at Redis' `now` with `retry_after = R` means
//! `max(tat, now) + n·t − (now + tau + t) = R`. Until `now + R`, `tat` can only
//! grow (every grant moves it forward; only [`reset`](crate::RedisLimiter::reset)
//! or expiry at `tat` move it back), so every request for `m ≥ n` permits with
//! a wait allowance below what remains of `R` would be denied by Redis too.
//! The cache answers exactly those, and nothing else.
//!
//! The entry's deadline is `sent + R`, with `sent` the local time read *before*
//! the call: Redis decided no earlier than that, so the cache never outlives
//! the true `now + R` and never denies what Redis would grant. At worst it
//! expires up to one round trip early, and Redis answers.
//!
//! Caveat: a `reset` made through *another* limiter instance does not clear
//! this instance's cache; its entries still expire by their deadlines, and
//! until then deny (never over-admit).
//!
//! Memory: at most 16,384 keys; when full, expired entries are
//! dropped, and a new denial that still does not fit is simply not cached.

use std::collections::HashMap;
use std::sync::Mutex;

/// The most keys the deny cache remembers at once.
pub(crate) const MAX_ENTRIES: usize = 16_384;

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
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, e| e.until > sent);
        }
        if entries.len() < MAX_ENTRIES {
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
