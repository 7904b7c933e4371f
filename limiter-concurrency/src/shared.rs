//! The protocol on the state word and the wait queue, shared by every
//! handle, permit and waiting future of one limiter, and `Inner`: that
//! state with the limiter's estimator, what every handle holds.
//!
//! # Implementation notes
//!
//! The state word (see [`crate::word`]) holds `limit`, `in_flight` and the
//! queued flag `Q`. Every change of `in_flight` or `limit` is one CAS from an
//! observed word to a word computed from it, so every decision is taken on
//! the value it replaces:
//!
//! * **Acquire, fast path:** one CAS `in_flight → in_flight + 1`, allowed
//!   when `in_flight < limit` and `Q` is clear. No lock.
//! * **Acquire, slow path** (under the queue lock): the waiter's ticket is
//!   queued and `Q` set by CAS; then every free permit is handed to a waiter
//!   in the queue's order ([`Shared::admit_waiters`]), which may be this one.
//!   Because `Q` is set by a CAS on the same word that releases CAS, a
//!   release ordered before it left `in_flight` lower, which the admission
//!   that follows sees; a release ordered after it sees `Q` and takes the
//!   slow path. No release is lost between "no permit" and "queued".
//! * **Release, fast path:** when `Q` is clear, or the limit was cut below
//!   what is held (the freed permit is free for nobody), one CAS
//!   `in_flight → in_flight - 1`.
//! * **Release, slow path** (under the lock, `Q` set and the permit free):
//!   the permit is handed to the next waiter without touching the word: it
//!   is decided on a load taken under the lock and takes effect there. While
//!   the lock is held and `Q` set, nothing admits a newcomer, and the only
//!   writes to the word are limit changes and decrements of permits that
//!   are free for nobody, which decide the same on the word whether the
//!   hand-off is placed before them or not (the argument is in
//!   docs/design.md).
//! * **Limit change:** one CAS replacing `limit`. Lowering it revokes
//!   nothing: releases decrement until `in_flight < limit`. Raising it, when
//!   `Q` is set, takes the lock and hands exactly the permits now free to
//!   that many waiters, each by CAS; nobody else is woken.
//!
//! `Q` is set and cleared only under the lock, and is set exactly when the
//! queue holds a waiting ticket once the lock is released.

use std::task::Waker;

use crate::estimator::{Estimator, Outcome, Sample};
use crate::queue::{Queue, QueueOrder};
use crate::sync::{AtomicU64, Mutex, MutexGuard, Ordering, lock};
use crate::word::{self, Release};

/// What the slow path of an acquisition got.
#[derive(Debug)]
pub(crate) enum Enqueued {
    /// A permit, admitted at this in-flight count.
    Granted(u32),
    /// Waiting under this ticket.
    Waiting(u64),
    /// The queue is full.
    Full,
}

#[derive(Debug)]
pub(crate) struct Shared {
    state: AtomicU64,
    queue: Mutex<Queue>,
    #[cfg(loom)]
    pub(crate) broken: crate::loom_hooks::Broken,
}

impl Shared {
    pub(crate) fn new(limit: u32, capacity: usize, order: QueueOrder) -> Shared {
        Shared {
            state: AtomicU64::new(word::new(limit)),
            queue: Mutex::new(Queue::new(capacity, order)),
            #[cfg(loom)]
            broken: crate::loom_hooks::Broken::None,
        }
    }

    /// The state word now.
    pub(crate) fn load(&self) -> u64 {
        // Acquire: a reader of the counts sees the writes of the permit
        // holders that released before (only informational).
        self.state.load(Ordering::Acquire)
    }

    /// The fast path: one permit now, or `None`. Returns the in-flight
    /// count including the new permit.
    #[inline]
    pub(crate) fn try_admit(&self) -> Option<u32> {
        #[cfg(loom)]
        if self.broken == crate::loom_hooks::Broken::LoadStoreAdmit {
            let next = word::admit(self.state.load(Ordering::SeqCst))?;
            self.state.store(next, Ordering::SeqCst);
            return Some(word::in_flight(next));
        }
        // Relaxed: only the CAS below decides; this is its first guess.
        let mut w = self.state.load(Ordering::Relaxed);
        loop {
            let next = word::admit(w)?;
            // Acquire on success: the new holder sees everything the previous
            // holder of this permit did before its Release decrement.
            match self
                .state
                .compare_exchange_weak(w, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Some(word::in_flight(next)),
                Err(actual) => w = actual,
            }
        }
    }

    /// Gives one permit back: to the next waiter if one waits and the
    /// permit is free for it, to the count otherwise.
    #[inline]
    pub(crate) fn release(&self) {
        // Relaxed: only the CAS decides.
        let mut w = self.state.load(Ordering::Relaxed);
        loop {
            match self.release_decision(w) {
                Release::Decrement(next) => {
                    // Release: the holder's work happens-before the next
                    // admission that reads this count.
                    match self.state.compare_exchange_weak(
                        w,
                        next,
                        Ordering::Release,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return,
                        Err(actual) => w = actual,
                    }
                }
                Release::HandOff => return self.release_slow(),
            }
        }
    }

    #[cfg(not(loom))]
    #[inline]
    fn release_decision(&self, w: u64) -> Release {
        word::release(w)
    }

    #[cfg(loom)]
    fn release_decision(&self, w: u64) -> Release {
        match self.broken {
            crate::loom_hooks::Broken::ReleaseIgnoresQueue => Release::Decrement(w - 1),
            crate::loom_hooks::Broken::HandOffIgnoresLimit if word::queued(w) => Release::HandOff,
            _ => word::release(w),
        }
    }

    #[cold]
    fn release_slow(&self) {
        let mut q = lock(&self.queue);
        // Acquire: pairs with the Release of the decrements racing with us.
        let mut w = self.state.load(Ordering::Acquire);
        loop {
            match self.release_decision(w) {
                // The permit changes owner; the word stays as it is, so the
                // hand-off takes effect at the read of `w` (no CAS needs to
                // confirm it: see "The hand-off writes nothing" in
                // docs/design.md). The waiter sees the releaser's work
                // through the queue lock it takes to collect the permit.
                Release::HandOff => {
                    q.grant_next(word::in_flight(w));
                    self.clear_flag_if_empty(&q);
                    return;
                }
                // Release: as on the fast path; Acquire on failure, as the
                // load above (the word read may decide a hand-off).
                Release::Decrement(next) => {
                    match self
                        .state
                        .compare_exchange(w, next, Ordering::Release, Ordering::Acquire)
                    {
                        Ok(_) => return,
                        Err(actual) => w = actual,
                    }
                }
            }
        }
    }

    /// Queues a waiter (or hands it a permit at once when one is free).
    pub(crate) fn enqueue(&self, waker: &Waker) -> Enqueued {
        let mut q = lock(&self.queue);
        let Some(ticket) = q.push(waker.clone()) else {
            return Enqueued::Full;
        };
        // AcqRel: the flag must be in the word's modification order before
        // any release we rely on to see it (RMW on one word gives that); the
        // Acquire side sees the holders' work for a grant made below.
        self.state
            .fetch_or(word::with_queued(0, true), Ordering::AcqRel);
        self.admit_waiters(&mut q);
        match q.take_grant(ticket) {
            Some(in_flight) => Enqueued::Granted(in_flight),
            None => Enqueued::Waiting(ticket),
        }
    }

    /// On a later poll: the permit handed to `ticket`, or a new waker.
    pub(crate) fn poll_ticket(&self, ticket: u64, waker: &Waker) -> Option<u32> {
        let mut q = lock(&self.queue);
        let granted = q.take_grant(ticket);
        if granted.is_none() {
            q.update_waker(ticket, waker);
        }
        granted
    }

    /// A waiting future went away: forget its ticket, or give back the
    /// permit it had been handed.
    pub(crate) fn cancel(&self, ticket: u64) {
        let mut q = lock(&self.queue);
        if q.remove(ticket) {
            self.clear_flag_if_empty(&q);
        } else if q.take_grant(ticket).is_some() {
            drop(q);
            #[cfg(loom)]
            if self.broken == crate::loom_hooks::Broken::CancelForgetsGrant {
                return;
            }
            self.release();
        }
    }

    /// Replaces the limit; hands the permits a raise frees to waiters.
    /// Returns the previous limit.
    pub(crate) fn set_limit(&self, limit: u32) -> u32 {
        // Relaxed: only the CAS decides.
        let mut w = self.state.load(Ordering::Relaxed);
        loop {
            let next = word::with_limit(w, limit);
            #[cfg(loom)]
            if self.broken == crate::loom_hooks::Broken::LimitLoadStore {
                self.state.store(next, Ordering::SeqCst);
                break;
            }
            // AcqRel: a limit change orders like a release and an admission
            // (it can free permits that a waiter then holds).
            match self
                .state
                .compare_exchange_weak(w, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(actual) => w = actual,
            }
        }
        if word::queued(w) && word::in_flight(w) < limit && !self.skip_admit_on_raise() {
            let mut q = lock(&self.queue);
            self.admit_waiters(&mut q);
        }
        word::limit(w)
    }

    #[cfg(not(loom))]
    fn skip_admit_on_raise(&self) -> bool {
        false
    }

    #[cfg(loom)]
    fn skip_admit_on_raise(&self) -> bool {
        self.broken == crate::loom_hooks::Broken::RaiseWakesNobody
    }

    /// Hands every free permit to a waiter, one CAS each (lock held).
    fn admit_waiters(&self, q: &mut MutexGuard<'_, Queue>) {
        // Acquire: see the work of the holders whose releases freed these.
        let mut w = self.state.load(Ordering::Acquire);
        while !q.is_empty() {
            let Some(next) = word::free_for_waiter(w) else {
                break;
            };
            // Acquire on success: the waiter handed this permit sees the
            // previous holder's work; Relaxed on failure, we retry.
            match self
                .state
                .compare_exchange(w, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    q.grant_next(word::in_flight(next));
                    w = next;
                }
                Err(actual) => w = actual,
            }
        }
        self.clear_flag_if_empty(q);
    }

    fn clear_flag_if_empty(&self, q: &Queue) {
        if q.is_empty() {
            // Release: a release that then skips the lock is ordered after
            // the queue state this lock holder leaves behind.
            self.state
                .fetch_and(!word::with_queued(0, true), Ordering::Release);
        }
    }

    pub(crate) fn queue_len(&self) -> usize {
        lock(&self.queue).len()
    }

    pub(crate) fn queue_capacity(&self) -> usize {
        lock(&self.queue).capacity()
    }

    pub(crate) fn queue_order(&self) -> QueueOrder {
        lock(&self.queue).order()
    }

    pub(crate) fn set_queue(&self, capacity: usize, order: QueueOrder) {
        lock(&self.queue).reconfigure(capacity, order);
    }
}

/// What every handle of one limiter shares.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) shared: Shared,
    pub(crate) estimator: Option<std::sync::Mutex<Box<dyn Estimator>>>,
}

impl Inner {
    /// Feeds a finished permit to the estimator and installs the limit it
    /// recommends. A sample that finds another being taken is skipped (the
    /// estimators are statistical; the permit path never waits on a lock).
    pub(crate) fn record(&self, outcome: Outcome, in_flight: u32) {
        let Some(estimator) = &self.estimator else {
            return;
        };
        let (rtt, dropped) = match outcome {
            Outcome::Success(rtt) => (rtt, false),
            Outcome::Dropped(rtt) => (rtt, true),
            Outcome::Ignore => return,
        };
        let Ok(mut e) = estimator.try_lock() else {
            return;
        };
        let limit = e.sample(Sample {
            rtt,
            in_flight,
            dropped,
        });
        drop(e);
        if limit != word::limit(self.shared.load()) {
            self.shared.set_limit(limit);
        }
    }
}
