//! Reading, retiring and moving a [`GcraCell`]: what a keyed map does to a
//! key besides deciding (report it, remove it when idle, change its quota).

use super::{GcraCell, QuotaOf};
use crate::follow::LOCKED;
use crate::gcra::{self, Params};
use crate::identity::Owner;
use crate::quota::{MAX_SPAN, Quota};
use crate::sync::{AtomicU64, Ordering};

impl GcraCell {
    /// How many permits a try could take at `now` under `quota`: exactly the
    /// largest `n` that [`try_acquire_n`](GcraCell::try_acquire_n) would
    /// grant, including near [`MAX_SPAN`] (0 if retired).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// let quota = quota.with_burst(3)?;
    /// cell.try_acquire_n(quota, 0, 3).unwrap()?;
    /// assert_eq!(cell.available(quota, 0), 0);
    /// assert_eq!(cell.available(quota, 200_000_000), 2);
    /// cell.retire();
    /// assert_eq!(cell.available(quota, 200_000_000), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A cell that follows a shared quota is moved to it first, if it has
    /// not been yet (see [`SharedQuota`](super::SharedQuota)).
    pub fn available<'a>(&self, quota: impl Into<QuotaOf<'a>>, now: u64) -> u32 {
        let quota = quota.into();
        loop {
            let tat = self.settled();
            if tat == Self::RETIRED {
                return 0;
            }
            if let Ok((params, _)) = quota.prepare(&self.word, tat) {
                return gcra::available(tat, now, params, MAX_SPAN);
            }
        }
    }

    /// The word, once no move is in progress (a move is a few stores).
    #[inline]
    pub(super) fn settled(&self) -> u64 {
        loop {
            // Acquire: as in the decision, the word may publish the record.
            let word = self.word.load(Ordering::Acquire);
            if word != LOCKED {
                return word;
            }
            crate::sync::spin_hint();
        }
    }

    /// What [`available`](GcraCell::available) says of a new cell at `now`:
    /// the burst, but near [`MAX_SPAN`] only what fits before it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// use limiter_core::clock::MAX_SPAN;
    /// let quota = quota.with_burst(3)?;
    /// assert_eq!(GcraCell::available_when_new(quota, 0), 3);
    /// assert_eq!(GcraCell::available_when_new(quota, MAX_SPAN - 100_000_000), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available_when_new(quota: Quota, now: u64) -> u32 {
        gcra::available(0, now, Params::from(quota), MAX_SPAN)
    }

    /// The theoretical arrival time, or `None` if retired.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// cell.try_acquire_n(quota, 0, 1).unwrap()?;
    /// assert_eq!(cell.tat(), Some(100_000_000));
    /// cell.retire();
    /// assert_eq!(cell.tat(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tat(&self) -> Option<u64> {
        match self.settled() {
            Self::RETIRED => None,
            tat => Some(tat),
        }
    }

    /// Retires the cell if it is idle at `now`, atomically with that check:
    /// a decision that changed the cell first makes this fail. Returns
    /// whether this call retired it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// cell.try_acquire_n(quota, 0, 1).unwrap()?;
    /// assert!(!cell.retire_if_idle(50_000_000)); // still in debt: kept
    /// assert!(cell.retire_if_idle(100_000_000));
    /// assert!(!cell.retire_if_idle(100_000_000)); // already retired
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retire_if_idle(&self, now: u64) -> bool {
        // A moving cell (LOCKED) is above every `now`: not idle.
        // Relaxed: the word alone decides; nothing else is read.
        let tat = self.word.load(Ordering::Relaxed);
        tat != Self::RETIRED
            && tat <= now
            && self
                .word
                .compare_exchange(tat, Self::RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Retires the cell whatever its state, forgetting any debt. Returns
    /// whether this call retired it (false if it already was).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let quota = Quota::per_second(10)?; // t = 100 ms
    /// let cell = GcraCell::new();
    /// cell.try_acquire_n(quota, 0, 1).unwrap()?;
    /// assert!(cell.retire()); // debt and all
    /// assert!(!cell.retire());
    /// assert_eq!(cell.tat(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retire(&self) -> bool {
        // Not over a move in progress, whose last store would bring the
        // cell back: wait for it to settle, then CAS.
        loop {
            let word = self.settled();
            if word == Self::RETIRED {
                return false;
            }
            // Relaxed: the word alone decides; nothing else is read.
            if self
                .word
                .compare_exchange(word, Self::RETIRED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// Whether the cell is full again at `now` (`tat ≤ now`), for the unit
    /// tests.
    #[cfg(all(test, not(loom)))]
    pub(super) fn is_idle(&self, now: u64) -> bool {
        let tat = self.settled();
        tat != Self::RETIRED && tat <= now
    }
}

impl GcraCell {
    /// Retires the cell (as [`retire`](GcraCell::retire)) and returns a new
    /// cell, of a new identity, owing under `to` the permits this one owed
    /// under `from` at `now`: the rescale of
    /// [`RateLimiter::set_quota`](crate::RateLimiter::set_quota) (a debt
    /// scaled by `t_new / t_old`, rounded up; a full cell stays full).
    /// `None` if the cell was already retired (its subject is being
    /// removed; a new cell starts full).
    ///
    /// `from` is read after the retiring CAS, so it is the quota the
    /// retired `tat` is expressed in: for a record following a shared
    /// quota, the record's (a change of the shared quota the cell had not
    /// yet moved to is skipped: the cell goes straight from its record to
    /// `to`, as a cell more than 15 changes behind does). This is how a
    /// keyed limiter changes one key's quota live: the map swaps the key's
    /// entry for the returned cell under the bucket lock, and every decision
    /// that read the old cell fails its CAS on `RETIRED` and looks again.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{cell::GcraCell, Quota};
    ///
    /// let (old, new) = (Quota::per_second(10)?.with_burst(4)?, Quota::per_second(1)?.with_burst(4)?);
    /// let cell = GcraCell::new();
    /// cell.try_acquire_n(old, 0, 3).unwrap()?; // 3 permits owed
    /// let moved = cell.retire_into(old, new, 0).unwrap();
    /// assert_eq!(cell.tat(), None); // retired
    /// assert_eq!(moved.available(new, 0), 1); // still 3 owed
    /// assert!(cell.retire_into(old, new, 0).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retire_into<'a>(
        &self,
        from: impl Into<QuotaOf<'a>>,
        to: Quota,
        now: u64,
    ) -> Option<GcraCell> {
        let tat = loop {
            let word = self.settled();
            if word == Self::RETIRED {
                return None;
            }
            // Acquire: the record a mover published before this word (its
            // release store) is read below as the quota `word` is in.
            if self
                .word
                .compare_exchange(word, Self::RETIRED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                break word;
            }
        };
        let old = from.into().params_now();
        let moved = crate::limiter::moved_tat(tat, now, old, Params::from(to), MAX_SPAN);
        Some(GcraCell {
            word: AtomicU64::new(moved),
            owner: Owner::new(),
        })
    }
}
