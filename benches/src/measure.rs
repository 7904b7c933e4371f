//! Timing loops: a single-thread batch ([`run`]) and a crew of persistent
//! threads released together behind a barrier ([`Crew`]).
//!
//! Both return the elapsed wall-clock time of the timed part and how many
//! calls were admitted, so the caller can check, outside the timed part, that
//! every implementation did the same work.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The outcome of one timed batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Batch {
    /// Wall-clock time of the timed part (for a crew: its slowest thread).
    pub elapsed: Duration,
    /// Calls that returned `true`, over all threads.
    pub admitted: u64,
    /// Calls made by each thread.
    pub calls: u64,
}

impl Batch {
    /// Nanoseconds per call (per call of one thread, for a crew).
    pub fn ns_per_op(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.calls.max(1) as f64
    }
}

/// Calls `op` `calls` times on this thread and counts the admissions.
#[inline]
pub fn run<F: Fn() -> bool + ?Sized>(calls: u64, op: &F) -> Batch {
    let start = Instant::now();
    let mut admitted = 0u64;
    for _ in 0..calls {
        admitted += u64::from(black_box(op()));
    }
    let elapsed = start.elapsed();
    Batch {
        elapsed,
        admitted,
        calls,
    }
}

/// What the crew's threads share: the two barriers of a round, the round's
/// size, and each thread's result.
#[derive(Debug)]
struct Deck {
    start: Barrier,
    done: Barrier,
    calls: AtomicU64,
    stop: AtomicBool,
    /// Workers past the start barrier, spinning on `go`.
    ready: AtomicU64,
    /// Set once every worker is spinning, so all start within nanoseconds
    /// of each other rather than as the OS happens to wake them.
    go: AtomicBool,
    elapsed_ns: Vec<AtomicU64>,
    admitted: Vec<AtomicU64>,
}

/// `n` persistent threads that each call one operation `calls` times per
/// round, all released at once by a barrier. Made once per benchmark, so no
/// thread start-up is timed; dropping the crew ends its threads.
#[derive(Debug)]
pub struct Crew {
    deck: Arc<Deck>,
    threads: Vec<JoinHandle<()>>,
}

impl Crew {
    /// Starts `n` threads that will call `op`.
    pub fn new<F>(n: usize, op: Arc<F>) -> Crew
    where
        F: Fn() -> bool + Send + Sync + 'static + ?Sized,
    {
        let deck = Arc::new(Deck {
            start: Barrier::new(n + 1),
            done: Barrier::new(n + 1),
            calls: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            ready: AtomicU64::new(0),
            go: AtomicBool::new(false),
            elapsed_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
            admitted: (0..n).map(|_| AtomicU64::new(0)).collect(),
        });
        let threads = (0..n)
            .map(|i| {
                let deck = Arc::clone(&deck);
                let op = Arc::clone(&op);
                std::thread::spawn(move || {
                    loop {
                        deck.start.wait();
                        // Relaxed throughout: the barriers order these
                        // accesses (Barrier::wait synchronises through a
                        // mutex).
                        if deck.stop.load(Ordering::Relaxed) {
                            return;
                        }
                        // Relaxed: a count and a flag; the data they guard
                        // is ordered by the barriers.
                        deck.ready.fetch_add(1, Ordering::Relaxed);
                        while !deck.go.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                        let batch = run(deck.calls.load(Ordering::Relaxed), &*op);
                        let ns = u64::try_from(batch.elapsed.as_nanos()).unwrap_or(u64::MAX);
                        deck.elapsed_ns[i].store(ns, Ordering::Relaxed);
                        deck.admitted[i].store(batch.admitted, Ordering::Relaxed);
                        deck.done.wait();
                    }
                })
            })
            .collect();
        Crew { deck, threads }
    }

    /// One round: every thread calls the operation `calls` times, starting
    /// together. Reports the slowest thread's time and the total admitted.
    pub fn round(&self, calls: u64) -> Batch {
        // Relaxed: published to the workers by the barrier.
        self.deck.calls.store(calls, Ordering::Relaxed);
        self.deck.ready.store(0, Ordering::Relaxed);
        self.deck.go.store(false, Ordering::Relaxed);
        self.deck.start.wait();
        // Relaxed: see the workers' side.
        while self.deck.ready.load(Ordering::Relaxed) < self.threads.len() as u64 {
            std::thread::yield_now();
        }
        self.deck.go.store(true, Ordering::Relaxed);
        self.deck.done.wait();
        // Relaxed: the workers' stores happen before the `done` barrier.
        let slowest = self
            .deck
            .elapsed_ns
            .iter()
            .map(|e| e.load(Ordering::Relaxed))
            .max();
        let admitted = self
            .deck
            .admitted
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .sum();
        Batch {
            elapsed: Duration::from_nanos(slowest.unwrap_or(0)),
            admitted,
            calls,
        }
    }

    /// How many threads the crew has.
    pub fn size(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        // Relaxed: published by the barrier.
        self.deck.stop.store(true, Ordering::Relaxed);
        self.deck.start.wait();
        for thread in self.threads.drain(..) {
            // A worker that panicked already reported it on stderr.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crew_runs_every_thread_for_every_round_and_counts_admissions() {
        let calls = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&calls);
        let crew = Crew::new(
            3,
            Arc::new(move || counter.fetch_add(1, Ordering::Relaxed).is_multiple_of(2)),
        );
        let a = crew.round(100);
        let b = crew.round(10);
        assert_eq!(crew.size(), 3);
        assert_eq!((a.calls, b.calls), (100, 10));
        assert_eq!(calls.load(Ordering::Relaxed), 330);
        // Exactly half of all 330 calls were even-numbered.
        assert_eq!(a.admitted + b.admitted, 165);
    }

    #[test]
    fn run_counts_admissions() {
        let flip = AtomicBool::new(false);
        let batch = run(10, &|| !flip.fetch_xor(true, Ordering::Relaxed));
        assert_eq!(batch.admitted, 5);
        assert_eq!(batch.calls, 10);
    }
}
