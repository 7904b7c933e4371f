//! Many tasks share one limiter in real time; prints, for each case, the
//! rate the quota and tokio's timer allow next to the rate achieved.
//!
//! Run with `cargo run --release -p limiter-async --example async_pacing`
//! (about 2 s). Each task loops on `take_until(end)`, so exactly the permits
//! whose slots fall inside the window are granted: `burst + window / t` for a
//! limiter that keeps up.
//!
//! # What to expect
//!
//! tokio's timer fires on whole milliseconds (`g` = 1 ms), so a waiting task
//! wakes at most once per tick. When it wakes, it takes the permit it had
//! reserved plus the permits that came due while it slept, at most `burst`
//! of them; then it reserves its next slot. With `W` tasks waiting, at
//! most `W + burst` permits are granted per tick, so the expected rate is
//!
//! ```text
//! expected = min(rate, (W + burst) / g)
//! ```
//!
//! Equivalently: a waiter that wakes `δ` after its slot catches up on
//! everything it missed as long as `δ ≤ burst · t` (`t` the emission
//! interval, `burst · t = tau + t`); beyond that it loses `δ − burst · t` of
//! limiter time for good (GCRA never lets it catch up more, or it would admit
//! more than the quota). Three cases:
//!
//! 1. 32 tasks, 5,000/s, burst 1: 33 permits per tick cover the 5 due in one,
//!    so even without tolerance the shared rate is reached: expected 5,000/s.
//! 2. One task, 10,000/s, burst 1: 1 + 1 permits per tick of the 10 due, so
//!    expected 2,000/s.
//! 3. One task, 10,000/s, burst 20: 21 permits per tick cover the 10 due, and
//!    the catch-up window `burst · t` = 2 ms covers the 1 ms tick plus up to
//!    1 ms of wake-up jitter: expected 10,000/s.
//!
//! The formula assumes every waiter wakes on the tick after its slot. Real
//! wake-ups come later by the scheduling delay, and now and then a tick
//! later. Cases 1 and 3 absorb that: other tasks' slots, or a catch-up
//! window of 2 ms, cover it, so they land within about a percent of the
//! expected rate. Case 2 cannot: its catch-up window is one emission
//! interval (0.1 ms), so a wake-up that misses its tick loses that tick's
//! permits for good, and on a busy machine it lands below its 2,000/s. No
//! case ever exceeds its expected rate.

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

/// tokio's timer granularity: every sleep ends on a whole millisecond.
const TICK: Duration = Duration::from_millis(1);

/// The rate, in permits per second, that `tasks` tasks can sustain on
/// `quota` when each wakes at most once per timer tick: at most
/// `tasks + burst` permits per tick, and never more than the quota.
fn expected_rate(quota: Quota, tasks: usize) -> f64 {
    let per_tick = tasks as f64 + f64::from(quota.burst());
    let timer_bound = per_tick / TICK.as_secs_f64();
    quota.permits_per_second().min(timer_bound)
}

/// Prints one case: the rate expected from the quota and the timer beside the
/// achieved one, then how the expectation was derived.
fn report(name: &str, quota: Quota, tasks: usize, window: Duration, result: (u64, Duration)) {
    let (granted, elapsed) = result;
    let configured = quota.permits_per_second();
    let burst = quota.burst();
    let expected = expected_rate(quota, tasks);
    let possible = u64::from(burst) + (window.as_nanos() / u128::from(quota.period_nanos())) as u64;
    // The initial burst is a one-off; the rate is what comes after it.
    let paced = granted.saturating_sub(u64::from(burst));
    let achieved = paced as f64 / window.as_secs_f64();
    println!(
        "{name}: {tasks} task(s), {configured:.0}/s, burst {burst}: expected {expected:.0}/s, \
         achieved {achieved:.0}/s ({:.2} % of expected); {granted} of {possible} possible permits, \
         last task done after {:.1} ms",
        100.0 * achieved / expected,
        elapsed.as_secs_f64() * 1e3,
    );
    let timer_bound = (tasks as f64 + f64::from(burst)) / TICK.as_secs_f64();
    println!(
        "    expected = min(rate {configured:.0}/s, ({tasks} + {burst}) permits per 1 ms tick \
         = {timer_bound:.0}/s) = {expected:.0}/s; catch-up window burst·t = {:.1} ms",
        quota.burst_span_nanos() as f64 / 1e6,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let runs = [
        (
            "shared",
            Quota::per_second(5_000)?,
            32,
            Duration::from_millis(1_000),
        ),
        (
            "single",
            Quota::per_second(10_000)?,
            1,
            Duration::from_millis(400),
        ),
        (
            "single",
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
