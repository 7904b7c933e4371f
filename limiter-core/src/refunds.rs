//! Refunds: the permits of reservations cancelled out of order.
//!
//! A reservation is a slot in the GCRA schedule: it moved `tat` forward by
//! its permits, and every later reservation was placed after it. When it is
//! cancelled while it is still the last one (the state word still equals
//! what it left), `cancel` simply restores the word. When a later
//! reservation exists, the word cannot move back without moving that later
//! reservation's slot, which its holder is already waiting for. Its permits
//! become a **refund** instead: a hole in the schedule at the cancelled
//! slot, recorded here.
//!
//! Invariants, for every refund in the table:
//!
//! * it belongs to the quota in force (a quota change empties the table,
//!   under the change lock);
//! * its `slot` (limiter time) is an instant at which the schedule admitted
//!   `permits` permits that nobody will use: granting up to `permits`
//!   permits at `slot` to someone else admits exactly what the schedule
//!   already admitted, so it can never exceed the quota in any window;
//! * while it is whole (never partly handed out) it keeps the cancelled
//!   reservation's word transition `before → after`. Reservations only move
//!   the word forward and cancellations restore exact earlier words, so the
//!   word equals `after` again only once every reservation made after it has
//!   been cancelled; restoring `before` then is exactly as if the cancelled
//!   reservation had never been made ([`Refunds::collapse`]).
//!
//! How refunds are used: a reservation that would wait (its fresh slot lies
//! in the future) takes the earliest refund that comes sooner than its fresh
//! slot, fits its permits and lies within its `max_wait`
//! ([`Refunds::take`]), and gives the fresh slot back. A refund whose slot
//! has passed unclaimed is dropped, as an unused slot of an idle limiter is.
//! The table holds at most [`Refunds::CAPACITY`] refunds; past that the
//! earliest is dropped, which only makes the limiter stricter.
//!
//! All of it runs under the [`ChangeLock`](crate::change_lock::ChangeLock);
//! `pending` mirrors the table's length so that a waiting reservation can
//! skip the lock when there is nothing to take.

use alloc::vec::Vec;

use crate::reservation::Undo;

use crate::sync::{AtomicUsize, Ordering};

/// A word transition that cancelling a whole refund would undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WordUndo {
    /// The state word before the cancelled reservation.
    pub(crate) before: u64,
    /// The state word the cancelled reservation left.
    pub(crate) after: u64,
}

/// Permits admitted by the schedule at `slot` that nobody will use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refund {
    /// The state it belongs to: a limiter's or a per-key cell's identity
    /// (one table may serve many cells).
    pub(crate) owner: u64,
    /// Limiter time at which the permits conform.
    pub(crate) slot: u64,
    /// How many permits.
    pub(crate) permits: u32,
    /// The transition to undo while the refund is whole.
    pub(crate) undo: Option<WordUndo>,
}

impl Refund {
    /// How a reservation handed out of this refund is undone: restoring the
    /// word while the refund is whole, or recording it again at its slot.
    /// `changes` is the quota-change count it was taken under.
    pub(crate) fn undo(self, changes: u64) -> Undo {
        match self.undo {
            Some(WordUndo { before, after }) => Undo::Word {
                before,
                after,
                changes,
            },
            None => Undo::Refund {
                slot: self.slot,
                changes,
            },
        }
    }
}

/// The table of refunds. See the module docs.
#[derive(Debug)]
pub(crate) struct Refunds {
    table: Vec<Refund>,
}

/// How many refunds the table holds; read without the lock.
#[derive(Debug, Default)]
pub(crate) struct Pending(AtomicUsize);

impl Pending {
    /// Whether the table may hold a refund. A hint: the table is only read
    /// under the lock.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        // Relaxed: a hint. A refund recorded concurrently and missed here is
        // one that this reservation linearizes before.
        self.0.load(Ordering::Relaxed) != 0
    }
}

impl Refunds {
    /// The most refunds the table keeps (fewer under miri, which interprets
    /// the table's scans a thousand times slower).
    pub(crate) const CAPACITY: usize = if cfg!(miri) { 64 } else { 4096 };

    /// An empty table.
    pub(crate) fn new() -> Refunds {
        Refunds { table: Vec::new() }
    }

    /// Records `refund`, dropping refunds whose slot lies before `now`.
    pub(crate) fn record(&mut self, refund: Refund, now: u64, pending: &Pending) {
        self.expire(now);
        if self.table.len() == Refunds::CAPACITY
            && let Some(i) = self.earliest(|_| true)
        {
            self.table.swap_remove(i);
        }
        self.table.push(refund);
        self.publish(pending);
    }

    /// Takes up to `n` permits of `owner`'s earliest refund whose slot lies
    /// in `[now, now + max_wait]`, strictly before `sooner_than`. A refund
    /// taken whole keeps its undo; a refund taken in part loses it (the word
    /// can no longer be restored), and its rest stays in the table.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn take(
        &mut self,
        owner: u64,
        now: u64,
        n: u32,
        max_wait: u64,
        sooner_than: u64,
        pending: &Pending,
    ) -> Option<Refund> {
        self.expire(now);
        let fits = |r: &Refund| {
            r.owner == owner && r.permits >= n && r.slot < sooner_than && r.slot - now <= max_wait
        };
        let taken = self.earliest(fits).map(|i| {
            let whole = &mut self.table[i];
            if whole.permits == n {
                self.table.swap_remove(i)
            } else {
                whole.permits -= n;
                whole.undo = None;
                Refund {
                    permits: n,
                    undo: None,
                    ..*whole
                }
            }
        });
        self.publish(pending);
        taken
    }

    /// Undoes `owner`'s whole refunds while its word equals one's `after`:
    /// `load` reads the word, `restore(after, before)` swaps it back if it
    /// still equals `after`. Then drops refunds whose slot lies before
    /// `now`.
    pub(crate) fn collapse(
        &mut self,
        owner: u64,
        now: u64,
        pending: &Pending,
        load: impl Fn() -> u64,
        restore: impl Fn(u64, u64) -> bool,
    ) {
        loop {
            let word = load();
            let Some(i) = self
                .table
                .iter()
                .position(|r| r.owner == owner && r.undo.is_some_and(|u| u.after == word))
            else {
                break;
            };
            let undo = self.table[i].undo.expect("found by its undo");
            if !restore(undo.after, undo.before) {
                // An acquisition moved the word on; nothing to collapse now.
                break;
            }
            self.table.swap_remove(i);
        }
        self.expire(now);
        self.publish(pending);
    }

    /// Empties the table (the quota changed).
    pub(crate) fn clear(&mut self, pending: &Pending) {
        self.table.clear();
        self.publish(pending);
    }

    fn expire(&mut self, now: u64) {
        self.table.retain(|r| r.slot >= now);
    }

    fn earliest(&self, keep: impl Fn(&Refund) -> bool) -> Option<usize> {
        self.table
            .iter()
            .enumerate()
            .filter(|(_, r)| keep(r))
            .min_by_key(|(_, r)| r.slot)
            .map(|(i, _)| i)
    }

    fn publish(&self, pending: &Pending) {
        // Relaxed: a hint (see `Pending::any`); the table itself is guarded
        // by the lock.
        pending.0.store(self.table.len(), Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn refund(slot: u64, permits: u32) -> Refund {
        Refund {
            owner: 1,
            slot,
            permits,
            undo: Some(WordUndo {
                before: slot,
                after: slot + 1,
            }),
        }
    }

    #[test]
    fn take_prefers_the_earliest_fitting_refund() {
        let (mut r, p) = (Refunds::new(), Pending::default());
        r.record(refund(300, 1), 0, &p);
        r.record(refund(200, 2), 0, &p);
        assert!(p.any());
        // Sooner than the fresh slot, within the wait, big enough.
        assert_eq!(r.take(1, 0, 3, u64::MAX, u64::MAX, &p), None);
        assert_eq!(r.take(1, 0, 1, 100, u64::MAX, &p), None);
        assert_eq!(r.take(1, 0, 1, u64::MAX, 200, &p), None);
        let part = r
            .take(1, 0, 1, u64::MAX, u64::MAX, &p)
            .expect("part of 200");
        assert_eq!((part.slot, part.permits, part.undo), (200, 1, None));
        let rest = r
            .take(1, 0, 1, u64::MAX, u64::MAX, &p)
            .expect("rest of 200");
        assert_eq!((rest.slot, rest.undo), (200, None));
        let whole = r.take(1, 0, 1, u64::MAX, u64::MAX, &p).expect("300");
        assert_eq!(whole, refund(300, 1));
        assert!(!p.any());
    }

    #[test]
    fn refunds_expire_at_their_slot_and_the_table_is_bounded() {
        let (mut r, p) = (Refunds::new(), Pending::default());
        r.record(refund(10, 1), 0, &p);
        assert_eq!(r.take(1, 11, 1, u64::MAX, u64::MAX, &p), None);
        let capacity = Refunds::CAPACITY as u64;
        for slot in 0..capacity + 5 {
            r.record(refund(100 + slot, 1), 0, &p);
        }
        assert_eq!(r.table.len(), Refunds::CAPACITY);
        // The earliest five were dropped to make room.
        assert!(r.table.iter().all(|x| x.slot >= 105));
    }

    #[test]
    fn collapse_unwinds_a_chain_of_whole_refunds() {
        let (mut r, p) = (Refunds::new(), Pending::default());
        let undo = |before, after| Some(WordUndo { before, after });
        for (slot, before, after) in [(1, 10, 20), (2, 20, 30), (3, 30, 40)] {
            let refund = Refund {
                owner: 1,
                slot,
                permits: 1,
                undo: undo(before, after),
            };
            r.record(refund, 0, &p);
        }
        let word = core::cell::Cell::new(50);
        let restore = |after, before| {
            word.get() == after && {
                word.set(before);
                true
            }
        };
        r.collapse(1, 0, &p, || word.get(), restore);
        assert_eq!(word.get(), 50, "no refund left 50");
        word.set(30); // the reservation that left 40 is gone
        r.collapse(1, 0, &p, || word.get(), restore);
        assert_eq!(word.get(), 10);
        let left = Refund {
            owner: 1,
            slot: 3,
            permits: 1,
            undo: undo(30, 40),
        };
        assert_eq!(r.table, [left]);
        // Another owner's refunds are not this word's.
        word.set(40);
        r.collapse(2, 0, &p, || word.get(), restore);
        assert_eq!(word.get(), 40);
        assert_eq!(r.take(2, 0, 1, u64::MAX, u64::MAX, &p), None);
    }
}
