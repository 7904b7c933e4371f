//! The precise wake-up: one process-wide timer thread that wakes short
//! waits close to their instant, instead of on tokio's next 1 ms tick.
//!
//! # How it works
//!
//! A [`PreciseSleep`] puts its deadline (a `std::time::Instant`, i.e. the
//! system's monotonic clock, the clock tokio's timer runs on when time is not
//! paused) and a shared [`Waiter`] into a min-heap, and, if its deadline is
//! earlier than the one the thread sleeps towards, moves the thread's alarm
//! forward (see [`crate::alarm`]: on Linux it re-arms a `timerfd`, which
//! costs a system call and no wake-up of the thread; elsewhere it unparks
//! the thread). The thread pops every due entry, marks its waiter fired and
//! wakes the waiter's `Waker`, then sleeps until the next deadline. The
//! kernel's timerfd timers have no timer slack; for the park fallback the
//! thread first sets its own slack to 1 ns (`/proc/<tid>/timerslack_ns`,
//! the file form of `prctl(PR_SET_TIMERSLACK)`), since the kernel would
//! otherwise let its sleeps end up to 50 µs late to batch wake-ups.
//!
//! The thread never spins: it sleeps whenever nothing is due, and no tokio
//! worker ever waits on it (a pending `PreciseSleep` returns `Pending` with
//! its waker registered, like any tokio timer).
//!
//! # Invariants
//!
//! * A waiter is fired only once its deadline has passed on the system clock,
//!   so a precise wake-up is never early.
//! * No lost wake-up: the waker is stored and the `fired` flag read under the
//!   waiter's mutex, and the thread sets `fired` and takes the waker under the
//!   same mutex, so either the poll sees `fired` or the thread sees the
//!   waker.
//! * Registration never waits for the thread: it takes the queue's mutex
//!   for a heap push (and, for an earlier deadline, one re-arm of the
//!   alarm); the thread holds that mutex only to pop due entries and re-arm
//!   the alarm, never while waking tasks or sleeping. The waiter's mutex is
//!   never taken while holding the queue's, so the two cannot deadlock.
//! * A dropped sleep clears its waker; its heap entry stays until its
//!   deadline (at most the precise range, a few milliseconds) and is then
//!   discarded.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::alarm::{Alarm, Sleeper, timerfd_pair};

/// What a sleep and the timer thread share: fired yet, and whom to wake.
#[derive(Debug, Default)]
struct Waiter {
    state: Mutex<WaiterState>,
}

#[derive(Debug, Default)]
struct WaiterState {
    fired: bool,
    waker: Option<Waker>,
}

impl Waiter {
    fn state(&self) -> MutexGuard<'_, WaiterState> {
        // A panic while holding the lock cannot leave the state torn (two
        // plain fields, each written in one step): ignore the poison.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the waiter fired and wakes its task, outside the lock.
    fn fire(&self) {
        let waker = {
            let mut state = self.state();
            state.fired = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// One pending deadline. Ordered by `(at, seq)`: equal deadlines fire in
/// registration order.
#[derive(Debug)]
struct Entry {
    at: Instant,
    seq: u64,
    waiter: Arc<Waiter>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The heap and what the thread is sleeping towards.
#[derive(Debug, Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Entry>>,
    next_seq: u64,
    /// The deadline the thread parks until; `None`: parked without one.
    sleeping_until: Option<Instant>,
}

impl Queue {
    /// Pops every entry due at `now` into `due`.
    fn pop_due(&mut self, now: Instant, due: &mut Vec<Arc<Waiter>>) {
        while self.heap.peek().is_some_and(|Reverse(top)| top.at <= now) {
            if let Some(Reverse(entry)) = self.heap.pop() {
                due.push(entry.waiter);
            }
        }
    }
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Every update of the queue is a single heap operation or field
        // write: a poisoned lock still guards a consistent heap.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The running timer thread.
#[derive(Debug)]
struct TimerThread {
    shared: Arc<Shared>,
    /// Moves the thread's wake-up forward (under the queue's mutex).
    alarm: Alarm,
}

/// The process's timer thread, started on first use; `None` if it could not
/// be started (then callers fall back to tokio's timer).
fn timer() -> Option<&'static TimerThread> {
    static TIMER: OnceLock<Option<TimerThread>> = OnceLock::new();
    TIMER
        .get_or_init(|| {
            let shared = Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
            });
            let theirs = Arc::clone(&shared);
            let (alarm, sleeper) = match timerfd_pair() {
                Some((alarm, sleeper)) => (Some(alarm), sleeper),
                None => (None, Sleeper::Park),
            };
            let handle = std::thread::Builder::new()
                .name("limiter-precise-timer".into())
                .spawn(move || run(&theirs, &sleeper))
                .ok()?;
            let alarm = alarm.unwrap_or_else(|| Alarm::Unpark(handle.thread().clone()));
            Some(TimerThread { shared, alarm })
        })
        .as_ref()
}

/// The timer thread's loop: fire what is due, sleep until the next deadline.
fn run(shared: &Shared, sleeper: &Sleeper) -> ! {
    set_fine_timer_slack();
    let mut due = Vec::new();
    loop {
        let next = {
            let mut queue = shared.queue();
            queue.pop_due(Instant::now(), &mut due);
            let next = queue.heap.peek().map(|Reverse(top)| top.at);
            sleeper.plan(next);
            queue.sleeping_until = next;
            next
        };
        for waiter in due.drain(..) {
            waiter.fire();
        }
        // A registration after the unlock above that needs an earlier
        // wake-up re-arms the alarm (or unparks us: the park token makes
        // an unpark count even if it comes before we park).
        sleeper.sleep(next);
    }
}

/// Sets this thread's timer slack to 1 ns where the kernel offers it
/// (Linux ≥ 4.6; a thread may set its own). Silently keeps the default
/// elsewhere or if the file cannot be written: wake-ups are then only as
/// precise as the default slack allows.
fn set_fine_timer_slack() {
    let Ok(link) = std::fs::read_link("/proc/thread-self") else {
        return;
    };
    // "<pid>/task/<tid>": the thread's own directory is /proc/<tid>.
    if let Some(tid) = link.file_name() {
        let path = std::path::Path::new("/proc")
            .join(tid)
            .join("timerslack_ns");
        let _kept_default_on_error = std::fs::write(path, b"1");
    }
}

/// A future that completes once the system clock passes its deadline,
/// woken by the timer thread.
///
/// # Cancel safety
///
/// Dropping it clears its waker; nothing else is owed.
#[derive(Debug)]
pub(crate) struct PreciseSleep {
    waiter: Arc<Waiter>,
}

impl PreciseSleep {
    /// Registers a sleep until `at`; `None` if the timer thread could not
    /// be started.
    pub(crate) fn until(at: Instant) -> Option<PreciseSleep> {
        let timer = timer()?;
        let waiter = Arc::new(Waiter::default());
        {
            let mut queue = timer.shared.queue();
            let seq = queue.next_seq;
            queue.next_seq += 1;
            queue.heap.push(Reverse(Entry {
                at,
                seq,
                waiter: Arc::clone(&waiter),
            }));
            if queue.sleeping_until.is_none_or(|until| at < until) {
                // Under the mutex (alarm module invariant). Later
                // registrations before the thread re-plans compare with
                // this deadline.
                timer.alarm.set(at);
                queue.sleeping_until = Some(at);
            }
        }
        Some(PreciseSleep { waiter })
    }
}

impl Future for PreciseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.waiter.state();
        if state.fired {
            return Poll::Ready(());
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            waker => *waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for PreciseSleep {
    fn drop(&mut self) {
        self.waiter.state().waker = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    // These tests run the real timer thread, so they assert order and
    // completion only, never how long anything took.

    #[tokio::test]
    async fn a_past_deadline_fires_and_a_sleep_completes_after_its_deadline() {
        PreciseSleep::until(Instant::now())
            .expect("the timer thread starts")
            .await;
        let at = Instant::now() + Duration::from_micros(200);
        PreciseSleep::until(at).expect("timer").await;
        assert!(Instant::now() >= at);
    }

    #[test]
    fn the_queue_pops_due_entries_by_deadline_then_registration() {
        let base = Instant::now();
        let mut queue = Queue::default();
        let waiters: Vec<Arc<Waiter>> = (0..4).map(|_| Arc::new(Waiter::default())).collect();
        // (deadline offset µs, seq): waiter 2 and waiter 0 share a deadline.
        for (i, (us, seq)) in [(10, 0), (30, 1), (10, 2), (20, 3)].into_iter().enumerate() {
            queue.heap.push(Reverse(Entry {
                at: base + Duration::from_micros(us),
                seq,
                waiter: Arc::clone(&waiters[i]),
            }));
        }
        let mut due = Vec::new();
        queue.pop_due(base + Duration::from_micros(20), &mut due);
        let order: Vec<usize> = due
            .iter()
            .map(|d| {
                waiters
                    .iter()
                    .position(|s| Arc::ptr_eq(s, d))
                    .expect("known waiter")
            })
            .collect();
        assert_eq!(order, [0, 2, 3]);
        assert_eq!(queue.heap.len(), 1);
    }

    #[test]
    fn firing_wakes_the_registered_waker_once_and_completes_the_sleep() {
        use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

        struct Count(AtomicUsize);
        impl futures::task::ArcWake for Count {
            fn wake_by_ref(arc_self: &Arc<Count>) {
                // Relaxed: a plain count, read on this thread.
                arc_self.0.fetch_add(1, AtomicOrdering::Relaxed);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = futures::task::waker(Arc::clone(&count));
        let mut sleep = PreciseSleep {
            waiter: Arc::new(Waiter::default()),
        };
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());
        sleep.waiter.fire();
        // Relaxed: as above.
        assert_eq!(count.0.load(AtomicOrdering::Relaxed), 1);
        assert!(Pin::new(&mut sleep).poll(&mut cx).is_ready());
        sleep.waiter.fire(); // no waker left: wakes nobody
        assert_eq!(count.0.load(AtomicOrdering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_dropped_sleep_leaves_no_waker_and_others_still_fire() {
        let at = Instant::now() + Duration::from_micros(500);
        let dropped = PreciseSleep::until(at).expect("timer");
        let waiter = Arc::clone(&dropped.waiter);
        let mut dropped = Box::pin(dropped);
        let waker = futures::task::noop_waker();
        // Pending (or, on a very slow machine, already fired): either way
        // the waker must be gone once the sleep is dropped.
        let _ = dropped.as_mut().poll(&mut Context::from_waker(&waker));
        drop(dropped);
        assert!(waiter.state().waker.is_none());
        PreciseSleep::until(at).expect("timer").await;
    }
}
