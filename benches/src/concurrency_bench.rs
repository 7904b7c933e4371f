//! Acquire + release of one concurrency permit: limiter-concurrency's
//! `ConcurrencyLimiter` beside `tokio::sync::Semaphore` and a
//! `Mutex<usize>` counter, uncontended (1 thread) and contended (2 threads
//! on one limiter), in one run.
//!
//! Every subject is "take a permit, give it back" with a limit no thread
//! reaches, so every call takes the admission path; each returns whether it
//! was admitted and the loops assert all were. Times are wall-clock
//! nanoseconds per pair over a batch, the slowest thread's for 2 threads
//! (they start together behind a barrier); rounds interleave the subjects
//! and the median round is reported.

use std::hint::black_box;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use limiter_concurrency::ConcurrencyLimiter;
use tokio::sync::Semaphore;

/// A limit no run reaches.
pub const LIMIT: u32 = 1 << 20;

/// The subjects' names, in the order [`round`] measures them.
pub const NAMES: [&str; 3] = [
    "limiter-concurrency try_acquire + drop",
    "tokio Semaphore try_acquire + drop",
    "Mutex<usize> check, +1, -1",
];

/// One round: ns per acquire + release of each subject (in [`NAMES`]
/// order) on `threads` threads sharing one fresh limiter, `iters` each.
/// Each subject is a concrete closure, so no call is indirect.
pub fn round(threads: usize, iters: u64) -> [f64; 3] {
    let ours = Arc::new(ConcurrencyLimiter::new(LIMIT).expect("valid limit"));
    let sem = Arc::new(Semaphore::new(LIMIT as usize));
    let mutex = Arc::new(Mutex::new(0usize));
    [
        measure(threads, iters, move || ours.try_acquire().is_ok()),
        measure(threads, iters, move || sem.try_acquire().is_ok()),
        measure(threads, iters, move || {
            let mut n = mutex.lock().expect("not poisoned");
            if *n >= LIMIT as usize {
                return false;
            }
            *n += 1;
            drop(n);
            *mutex.lock().expect("not poisoned") -= 1;
            true
        }),
    ]
}

/// ns per acquire + release of `subject` on `threads` threads, `iters`
/// each (the slowest thread's time).
pub fn measure<F>(threads: usize, iters: u64, subject: F) -> f64
where
    F: Fn() -> bool + Clone + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (s, b) = (subject.clone(), barrier.clone());
            std::thread::spawn(move || {
                b.wait();
                let start = Instant::now();
                let mut admitted = 0u64;
                for _ in 0..iters {
                    admitted += u64::from(black_box(s()));
                }
                let ns = start.elapsed().as_nanos() as f64;
                assert_eq!(admitted, iters, "every acquisition admitted");
                ns
            })
        })
        .collect();
    let slowest = handles
        .into_iter()
        .map(|h| h.join().expect("no panic"))
        .fold(0.0, f64::max);
    slowest / iters as f64
}
