//! Many tasks share one limiter in real time; prints the achieved rate next
//! to the configured one.
//!
//! Run with `cargo run --release -p limiter-async --example async_pacing`
//! (about 2 s). Each task loops on `take_until(end)`, so exactly the permits
//! whose slots fall inside the window are granted: `burst + window / t` for a
//! limiter that keeps up. Three runs:
//!
//! 1. 32 tasks, 5,000/s, burst 1: each task holds its own slot, so even
//!    without tolerance the shared rate is reached despite the 1 ms timer.
//! 2. One task, 10,000/s, burst 1: it wakes at most once per timer tick and
//!    can take only 1 + 1 permits there, so it gets about 2,000/s.
//! 3. One task, 10,000/s, burst 20: the burst covers a tick (10 permits) plus
//!    wake-up jitter, so the single task reaches the full rate.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use limiter_async::AsyncLimiter;
use limiter_core::Quota;
use tokio::time::Instant;

/// Runs `tasks` tasks taking permits from one limiter for `window`; returns
/// the permits granted and the time until the last task finished.
async fn run(quota: Quota, tasks: usize, window: Duration) -> (u64, Duration) {
    let limiter = AsyncLimiter::new(quota);
    let granted = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + window;
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let limiter = limiter.clone();
        let granted = Arc::clone(&granted);
        handles.push(tokio::spawn(async move {
            // Refused at once (consuming nothing) when the slot lies past
            // the end of the window. A task that wakes after `end` stops
            // there: a passed deadline would still take a free permit.
            while Instant::now() < end && limiter.take_until(end).await.is_ok() {
                // Relaxed: a plain count, read after every task is joined.
                granted.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for handle in handles {
        handle.await.expect("task panicked");
    }
    // Relaxed: the joins ordered every increment before this read.
    (granted.load(Ordering::Relaxed), start.elapsed())
}

fn report(name: &str, quota: Quota, tasks: usize, window: Duration, result: (u64, Duration)) {
    let (granted, elapsed) = result;
    let configured = quota.permits_per_second();
    let ideal =
        u64::from(quota.burst()) + (window.as_nanos() / u128::from(quota.period_nanos())) as u64;
    // The initial burst is a one-off; the rate is what comes after it.
    let paced = granted.saturating_sub(u64::from(quota.burst()));
    let achieved = paced as f64 / window.as_secs_f64();
    println!(
        "{name}: {tasks:>2} task(s), burst {:>2}: configured {configured:>8.0}/s, achieved {achieved:>8.0}/s \
         ({:>5.1}%), {granted} permits of {ideal} possible, last task done after {:.1} ms",
        quota.burst(),
        100.0 * achieved / configured,
        elapsed.as_secs_f64() * 1e3,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let runs = [
        (
            "shared  ",
            Quota::per_second(5_000)?,
            32,
            Duration::from_millis(1_000),
        ),
        (
            "single  ",
            Quota::per_second(10_000)?,
            1,
            Duration::from_millis(400),
        ),
        (
            "single  ",
            Quota::per_second(10_000)?.with_burst(20)?,
            1,
            Duration::from_millis(400),
        ),
    ];
    for (name, quota, tasks, window) in runs {
        let result = run(quota, tasks, window).await;
        report(name, quota, tasks, window, result);
    }
    Ok(())
}
