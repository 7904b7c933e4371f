//! Deciding for one key: take, reserve, cancel and read its permits, on
//! the cell the key table finds or inserts.

use core::hash::Hash;
use core::time::Duration;

use limiter_core::{Clock, Headroom, Policy, Reservation, cell::CellClock, cell::GcraCell};

use super::KeyedLimiter;
use crate::error::KeyedError;

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Takes one permit for `key` now.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](KeyedLimiter::try_acquire_n).
    #[inline]
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// use limiter_keyed::KeyedError;
    /// use limiter_core::AcquireError;
    /// limiter.try_acquire(&"alice")?;
    /// let wait = Duration::from_millis(100);
    /// assert_eq!(
    ///     limiter.try_acquire(&"alice"),
    ///     Err(KeyedError::Limited(AcquireError::RateLimited { wait }))
    /// );
    /// clock.advance(wait);
    /// limiter.try_acquire(&"alice")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self, key: &K) -> Result<(), KeyedError> {
        self.try_acquire_n(key, 1)
    }

    /// Takes `n` permits for `key` now, all or nothing.
    ///
    /// # Errors
    ///
    /// [`KeyedError::Limited`] with the core's error (the exact wait when
    /// rate limited); [`KeyedError::TooManyKeys`] for a new key when full.
    #[inline]
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(3)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire_n(&"alice", 2)?;
    /// assert!(limiter.try_acquire_n(&"alice", 2).is_err()); // all or nothing
    /// assert_eq!(limiter.available(&"alice"), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_n(&self, key: &K, n: u32) -> Result<(), KeyedError> {
        self.decide(key, |e| {
            e.cell
                .reserve_n_on(self.cell_clock(), self.quota_of_entry(e), n, Duration::ZERO)
                .map(|r| r.map(|_| ()))
        })
    }

    /// Claims the earliest slot for `n` permits for `key` if it comes within
    /// `max_wait`; consumes nothing otherwise. Slots of one key are handed
    /// out first come, first served.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_n`](KeyedLimiter::try_acquire_n), with the wait
    /// compared to `max_wait`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// limiter.try_acquire(&"alice")?;
    /// assert!(limiter.reserve_n(&"alice", 1, Duration::from_millis(50)).is_err());
    /// let r = limiter.reserve_n(&"alice", 1, Duration::from_millis(100))?;
    /// assert_eq!(r.wait(), Duration::from_millis(100));
    /// assert_eq!(r.ready_at(), 100_000_000); // a reading of the limiter's clock
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<Reservation, KeyedError> {
        self.decide(key, |e| {
            e.cell.reserve_n_with_refunds(
                &self.refunds,
                self.cell_clock(),
                self.quota_of_entry(e),
                n,
                max_wait,
            )
        })
    }

    /// As [`reserve_n`](KeyedLimiter::reserve_n), with the [`Headroom`] the
    /// decision left for `key`: the permits a caller right after it would
    /// get at once, and the time until one more, computed from the state
    /// this decision wrote (see [`GcraCell::headroom_of`]).
    ///
    /// # Errors
    ///
    /// As [`reserve_n`](KeyedLimiter::reserve_n).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{Headroom, ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?.with_burst(5)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// let (_, left) = limiter.reserve_n_with_headroom(&"alice", 2, Duration::ZERO)?;
    /// assert_eq!(left, Headroom { remaining: 3, refill_in: Duration::from_millis(100) });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n_with_headroom(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, Headroom), KeyedError> {
        self.decide_with_policy(key, n, max_wait)
            .map(|(reservation, headroom, _)| (reservation, headroom))
            .map_err(|(error, _)| error)
    }

    /// [`reserve_n_with_headroom`](KeyedLimiter::reserve_n_with_headroom)
    /// with the [`Policy`] the key's entry was decided under, on a grant and
    /// on a refusal alike (read from the entry the decision ran on: no
    /// second lookup of the key).
    #[inline]
    pub(crate) fn decide_with_policy(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<(Reservation, Headroom, Policy), (KeyedError, Policy)> {
        let decided_under = core::cell::Cell::new(None);
        let result = self.decide(key, |e| {
            let decided = e.cell.reserve_n_with_refunds(
                &self.refunds,
                self.cell_clock(),
                self.quota_of_entry(e),
                n,
                max_wait,
            )?;
            let policy = Policy::from(e.quota.quota());
            decided_under.set(Some(policy));
            Some(decided.map(|r| {
                // The cell made `r`, so this is always `Some`.
                let left = e
                    .cell
                    .headroom_of(&r, self.quota_of_entry(e), self.origin)
                    .unwrap_or(Headroom {
                        remaining: 0,
                        refill_in: r.wait(),
                    });
                (r, left, policy)
            }))
        });
        // No entry decided (a full key table): the quota a new key would get.
        result.map_err(|e| {
            (
                e,
                decided_under
                    .get()
                    .unwrap_or_else(|| self.quota_of(key).into()),
            )
        })
    }

    /// Gives back the permits of a reservation made for `key`, whether or
    /// not later reservations of the key depend on them; returns whether
    /// they are back. When nothing depends on them the key's state is
    /// restored; otherwise the slot is handed to the key's next reservation
    /// that would wait longer (see [`GcraCell::cancel_with_refunds`]). A
    /// slot already passed is not refunded. A reservation made on a state
    /// the key no longer has (it was evicted or idle and removed, and came
    /// back) is refused: each state has its own identity.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire(&"alice")?;
    /// let first = limiter.reserve_n(&"alice", 1, Duration::MAX)?; // 100 ms
    /// let _second = limiter.reserve_n(&"alice", 1, Duration::MAX)?; // 200 ms
    /// assert!(limiter.cancel(&"alice", first));
    /// // The next waiter gets the refunded slot.
    /// assert_eq!(limiter.reserve_n(&"alice", 1, Duration::MAX)?.wait(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self, key: &K, reservation: Reservation) -> bool {
        self.map
            .peek_with(key, |_, e| {
                e.cell.cancel_with_refunds(
                    &self.refunds,
                    reservation,
                    self.cell_clock(),
                    self.quota_of_entry(e),
                )
            })
            .unwrap_or(false)
    }

    /// How many permits `key` could take now: exactly the largest `n` that
    /// [`try_acquire_n`](KeyedLimiter::try_acquire_n) would grant (for a key
    /// the limiter does not track, what a new state would grant: its whole
    /// burst, but near the end of the time range).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::KeyedLimiter;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert_eq!(limiter.available(&"alice"), 1); // untracked: a whole burst
    /// limiter.try_acquire(&"alice")?;
    /// assert_eq!(limiter.available(&"alice"), 0);
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(limiter.available(&"alice"), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available(&self, key: &K) -> u32 {
        let now = self.now();
        self.map
            .peek_with(key, |_, e| {
                e.cell
                    .tat()
                    .map(|_| e.cell.available(self.quota_of_entry(e), now))
            })
            .flatten()
            .unwrap_or_else(|| GcraCell::available_when_new(self.quota_of(key), now))
    }

    /// Nanoseconds since the limiter was made (0 for a clock reading before
    /// that: the strict choice, time never runs ahead).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.cell_clock().now()
    }

    /// The clock every cell decides on: the limiter's, counted from its
    /// construction. A cell reads it at its decision, and again after a CAS
    /// lost to another decision.
    #[inline]
    pub(crate) fn cell_clock(&self) -> CellClock<'_, C> {
        CellClock {
            clock: &self.clock,
            origin: self.origin,
        }
    }
}
