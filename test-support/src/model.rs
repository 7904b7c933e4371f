//! A plain sequential GCRA reference model, written from the specification
//! for clarity, not speed: `u128` arithmetic (nothing can overflow), no
//! atomics, no bit packing, no generations.
//!
//! It is the oracle of the differential property suite
//! (`limiter-core/tests/differential.rs`) and of the loom linearizability
//! checks (`loom-tests`), so both compare
//! the lock-free limiter against the same reading of the specification:
//!
//! * `t` is the period (ns per permit), `tau = t·(burst − 1)`, `tat` the
//!   theoretical arrival time, all in ns since the limiter's **epoch**: the
//!   clock reading `origin` at its creation. A clock reading `now` is limiter
//!   time `now − origin` (0 before the origin). The `limit` of limiter time
//!   is `min(MAX_SPAN, u64::MAX − origin)`. Slots are reported as clock
//!   readings (`origin + slot`), refusals carry the clock reading.
//! * A request for `n` permits at `now`: `n > burst` is refused as
//!   insufficient capacity; `now > limit` is out of range; `n = 0` is
//!   granted and changes nothing. Otherwise `new_tat = max(tat, now) + n·t`,
//!   and the request conforms iff `new_tat ≤ now + t·burst`. Its wait is
//!   `new_tat − (now + t·burst)` (0 when it conforms); a reservation succeeds
//!   iff `wait ≤ max_wait` (a plain try has `max_wait = 0`), and a `new_tat`
//!   past `limit` is out of range. A success sets `tat = new_tat`.
//! * `available` is the largest `n ≤ burst` a try would take at `now`.
//! * The changes still in effect since the last quota change form a stack.
//!   A cancel of the reservation on top restores the `tat` before it. A
//!   cancel of one deeper in the stack, whose slot has not passed, makes its
//!   permits a **refund** (a hole at its slot) and returns true; if its slot
//!   has passed it returns false and the permits stay spent. After a cancel,
//!   every refunded change on top of the stack is popped (its `tat` before
//!   restored), as if it had never been made.
//! * A reservation whose fresh slot would wait (or is refused for waiting
//!   too long) takes instead the earliest refund with `now ≤ slot`,
//!   `slot − now ≤ max_wait`, `slot` before its fresh slot and at least `n`
//!   permits; the fresh slot is not taken. Taken whole, the refund's change
//!   is live again and cancelling the new reservation is cancelling it;
//!   taken in part, the change can never be popped and the rest stays a
//!   refund. Refunds whose slot has passed are dropped whenever the table is
//!   used (by a cancel or such a reservation); their change can then never
//!   be popped either.
//! * `set_quota` at `now`: where `tat > now`, the debt is rescaled,
//!   `new tat = now + ceil((tat − now)·t_new/t_old)` (held at `limit`);
//!   an idle limiter (`tat < now`) is moved up to `tat = now`, which no
//!   reading at or after `now` can tell from the old `tat` (the limiter stays
//!   full at the new burst) and which is stricter for a clock that later
//!   steps back. It drops every refund, and no earlier reservation can be
//!   cancelled afterwards.

/// The largest time, in ns, the limiter can represent: 2^60 − 1.
pub const MAX_SPAN: u128 = (1 << 60) - 1;

/// A quota as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelQuota {
    /// The period `t`, ns per permit.
    pub t: u128,
    /// The burst.
    pub burst: u32,
}

/// Why the model refused a request, mirroring `AcquireError` in exact ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// More permits than the burst.
    Insufficient {
        /// Permits asked for.
        requested: u32,
        /// The burst in force.
        burst: u32,
    },
    /// Would conform after `wait` ns, more than allowed.
    Limited {
        /// ns until the same request would conform.
        wait: u128,
    },
    /// `now`, or the slot, lies past the limit of limiter time.
    OutOfRange {
        /// The time of the request.
        now: u128,
    },
}

/// A granted reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The handle to cancel it with, `None` when it took no permits.
    pub id: Option<u64>,
    /// ns from the request until its slot.
    pub wait: u128,
    /// The slot: `now + wait`.
    pub ready_at: u128,
}

/// What became of a state change still in effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Its permits are in use (or may be).
    Live,
    /// Cancelled out of order: its permits are the refund at its slot.
    Refunded,
    /// Can never be undone (a plain try, or a refund taken in part or
    /// dropped).
    Fixed,
}

/// One state change still in effect.
#[derive(Clone, Copy, Debug)]
struct Change {
    /// The reservation that made it; `None` for a plain try.
    id: Option<u64>,
    tat_before: u128,
    /// Its slot (limiter time) and permits.
    slot: u128,
    permits: u32,
    fate: Fate,
}

/// Permits refunded at `slot`; `change` is the stack entry while whole.
#[derive(Clone, Copy, Debug)]
struct Hole {
    slot: u128,
    permits: u32,
    change: Option<u64>,
}

/// A reservation handed out of part of a refund: cancelling it refunds
/// `permits` at `slot` again.
#[derive(Clone, Copy, Debug)]
struct Piece {
    id: u64,
    slot: u128,
    permits: u32,
}

/// The sequential limiter.
#[derive(Clone, Debug)]
pub struct Model {
    /// The quota in force.
    pub quota: ModelQuota,
    /// The theoretical arrival time (limiter time).
    pub tat: u128,
    origin: u128,
    limit: u128,
    /// Changes in effect since the last quota change, oldest first.
    changes: Vec<Change>,
    holes: Vec<Hole>,
    pieces: Vec<Piece>,
    next_id: u64,
}

impl Model {
    /// A full limiter (`tat = 0`) under `quota`, made at clock reading 0.
    pub fn new(quota: ModelQuota) -> Model {
        Model::starting_at(quota, 0)
    }

    /// A full limiter under `quota`, made at clock reading `origin`.
    pub fn starting_at(quota: ModelQuota, origin: u64) -> Model {
        Model {
            quota,
            tat: 0,
            origin: u128::from(origin),
            limit: MAX_SPAN.min(u128::from(u64::MAX - origin)),
            changes: Vec::new(),
            holes: Vec::new(),
            pieces: Vec::new(),
            next_id: 0,
        }
    }

    fn elapsed(&self, now: u128) -> u128 {
        now.saturating_sub(self.origin)
    }

    /// The decision for `n` permits at limiter time `at` (the clock read
    /// `now`) allowing `max_wait`: the new `tat` and the wait, or why not.
    /// Changes nothing.
    fn decide(&self, now: u128, n: u32, max_wait: u128) -> Result<(u128, u128), Refusal> {
        let ModelQuota { t, burst } = self.quota;
        let at = self.elapsed(now);
        if n > burst {
            return Err(Refusal::Insufficient {
                requested: n,
                burst,
            });
        }
        if at > self.limit {
            return Err(Refusal::OutOfRange { now });
        }
        if n == 0 {
            return Ok((self.tat, 0));
        }
        let new_tat = self.tat.max(at) + u128::from(n) * t;
        let conforms_by = at + t * u128::from(burst);
        let wait = new_tat.saturating_sub(conforms_by);
        if wait > max_wait {
            return Err(Refusal::Limited { wait });
        }
        if new_tat > self.limit {
            return Err(Refusal::OutOfRange { now });
        }
        Ok((new_tat, wait))
    }

    /// `try_acquire_n(n)` at `now`.
    pub fn try_acquire(&mut self, now: u128, n: u32) -> Result<(), Refusal> {
        let (new_tat, _) = self.decide(now, n, 0)?;
        self.apply(None, new_tat, 0, 0);
        Ok(())
    }

    /// `reserve_n(n, max_wait)` at `now`.
    pub fn reserve(&mut self, now: u128, n: u32, max_wait: u128) -> Result<Grant, Refusal> {
        let at = self.elapsed(now);
        let fresh = self.decide(now, n, max_wait);
        let fresh_wait = match fresh {
            Ok((_, wait)) if wait > 0 => Some(wait),
            Err(Refusal::Limited { wait }) => Some(wait),
            _ => None,
        };
        if let Some(wait) = fresh_wait
            && !self.holes.is_empty()
            && let Some(grant) = self.take_hole(at, n, max_wait, at + wait)
        {
            return Ok(grant);
        }
        let (new_tat, wait) = fresh?;
        let id = (n > 0).then(|| self.new_id());
        self.apply(id, new_tat, at + wait, n);
        Ok(self.grant(id, at, wait))
    }

    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn grant(&self, id: Option<u64>, at: u128, wait: u128) -> Grant {
        Grant {
            id,
            wait,
            ready_at: self.origin + at + wait,
        }
    }

    /// The earliest fitting refund, taken.
    fn take_hole(&mut self, at: u128, n: u32, max_wait: u128, fresh_slot: u128) -> Option<Grant> {
        self.expire(at);
        let i = (0..self.holes.len())
            .filter(|&i| {
                let h = self.holes[i];
                h.permits >= n && h.slot < fresh_slot && h.slot - at <= max_wait
            })
            .min_by_key(|&i| self.holes[i].slot)?;
        let hole = self.holes[i];
        let wait = hole.slot - at;
        if hole.permits == n {
            self.holes.remove(i);
            if let Some(id) = hole.change {
                self.change_mut(id).fate = Fate::Live;
                return Some(self.grant(Some(id), at, wait));
            }
        } else {
            self.holes[i].permits -= n;
            if let Some(id) = self.holes[i].change.take() {
                self.change_mut(id).fate = Fate::Fixed;
            }
        }
        let id = self.new_id();
        self.pieces.push(Piece {
            id,
            slot: hole.slot,
            permits: n,
        });
        Some(self.grant(Some(id), at, wait))
    }

    fn change_mut(&mut self, id: u64) -> &mut Change {
        self.changes
            .iter_mut()
            .find(|c| c.id == Some(id))
            .expect("a hole's change is in effect")
    }

    fn apply(&mut self, id: Option<u64>, new_tat: u128, slot: u128, permits: u32) {
        if new_tat != self.tat {
            self.changes.push(Change {
                id,
                tat_before: self.tat,
                slot,
                permits,
                fate: if id.is_some() {
                    Fate::Live
                } else {
                    Fate::Fixed
                },
            });
            self.tat = new_tat;
        }
    }

    /// `cancel` at `now` of the reservation `id` (`None`: one of zero
    /// permits).
    pub fn cancel(&mut self, now: u128, id: Option<u64>) -> bool {
        let Some(id) = id else { return false };
        let at = self.elapsed(now);
        if let Some(i) = self.pieces.iter().position(|p| p.id == id) {
            let piece = self.pieces.remove(i);
            if piece.slot < at {
                return false;
            }
            self.expire(at);
            self.holes.push(Hole {
                slot: piece.slot,
                permits: piece.permits,
                change: None,
            });
            self.collapse(at);
            return true;
        }
        let Some(i) = self.changes.iter().position(|c| c.id == Some(id)) else {
            return false; // made before a quota change
        };
        if i + 1 == self.changes.len() {
            let change = self.changes.pop().expect("on top");
            self.tat = change.tat_before;
            self.collapse(at);
            return true;
        }
        let change = self.changes[i];
        if change.slot < at {
            self.changes[i].fate = Fate::Fixed;
            return false;
        }
        self.expire(at);
        self.changes[i].fate = Fate::Refunded;
        self.holes.push(Hole {
            slot: change.slot,
            permits: change.permits,
            change: Some(id),
        });
        self.collapse(at);
        true
    }

    /// Pops refunded changes off the top, then drops passed refunds.
    fn collapse(&mut self, at: u128) {
        while let Some(top) = self.changes.last().copied() {
            if top.fate != Fate::Refunded {
                break;
            }
            self.changes.pop();
            self.tat = top.tat_before;
            self.holes.retain(|h| h.change != top.id);
        }
        self.expire(at);
    }

    /// Drops refunds whose slot lies before limiter time `at`.
    fn expire(&mut self, at: u128) {
        for hole in self.holes.iter().filter(|h| h.slot < at) {
            if let Some(id) = hole.change
                && let Some(c) = self.changes.iter_mut().find(|c| c.id == Some(id))
            {
                c.fate = Fate::Fixed;
            }
        }
        self.holes.retain(|h| h.slot >= at);
    }

    /// `set_quota(quota)` at `now`.
    pub fn set_quota(&mut self, now: u128, quota: ModelQuota) {
        let at = self.elapsed(now);
        if self.tat > at {
            let debt = self.tat - at;
            let scaled = (debt * quota.t).div_ceil(self.quota.t);
            self.tat = (at + scaled).min(self.limit);
        } else if at <= self.limit {
            self.tat = at;
        }
        // A clock past the limit decides nothing: the tat is left as it is,
        // so a clock set back later finds the limiter as it was.
        self.quota = quota;
        self.changes.clear();
        self.holes.clear();
        self.pieces.clear();
    }

    /// `available()` at `now`: the largest `n ≤ burst` that `try_acquire`
    /// would grant.
    pub fn available(&self, now: u128) -> u32 {
        let at = self.elapsed(now);
        if at > self.limit {
            return 0;
        }
        let ModelQuota { t, burst } = self.quota;
        let room = (at + t * u128::from(burst))
            .min(self.limit)
            .saturating_sub(self.tat.max(at));
        u32::try_from(room / t).expect("room ≤ t·burst").min(burst)
    }
}

/// The model's view of the limiter's `AcquireError`, for comparing the two.
pub fn refusal(error: limiter_core::AcquireError) -> Refusal {
    use limiter_core::AcquireError;
    match error {
        AcquireError::InsufficientCapacity { requested, burst } => {
            Refusal::Insufficient { requested, burst }
        }
        AcquireError::RateLimited { wait } => Refusal::Limited {
            wait: wait.as_nanos(),
        },
        AcquireError::TimeOutOfRange { now } => Refusal::OutOfRange {
            now: u128::from(now),
        },
        other => panic!("an error the model does not know: {other:?}"),
    }
}
