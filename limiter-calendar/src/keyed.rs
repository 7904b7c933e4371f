//! [`KeyedCalendar`]: one calendar count per key (per tenant, per API key)
//! under one [`CalendarQuota`], in a table of at most `max_keys` keys.
//!
//! # The paths
//!
//! * **Existing key**: `scc::HashIndex::peek_with` (lock-free: an
//!   epoch-protected lookup that writes no shared word), then the CAS loop
//!   of [`CalendarLimiter`](crate::CalendarLimiter) on the key's word
//!   (`[start | used]`, see `decide`). No allocation, no lock.
//! * **New key**: claim room in the key count (a CAS that refuses past
//!   `max_keys`), decide on a fresh word while it is private, insert it; a
//!   key inserted first by another thread gives the room back and is
//!   decided on that thread's word. A first decision that refuses keeps
//!   nothing.
//!
//! # Memory: which keys may go, and a full table
//!
//! Every key shares the quota's periods, so a key whose word counts an
//! earlier period than the current one carries nothing (it would grant the
//! whole limit, like a key never seen): at each reset every key becomes
//! such a key. A table that is full takes one sweep per period (claimed by
//! one CAS on the period's start): it retires each stale word with a CAS
//! (which fails, keeping the key, if a decision moved the word meanwhile)
//! and removes it. After that sweep every key left has counted in this
//! period, so nothing can go before the reset; a new key is then refused
//! ([`KeyedCalendarError::TooManyKeys`], with the time until the reset) in
//! `O(1)`.
//!
//! Refusing is deliberate: a calendar quota is an accounting quota, and
//! forgetting a key that has counted this period (evicting it) would hand
//! it its whole allowance again, so a client who floods new keys could
//! reset every tenant's quota. Size `max_keys` for the number of distinct
//! keys one period sees.
//!
//! # Invariants
//!
//! * The key count never exceeds `max_keys`: a key is inserted only after
//!   a successful claim of room, and room is freed only by the call that
//!   removed its key.
//! * No grant is made on a word that has left the table: the sweeper
//!   retires a word (CAS to `RETIRED`) before removing it, a decision that
//!   meets `RETIRED` looks the key up again, and a CAS on a word the
//!   sweeper retired fails.

use core::hash::Hash;
use core::time::Duration;
use std::fmt;

use limiter_core::{AcquireError, Clock};
use scc::HashIndex;

use crate::clock::UnixClock;
use crate::decide::{self, pack, start};
use crate::limiter::{
    CalendarGrant, RETIRED, acquire_on, grant_of, refusal_of, until, window_cached,
};
use crate::period::{CalendarError, CalendarQuota, Window};
use crate::sync::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Why a key's request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedCalendarError {
    /// The key's decision: its period is spent (`RateLimited` with the
    /// exact wait until the reset), more than the limit was asked for, or
    /// the clock is out of range.
    Acquire(AcquireError),
    /// The table holds `max_keys` keys that have all counted in this
    /// period: a new key can be counted only after the reset, in
    /// `retry_after`.
    TooManyKeys {
        /// The cap.
        max_keys: usize,
        /// The time until the period resets and every key's count with it.
        retry_after: Duration,
    },
}

impl KeyedCalendarError {
    /// When to try again: the reset for a spent period or a full table;
    /// `None` for a request that can never succeed.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            KeyedCalendarError::Acquire(AcquireError::RateLimited { wait }) => Some(*wait),
            KeyedCalendarError::Acquire(_) => None,
            KeyedCalendarError::TooManyKeys { retry_after, .. } => Some(*retry_after),
        }
    }
}

impl fmt::Display for KeyedCalendarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyedCalendarError::Acquire(e) => write!(f, "{e}"),
            KeyedCalendarError::TooManyKeys {
                max_keys,
                retry_after,
            } => write!(
                f,
                "the calendar quota counts {max_keys} keys this period already; a new key is counted after the reset in {retry_after:?} (raise `max_keys` to count more)"
            ),
        }
    }
}

impl std::error::Error for KeyedCalendarError {}

impl From<AcquireError> for KeyedCalendarError {
    fn from(e: AcquireError) -> KeyedCalendarError {
        KeyedCalendarError::Acquire(e)
    }
}

/// A calendar quota per key, in a table of at most `max_keys` keys (see the
/// module documentation for what a full table does).
///
/// # Memory ordering
///
/// Each key's count is one word moved by CAS, as in
/// [`CalendarLimiter`](crate::CalendarLimiter): grants on a key are
/// linearizable and never exceed the limit in a period; keys are
/// independent. Lookups are lock-free (`scc::HashIndex`), insertions and
/// removals lock one bucket.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_calendar::{CalendarQuota, KeyedCalendar, KeyedCalendarError, Period};
/// use limiter_core::{AcquireError, ManualClock};
///
/// // 2 per day per key, at most 2 keys; the clock at 2024-02-29T23:00:00Z.
/// let clock = ManualClock::starting_at(1_709_247_600 * 1_000_000_000);
/// let quota = CalendarQuota::new(2, Period::Day)?;
/// let table = KeyedCalendar::with_clock(quota, 2, clock.clone());
/// assert_eq!(table.acquire_n(&"alice", 2)?.headroom.remaining, 0);
/// let hour = Duration::from_secs(3600);
/// assert_eq!(
///     table.acquire_n(&"alice", 1),
///     Err(KeyedCalendarError::Acquire(AcquireError::RateLimited { wait: hour }))
/// );
/// assert!(table.acquire_n(&"bob", 1).is_ok());
/// // Full, and both keys counted today: carol waits for midnight.
/// assert_eq!(
///     table.acquire_n(&"carol", 1),
///     Err(KeyedCalendarError::TooManyKeys { max_keys: 2, retry_after: hour })
/// );
/// clock.advance(hour); // 1 March: yesterday's keys carry nothing
/// assert_eq!(table.acquire_n(&"carol", 1)?.headroom.remaining, 1);
/// assert_eq!(table.available(&"alice"), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedCalendar<K: 'static, C: Clock = UnixClock> {
    quota: CalendarQuota,
    map: HashIndex<K, Box<AtomicU64>>,
    /// `[start | end]` of the last window computed (see `window_cached`).
    window: AtomicU64,
    limit: AtomicU32,
    /// Keys counted (each claimed room); at most `max_keys`.
    count: AtomicUsize,
    max_keys: usize,
    /// The start of the period whose sweep has been claimed (0: none).
    swept: AtomicU32,
    /// New keys refused because the table was full.
    refused: AtomicU64,
    clock: C,
}

impl<K, C: Clock> fmt::Debug for KeyedCalendar<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Relaxed: a statistic.
        let len = self.count.load(Ordering::Relaxed);
        f.debug_struct("KeyedCalendar")
            .field("quota", &self.quota)
            .field("len", &len)
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone + 'static> KeyedCalendar<K, UnixClock> {
    /// A table for `quota` of at most `max_keys` keys, on the wall clock.
    pub fn new(quota: CalendarQuota, max_keys: usize) -> KeyedCalendar<K, UnixClock> {
        KeyedCalendar::with_clock(quota, max_keys, UnixClock)
    }
}

impl<K: Hash + Eq + Clone + 'static, C: Clock> KeyedCalendar<K, C> {
    /// A table for `quota` of at most `max_keys` keys, on `clock` (Unix
    /// nanoseconds).
    pub fn with_clock(quota: CalendarQuota, max_keys: usize, clock: C) -> KeyedCalendar<K, C> {
        KeyedCalendar {
            limit: AtomicU32::new(quota.limit()),
            quota,
            map: HashIndex::new(),
            window: AtomicU64::new(0),
            count: AtomicUsize::new(0),
            max_keys,
            swept: AtomicU32::new(0),
            refused: AtomicU64::new(0),
            clock,
        }
    }

    /// The quota (its limit as built; [`limit`](KeyedCalendar::limit) is
    /// the one in force).
    pub fn quota(&self) -> &CalendarQuota {
        &self.quota
    }

    /// The limit in force, for every key.
    pub fn limit(&self) -> u32 {
        // Relaxed: a single value, nothing published with it.
        self.limit.load(Ordering::Relaxed)
    }

    /// Changes every key's limit live, keeping each key's count of the
    /// current period.
    ///
    /// # Errors
    ///
    /// [`CalendarError::ZeroLimit`] for 0.
    pub fn set_limit(&self, limit: u32) -> Result<(), CalendarError> {
        if limit == 0 {
            return Err(CalendarError::ZeroLimit);
        }
        // Relaxed: a single value, nothing published with it.
        self.limit.store(limit, Ordering::Relaxed);
        Ok(())
    }

    /// The most keys held.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Keys held now (including keys of an earlier period not yet swept).
    pub fn len(&self) -> usize {
        // Relaxed: a statistic.
        self.count.load(Ordering::Relaxed)
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// New keys refused so far because the table was full.
    pub fn new_keys_refused(&self) -> u64 {
        // Relaxed: a statistic.
        self.refused.load(Ordering::Relaxed)
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The current period.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimeOutOfRange`] for a clock outside 1970 to 2106.
    pub fn window(&self) -> Result<Window, AcquireError> {
        window_cached(&self.window, &self.quota, self.clock.now())
    }

    /// Permits `key` has left in the current period (the whole limit for a
    /// key not held; 0 when the clock is out of range). Writes nothing.
    pub fn available(&self, key: &K) -> u32 {
        let Ok(window) = self.window() else {
            return 0;
        };
        let limit = self.limit();
        self.map
            .peek_with(key, |_, word| {
                // Relaxed: a snapshot of one word.
                let word = word.load(Ordering::Relaxed);
                if word == RETIRED {
                    limit
                } else {
                    decide::remaining(word, window.start, limit)
                }
            })
            .unwrap_or(limit)
    }

    /// Takes `n` permits of `key`'s current period, all or nothing, and says
    /// what is left and when the period resets.
    ///
    /// # Errors
    ///
    /// [`KeyedCalendarError::Acquire`] as
    /// [`CalendarLimiter::acquire_n`](crate::CalendarLimiter::acquire_n);
    /// [`KeyedCalendarError::TooManyKeys`] for a new key when the table is
    /// full of keys that counted in this period.
    pub fn acquire_n(&self, key: &K, n: u32) -> Result<CalendarGrant, KeyedCalendarError> {
        let now = self.clock.now();
        let window = window_cached(&self.window, &self.quota, now)?;
        let limit = self.limit();
        loop {
            let found = self
                .map
                .peek_with(key, |_, word| acquire_on(word, window.start, n, limit));
            match found {
                Some(Ok(Some(word))) => {
                    return Ok(grant_of(&self.quota, word, window, limit, now)?);
                }
                Some(Err(refusal)) => {
                    return Err(refusal_of(&self.quota, refusal, window, n, limit, now).into());
                }
                // Retired by the sweeper, which is removing it: help, then
                // look again.
                Some(Ok(None)) => self.remove_retired(key),
                None => {
                    // A first decision on a fresh word, while it is private.
                    let word = match decide::decide(pack(0, 0), window.start, n, limit) {
                        Ok(word) => word,
                        Err(refusal) => {
                            return Err(
                                refusal_of(&self.quota, refusal, window, n, limit, now).into()
                            );
                        }
                    };
                    if n == 0 {
                        // Nothing to count: keep nothing.
                        return Ok(grant_of(&self.quota, word, window, limit, now)?);
                    }
                    if !self.claim_room(window) {
                        // Relaxed: a statistic.
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        return Err(KeyedCalendarError::TooManyKeys {
                            max_keys: self.max_keys,
                            retry_after: until(window.end, now),
                        });
                    }
                    if self
                        .map
                        .insert_sync(key.clone(), Box::new(AtomicU64::new(word)))
                        .is_ok()
                    {
                        return Ok(grant_of(&self.quota, word, window, limit, now)?);
                    }
                    // Inserted by another thread first: give the room back
                    // and decide on its word.
                    self.release_room();
                }
            }
        }
    }

    /// Claims room for a new key, sweeping a full table once per period.
    fn claim_room(&self, window: Window) -> bool {
        let claim = || {
            // Relaxed: the count is a bound checked by this CAS alone;
            // nothing is published with it.
            self.count
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                    (c < self.max_keys).then_some(c + 1)
                })
                .is_ok()
        };
        if claim() {
            return true;
        }
        // Relaxed: the sweep is claimed by the CAS; its effects are the
        // table's (bucket locks order them).
        let swept = self.swept.load(Ordering::Relaxed);
        if swept >= window.start
            || self
                .swept
                .compare_exchange(swept, window.start, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            // Swept in this period already (or another thread sweeps now):
            // every key left has counted in this period.
            return false;
        }
        self.sweep(window.start);
        claim()
    }

    fn release_room(&self) {
        // Relaxed: see `claim_room`.
        self.count.fetch_sub(1, Ordering::Relaxed);
    }

    /// Retires and removes every key whose word counts a period before the
    /// one starting at `current_start`.
    fn sweep(&self, current_start: u32) {
        let mut removed = 0;
        self.map.retain_sync(|_, word| {
            // Relaxed: the CAS below decides; a decision that moved the word
            // since this load makes it fail, and the key stays.
            let w = word.load(Ordering::Relaxed);
            let retire = w == RETIRED
                || (start(w) < current_start
                    && word
                        .compare_exchange(w, RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok());
            removed += usize::from(retire);
            !retire
        });
        // Relaxed: see `claim_room`.
        self.count.fetch_sub(removed, Ordering::Relaxed);
    }

    fn remove_retired(&self, key: &K) {
        // Relaxed: RETIRED is final; the bucket lock orders the removal.
        if self
            .map
            .remove_if_sync(key, |w| w.load(Ordering::Relaxed) == RETIRED)
        {
            self.release_room();
        }
    }
}
