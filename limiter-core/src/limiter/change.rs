//! The quota in force and hot quota changes: which quota a state word
//! names (generation 0 in the limiter's block, later ones in the change
//! table made on first use), and [`RateLimiter::set_quota`], which keeps
//! the fill level in permits.

use alloc::boxed::Box;

use super::{Changes, RateLimiter};
use crate::change_lock::ChangeLock;
use crate::clock::Clock;
use crate::gcra::{self, Params};
use crate::quota::Quota;
use crate::quota_versions::{
    QuotaRead, QuotaVersions, generation, next_change_generation, pack, tat,
};
#[cfg(feature = "std")]
use crate::refunds::Pending;

impl<C: Clock> RateLimiter<C> {
    /// The quota in force.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// limiter.set_quota(Quota::per_second(20)?);
    /// assert_eq!(limiter.quota(), Quota::per_second(20)?);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.read(self.state.load()).params.into()
    }

    /// Replaces the quota, atomically as a unit, keeping the fill level in
    /// permits.
    ///
    /// Where the limiter owes time (`tat > now`), the debt `tat − now` is
    /// scaled by `t_new / t_old` (rounded up), so a limiter that was half
    /// empty stays half empty in permits; an idle limiter stays full at the
    /// new burst. Reservations already handed out keep their `ready_at`
    /// times, but can no longer be cancelled. No decision ever mixes the old
    /// and new parameters (see `docs/design.md`, "State encoding").
    ///
    /// Refunds of cancelled reservations (see [`cancel`](RateLimiter::cancel))
    /// belong to the old quota and are dropped.
    ///
    /// Quota changes are serialised with each other (and with `cancel`) by a
    /// lock that the acquisition path never touches.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(4)?, ManualClock::new());
    /// limiter.try_acquire_n(2)?; // half empty
    /// limiter.set_quota(Quota::per_second(1)?.with_burst(4)?);
    /// assert_eq!(limiter.available(), 2); // still half empty, in permits
    /// assert_eq!(limiter.try_acquire_n(3).unwrap_err().retry_after(), Some(Duration::from_secs(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) {
        let changes = self.changes();
        #[cfg_attr(not(feature = "std"), allow(unused_mut))]
        let mut guard = changes.lock.lock();
        let now = self.epoch.elapsed(self.clock.now());
        let limit = self.epoch.limit();
        let new = Params::from(quota);
        let current = self.state.load();
        // Only setters change the generation and we hold the lock, so the
        // generation (and hence `old`) is fixed for the whole loop.
        let old = self.read(current).params;
        let next = next_change_generation(generation(current));
        changes.quotas.begin_change(&guard, next, new);
        let installed: Result<(), core::convert::Infallible> = self.state.update(|word| {
            let moved = moved_tat(tat(word), now, old, new, limit);
            Ok((pack(next, moved), ()))
        });
        let Ok(()) = installed;
        #[cfg(feature = "std")]
        guard.refunds().clear(&changes.pending);
        drop(guard);
    }

    /// The quota the state word `word` names, as a decision reads it: the
    /// limiter's own for generation 0, else its entry of the change table.
    #[inline]
    pub(super) fn read(&self, word: u64) -> QuotaRead {
        if generation(word) == 0 {
            return QuotaRead::first(self.first);
        }
        // A word past generation 0 was installed by a quota change, after
        // the table was made (and published by the word's release CAS).
        let Some(changes) = self.changes.get() else {
            unreachable!("a changed quota without a change table")
        };
        changes.quotas.read(word)
    }

    /// Whether the quota `read` came from is still the one it read
    /// (`quota_versions`, rule 2). Generation 0 is never rewritten.
    #[inline]
    pub(super) fn unchanged_since(&self, read: QuotaRead) -> bool {
        read.generation() == 0
            || self
                .changes
                .get()
                .is_some_and(|changes| changes.quotas.unchanged_since(read))
    }

    /// How many quota changes have begun (0 before the first).
    #[inline]
    pub(super) fn changes_made(&self) -> u64 {
        self.changes
            .get()
            .map_or(0, |changes| changes.quotas.changes())
    }

    /// Whether the refund table may hold refunds (a hint, read without the
    /// lock).
    #[cfg(feature = "std")]
    #[inline]
    pub(super) fn refunds_pending(&self) -> bool {
        self.changes
            .get()
            .is_some_and(|changes| changes.pending.any())
    }

    /// The change table, made on first use. Threads that race to make it
    /// all use the one that was published first.
    pub(super) fn changes(&self) -> &Changes {
        self.changes.get_or_init(|| {
            Box::new(Changes {
                quotas: QuotaVersions::new(self.first.into()),
                lock: ChangeLock::new(),
                #[cfg(feature = "std")]
                pending: Pending::default(),
            })
        })
    }
}

/// The `tat` a quota change installs: the fill level kept in permits
/// ([`gcra::rescale`]), an idle `tat` moved up to `now` (indistinguishable
/// from now on, and stricter for a clock that steps back). Past the limit
/// nothing moves, so a clock back in range finds the limiter as it was.
pub(crate) fn moved_tat(tat: u64, now: u64, old: Params, new: Params, limit: u64) -> u64 {
    if tat < now && now <= limit {
        now
    } else {
        gcra::rescale(tat, now, old, new, limit)
    }
}
