//! A plain sequential GCRA reference model, written from the specification
//! for clarity, not speed: `u128` arithmetic (nothing can overflow), no
//! atomics, no bit packing, no generations.
//!
//! It is the oracle of the differential property suite
//! (`limiter-core/tests/differential.rs`) and of the loom linearizability
//! checks (`loom-tests`, which includes this file by path), so both compare
//! the lock-free limiter against the same reading of the specification:
//!
//! * `t` is the period (ns per permit), `tau = t·(burst − 1)`, `tat` the
//!   theoretical arrival time, all in ns since the clock's origin.
//! * A request for `n` permits at `now`: `n > burst` is refused as
//!   insufficient capacity; `now > MAX_SPAN` is out of range; `n = 0` is
//!   granted and changes nothing. Otherwise `new_tat = max(tat, now) + n·t`,
//!   and the request conforms iff `new_tat ≤ now + t·burst`. Its wait is
//!   `new_tat − (now + t·burst)` (0 when it conforms); a reservation succeeds
//!   iff `wait ≤ max_wait` (a plain try has `max_wait = 0`), and a `new_tat`
//!   past `MAX_SPAN` is out of range. A success sets `tat = new_tat`.
//! * `available` is the largest `n ≤ burst` a try would take at `now`.
//! * A cancel restores the exact state before the reservation iff nothing
//!   depends on it: every state change made after it has itself been
//!   cancelled, and the quota has not changed since. The model keeps the
//!   changes still in effect as a stack, so "nothing depends on it" means
//!   "it is on top of the stack".
//! * `set_quota` at `now`: where `tat > now`, the debt is rescaled,
//!   `new tat = now + ceil((tat − now)·t_new/t_old)` (held at `MAX_SPAN`);
//!   an idle limiter (`tat < now`) is moved up to `tat = now`, which no
//!   reading at or after `now` can tell from the old `tat` (the limiter stays
//!   full at the new burst) and which is stricter for a clock that later
//!   steps back. No earlier reservation can be cancelled afterwards.

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
    /// `now`, or the slot, lies past `MAX_SPAN`.
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

/// One state change still in effect: who made it and the `tat` before it.
#[derive(Clone, Copy, Debug)]
struct Change {
    /// The reservation that made it; `None` for a plain try (not cancellable).
    id: Option<u64>,
    tat_before: u128,
}

/// The sequential limiter.
#[derive(Clone, Debug)]
pub struct Model {
    /// The quota in force.
    pub quota: ModelQuota,
    /// The theoretical arrival time.
    pub tat: u128,
    /// Changes in effect since the last quota change, oldest first.
    changes: Vec<Change>,
    next_id: u64,
}

impl Model {
    /// A full limiter (`tat = 0`) under `quota`.
    pub fn new(quota: ModelQuota) -> Model {
        Model {
            quota,
            tat: 0,
            changes: Vec::new(),
            next_id: 0,
        }
    }

    /// The decision for `n` permits at `now` allowing `max_wait`: the new
    /// `tat` and the wait, or why not. Changes nothing.
    fn decide(&self, now: u128, n: u32, max_wait: u128) -> Result<(u128, u128), Refusal> {
        let ModelQuota { t, burst } = self.quota;
        if n > burst {
            return Err(Refusal::Insufficient {
                requested: n,
                burst,
            });
        }
        if now > MAX_SPAN {
            return Err(Refusal::OutOfRange { now });
        }
        if n == 0 {
            return Ok((self.tat, 0));
        }
        let new_tat = self.tat.max(now) + u128::from(n) * t;
        let limit = now + t * u128::from(burst);
        let wait = new_tat.saturating_sub(limit);
        if wait > max_wait {
            return Err(Refusal::Limited { wait });
        }
        if new_tat > MAX_SPAN {
            return Err(Refusal::OutOfRange { now });
        }
        Ok((new_tat, wait))
    }

    /// `try_acquire_n(n)` at `now`.
    pub fn try_acquire(&mut self, now: u128, n: u32) -> Result<(), Refusal> {
        let (new_tat, _) = self.decide(now, n, 0)?;
        self.apply(None, new_tat);
        Ok(())
    }

    /// `reserve_n(n, max_wait)` at `now`.
    pub fn reserve(&mut self, now: u128, n: u32, max_wait: u128) -> Result<Grant, Refusal> {
        let (new_tat, wait) = self.decide(now, n, max_wait)?;
        let id = (n > 0).then(|| {
            self.next_id += 1;
            self.next_id
        });
        self.apply(id, new_tat);
        Ok(Grant {
            id,
            wait,
            ready_at: now + wait,
        })
    }

    fn apply(&mut self, id: Option<u64>, new_tat: u128) {
        if new_tat != self.tat {
            self.changes.push(Change {
                id,
                tat_before: self.tat,
            });
            self.tat = new_tat;
        }
    }

    /// `cancel` of the reservation `id` (`None`: one of zero permits).
    pub fn cancel(&mut self, id: Option<u64>) -> bool {
        let on_top = id.is_some() && self.changes.last().is_some_and(|c| c.id == id);
        if on_top {
            let change = self.changes.pop().expect("on top");
            self.tat = change.tat_before;
        }
        on_top
    }

    /// `set_quota(quota)` at `now`.
    pub fn set_quota(&mut self, now: u128, quota: ModelQuota) {
        if self.tat > now {
            let debt = self.tat - now;
            let scaled = (debt * quota.t).div_ceil(self.quota.t);
            self.tat = (now + scaled).min(MAX_SPAN);
        } else if now <= MAX_SPAN {
            self.tat = now;
        }
        // A clock past MAX_SPAN decides nothing: the tat is left as it is,
        // so a clock set back later finds the limiter as it was.
        self.quota = quota;
        self.changes.clear();
    }

    /// `available()` at `now`: the largest `n ≤ burst` that `try_acquire`
    /// would grant.
    pub fn available(&self, now: u128) -> u32 {
        if now > MAX_SPAN {
            return 0;
        }
        let ModelQuota { t, burst } = self.quota;
        let room = (now + t * u128::from(burst)).saturating_sub(self.tat.max(now));
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
