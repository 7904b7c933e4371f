//! Tasks share one limiter in real time; prints, for each case and for both
//! wake-ups, the configured rate, the rate the quota and the wake-up allow,
//! and the achieved rate, so what is physics and what is the library can be
//! read side by side.
//!
//! Run with `cargo run --release -p limiter-async --example async_pacing`
//! (about 3 s). Each task loops on `take_until(end)`, so exactly the permits
//! whose slots fall inside the window are granted: `burst + window / t` for a
//! limiter that keeps up.
//!
//! # What to expect
//!
//! A waiter that wakes `δ` after its slot catches up on everything it missed
//! as long as `δ ≤ burst · t` (`t` the emission interval, `burst · t = tau +
//! t`, the catch-up window); beyond that it loses `δ − burst · t` of limiter
//! time for good (GCRA never lets it catch up more, or it would admit more
//! than the quota). So the rate depends on how late wake-ups are:
//!
//! * **`WakeUp::Timer`** (tokio's timer) fires on whole milliseconds
//!   (`g` = 1 ms), so a waiting task wakes at most once per tick and takes
//!   the permit it had reserved plus at most `burst` more. With `W` tasks
//!   waiting, at most `W + burst` permits go out per tick:
//!
//!   ```text
//!   expected = min(rate, (W + burst) / g)
//!   ```
//!
//! * **`WakeUp::Precise`** (the default) wakes waiters that tokio's
//!   lateness would cost rate (wait and catch-up window both under 2 ms)
//!   from a timer thread within tens of microseconds of the slot: the full
//!   rate whenever that lateness (plus the loop's own work) stays below the
//!   catch-up window, which the example prints. Waiters with a wider window
//!   stay on tokio's timer.
//!
//! The cases:
//!
//! 1. 32 tasks, 5,000/s, burst 1: 33 permits per tick cover the 5 due in
//!    one, so both wake-ups reach 5,000/s.
//! 2. One task, 10,000/s, burst 1: the timer allows 1 + 1 permits per tick,
//!    2,000/s; the precise wake-up has a 100 µs window and reaches (nearly)
//!    10,000/s.
//! 3. One task, 10,000/s, burst 20: a 2 ms window covers the tick plus up
//!    to 1 ms of jitter: both reach 10,000/s, both on tokio's timer.
//! 4. One task, 100,000/s, burst 1: the window is 10 µs, about what one
//!    wake-up of a thread costs on a virtual machine, so even the precise
//!    wake-up falls short (by its measured lateness); the timer allows
//!    2,000/s. Use a burst there (case 3's rule: `burst ≥ rate · (g + j)`).
//!
//! No case ever exceeds its configured rate.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use limiter_async::{AsyncLimiter, WakeUp};
use limiter_core::Quota;
use tokio::time::Instant;

/// Runs `tasks` tasks taking permits from one limiter for `window`; returns
/// the permits granted and the time until the last task finished.
async fn run(quota: Quota, wake: WakeUp, tasks: usize, window: Duration) -> (u64, Duration) {
    let limiter = AsyncLimiter::new(quota).with_wake_up(wake);
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
/// `tasks + burst` permits per tick, and never more than the quota. With the
/// precise wake-up the bound is the quota itself (while wake-ups land within
/// the catch-up window).
fn expected_rate(quota: Quota, wake: WakeUp, tasks: usize) -> f64 {
    match wake {
        WakeUp::Timer => {
            let per_tick = tasks as f64 + f64::from(quota.burst());
            quota
                .permits_per_second()
                .min(per_tick / TICK.as_secs_f64())
        }
        WakeUp::Precise => quota.permits_per_second(),
    }
}

/// Prints one case: configured, expected and achieved rates, then where the
/// expectation comes from.
fn report(quota: Quota, wake: WakeUp, tasks: usize, window: Duration, result: (u64, Duration)) {
    let (granted, elapsed) = result;
    let configured = quota.permits_per_second();
    let burst = quota.burst();
    let expected = expected_rate(quota, wake, tasks);
    let possible = u64::from(burst) + (window.as_nanos() / u128::from(quota.period_nanos())) as u64;
    // The initial burst is a one-off; the rate is what comes after it.
    let paced = granted.saturating_sub(u64::from(burst));
    let achieved = paced as f64 / window.as_secs_f64();
    let window_us = quota.burst_span_nanos() as f64 / 1e3;
    println!(
        "{tasks:>2} task(s), burst {burst:>2}, {wake:<7?}: configured {configured:>6.0}/s, \
         expected {expected:>6.0}/s, achieved {achieved:>6.0}/s ({:>6.2} % of configured); \
         {granted} of {possible} permits, done after {:.1} ms",
        100.0 * achieved / configured,
        elapsed.as_secs_f64() * 1e3,
    );
    match wake {
        WakeUp::Timer => {
            let timer_bound = (tasks as f64 + f64::from(burst)) / TICK.as_secs_f64();
            println!(
                "    expected = min(rate, ({tasks} + {burst}) permits per 1 ms tick = {timer_bound:.0}/s); \
                 catch-up window burst·t = {window_us:.0} µs"
            );
        }
        WakeUp::Precise => println!(
            "    expected = rate while each wake-up lands within the catch-up window \
             burst·t = {window_us:.0} µs of its slot"
        ),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let window = Duration::from_millis(400);
    let runs = [
        (Quota::per_second(5_000)?, 32),
        (Quota::per_second(10_000)?, 1),
        (Quota::per_second(10_000)?.with_burst(20)?, 1),
        (Quota::per_second(100_000)?, 1),
    ];
    for (quota, tasks) in runs {
        for wake in [WakeUp::Timer, WakeUp::Precise] {
            let result = run(quota, wake, tasks, window).await;
            report(quota, wake, tasks, window, result);
        }
    }
    Ok(())
}
