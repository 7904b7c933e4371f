//! Shared harness of the loom model checks of `limiter-core`.
//!
//! The checks themselves live in `tests/`, one file per atomic protocol, and
//! compile only under `RUSTFLAGS="--cfg loom"`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release -p loom-tests
//! ```
//!
//! This crate gives them:
//!
//! * [`FixedClock`]: time as an explicit, constant input, so a model explores
//!   interleavings of the state word only (the clock is no atomic at all);
//! * [`check`]: `loom::model` with a default preemption bound of 3 when
//!   `LOOM_MAX_PREEMPTIONS` is unset, counting the executions it explores;
//! * [`History`]: records what each thread did and what it got back, through
//!   the public API of the limiter (or of a deliberately broken variant, via
//!   [`Subject`]);
//! * [`assert_linearizable`]: after the threads joined, searches for one
//!   order of all recorded operations (respecting each thread's program
//!   order) in which the sequential reference [`model`] returns exactly what
//!   the threads observed. That one check catches over-admission, a torn
//!   all-or-nothing request, slots out of CAS order, a refund something
//!   depended on, and a decision that mixed two quotas, because none of those
//!   outcomes is produced by any sequential order.
//!
//! The reference model is `limiter_test_support::model`, so the
//! differential property suite and these models share one
//! reading of the specification.

use core::time::Duration;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};

use limiter_core::{AcquireError, Clock, Quota, RateLimiter, Reservation};

pub use limiter_test_support::model;
pub mod scenarios;

use model::{Model, ModelQuota, Refusal};

/// A clock stopped at one instant (ns since its origin).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub u64);

impl Clock for FixedClock {
    fn now(&self) -> u64 {
        self.0
    }
}

/// A quota from `t` ns and a burst; panics on invalid numbers (test input).
pub fn quota(t: u64, burst: u32) -> Quota {
    Quota::from_nanos(t, burst).expect("a valid test quota")
}

/// The model's view of `quota`.
pub fn model_quota(quota: Quota) -> ModelQuota {
    ModelQuota {
        t: u128::from(quota.period_nanos()),
        burst: quota.burst(),
    }
}

/// Runs `f` under `loom::model`, with a preemption bound of 3 unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise, and checks coverage: `f` returns a
/// label for the outcome of each execution, and the set of labels seen must
/// be exactly `outcomes`. A model that never reaches one of the orders it
/// means to test therefore fails instead of passing vacuously.
///
/// Models do all their concurrent work in spawned threads; the model's main
/// thread only sets up, spawns, joins and checks. (loom 0.7 explores too few
/// interleavings when the main thread races a spawned thread whose first
/// access is a load; the coverage check is what showed it.)
pub fn check<F>(name: &str, outcomes: &[&str], f: F)
where
    F: Fn() -> String + Sync + Send + 'static,
{
    let seen = std::sync::Arc::new(Mutex::new(BTreeSet::new()));
    let executions = std::sync::Arc::new(AtomicUsize::new(0));
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    let (seen2, executions2) = (seen.clone(), executions.clone());
    builder.check(move || {
        executions2.fetch_add(1, StdOrdering::Relaxed);
        let label = f();
        seen2.lock().unwrap().insert(label);
    });
    let seen = seen.lock().unwrap().clone();
    let expected: BTreeSet<String> = outcomes.iter().map(|s| s.to_string()).collect();
    println!(
        "loom model `{name}`: {} executions (preemption bound {:?}), outcomes {seen:?}",
        executions.load(StdOrdering::Relaxed),
        builder.preemption_bound
    );
    assert_eq!(seen, expected, "`{name}`: the outcomes explored");
}

/// The operations a deliberately broken variant shares with
/// [`RateLimiter`], so one harness checks both.
pub trait Subject: Send + Sync {
    /// `try_acquire_n`.
    fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError>;
    /// `set_quota`.
    fn set_quota(&self, quota: Quota);
    /// `quota`.
    fn quota(&self) -> Quota;
}

impl<C: Clock> Subject for RateLimiter<C> {
    fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        RateLimiter::try_acquire_n(self, n)
    }
    fn set_quota(&self, quota: Quota) {
        RateLimiter::set_quota(self, quota)
    }
    fn quota(&self) -> Quota {
        RateLimiter::quota(self)
    }
}

pub use model::refusal;

/// One operation a thread performed and what it observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `try_acquire_n(n)`.
    TryAcquire {
        /// Permits asked for.
        n: u32,
        /// What it returned.
        out: Result<(), Refusal>,
    },
    /// `reserve_n(n, max_wait)`; `label` names the reservation for a cancel.
    Reserve {
        /// The name a later [`Event::Cancel`] uses.
        label: &'static str,
        /// Permits asked for.
        n: u32,
        /// The longest acceptable wait, ns.
        max_wait: u64,
        /// `(wait, ready_at)` in ns, or the refusal.
        out: Result<(u128, u128), Refusal>,
    },
    /// `cancel` of the reservation named `label`.
    Cancel {
        /// The reservation's name.
        label: &'static str,
        /// Whether it was refunded.
        out: bool,
    },
    /// `set_quota(quota)`.
    SetQuota {
        /// The new quota.
        quota: ModelQuota,
    },
    /// `quota()`.
    Quota {
        /// What it returned.
        out: ModelQuota,
    },
    /// `available()`.
    Available {
        /// What it returned.
        out: u32,
    },
}

/// What one thread did, in program order.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The operations and their outcomes.
    pub events: Vec<Event>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// Calls and records `try_acquire_n(n)`.
    pub fn try_acquire_n(&mut self, s: &impl Subject, n: u32) -> Result<(), Refusal> {
        let out = s.try_acquire_n(n).map_err(refusal);
        self.events.push(Event::TryAcquire { n, out });
        out
    }

    /// Calls and records `reserve_n(n, max_wait ns)`, naming the
    /// reservation `label`.
    pub fn reserve_n<C: Clock>(
        &mut self,
        l: &RateLimiter<C>,
        label: &'static str,
        n: u32,
        max_wait: u64,
    ) -> Option<Reservation> {
        let r = l.reserve_n(n, Duration::from_nanos(max_wait));
        let out = match &r {
            Ok(r) => Ok((r.wait().as_nanos(), u128::from(r.ready_at()))),
            Err(e) => Err(refusal(*e)),
        };
        self.events.push(Event::Reserve {
            label,
            n,
            max_wait,
            out,
        });
        r.ok()
    }

    /// Calls and records `cancel` of the reservation named `label`.
    pub fn cancel<C: Clock>(
        &mut self,
        l: &RateLimiter<C>,
        label: &'static str,
        r: Reservation,
    ) -> bool {
        let out = l.cancel(r);
        self.events.push(Event::Cancel { label, out });
        out
    }

    /// Calls and records `set_quota(quota)`.
    pub fn set_quota(&mut self, s: &impl Subject, quota: Quota) {
        s.set_quota(quota);
        self.events.push(Event::SetQuota {
            quota: model_quota(quota),
        });
    }

    /// Calls and records `quota()`.
    pub fn quota(&mut self, s: &impl Subject) -> Quota {
        let q = s.quota();
        self.events.push(Event::Quota {
            out: model_quota(q),
        });
        q
    }

    /// Calls and records `available()`.
    pub fn available<C: Clock>(&mut self, l: &RateLimiter<C>) -> u32 {
        let out = l.available();
        self.events.push(Event::Available { out });
        out
    }
}

/// The model and the reservation names of one candidate order.
#[derive(Clone)]
struct Replay {
    model: Model,
    ids: Vec<(&'static str, Option<u64>)>,
}

impl Replay {
    /// Applies `event` at `now`; whether the model returns what was observed.
    fn step(&mut self, now: u128, event: &Event) -> bool {
        match event {
            Event::TryAcquire { n, out } => self.model.try_acquire(now, *n) == *out,
            Event::Reserve {
                label,
                n,
                max_wait,
                out,
            } => {
                let got = self.model.reserve(now, *n, u128::from(*max_wait));
                if let Ok(grant) = got {
                    self.ids.push((label, grant.id));
                }
                got.map(|g| (g.wait, g.ready_at)) == *out
            }
            Event::Cancel { label, out } => {
                let id = self
                    .ids
                    .iter()
                    .rev()
                    .find(|(l, _)| l == label)
                    .and_then(|(_, id)| *id);
                self.model.cancel(now, id) == *out
            }
            Event::SetQuota { quota } => {
                self.model.set_quota(now, *quota);
                true
            }
            Event::Quota { out } => self.model.quota == *out,
            Event::Available { out } => self.model.available(now) == *out,
        }
    }
}

/// Panics unless some interleaving of `threads` (each in program order),
/// after `prefix` and followed by `suffix`, all at the frozen time `now`,
/// makes the sequential model starting at `initial` return exactly the
/// recorded outcomes.
pub fn assert_linearizable(
    initial: ModelQuota,
    now: u64,
    prefix: &History,
    threads: &[History],
    suffix: &History,
) {
    let now = u128::from(now);
    let mut start = Replay {
        model: Model::new(initial),
        ids: Vec::new(),
    };
    for e in &prefix.events {
        assert!(
            start.step(now, e),
            "the setup diverged from the model at {e:?}"
        );
    }
    let mut positions = vec![0; threads.len()];
    if !search(&start, now, threads, &mut positions, suffix) {
        panic!(
            "not linearizable: no sequential order explains the outcomes\n prefix: {:?}\n threads: {:#?}\n suffix: {:?}",
            prefix.events, threads, suffix.events
        );
    }
}

fn search(
    replay: &Replay,
    now: u128,
    threads: &[History],
    positions: &mut [usize],
    suffix: &History,
) -> bool {
    let mut any_left = false;
    for i in 0..threads.len() {
        let Some(event) = threads[i].events.get(positions[i]) else {
            continue;
        };
        any_left = true;
        let mut next = replay.clone();
        if next.step(now, event) {
            positions[i] += 1;
            let found = search(&next, now, threads, positions, suffix);
            positions[i] -= 1;
            if found {
                return true;
            }
        }
    }
    if any_left {
        return false;
    }
    let mut last = replay.clone();
    suffix.events.iter().all(|e| last.step(now, e))
}

/// Spawns a thread that cancels `r` (named `label`) on `l` and returns its
/// history.
pub fn spawn_cancel(
    l: &loom::sync::Arc<RateLimiter<FixedClock>>,
    label: &'static str,
    r: Reservation,
) -> loom::thread::JoinHandle<History> {
    let l = l.clone();
    loom::thread::spawn(move || {
        let mut h = History::new();
        h.cancel(&l, label, r);
        h
    })
}
