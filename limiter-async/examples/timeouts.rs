//! Waiters that give up: how much of the quota is still used when half of
//! all takes race a short timeout, on tokio's multi-thread runtime in real
//! time.
//!
//! 64 tasks loop for 2 s on one limiter of 1,000 permits/s (burst 10).
//! Every other take is wrapped in `tokio::time::timeout` of 0.5 to 2 ms, so
//! waiters are dropped all the time, most of them while later waiters hold
//! later slots. A dropped waiter's slot goes back to the limiter (restored,
//! or handed to the next waiter), so the permits used should be the quota's
//! capacity over the run: burst + rate × duration.
//!
//! ```sh
//! cargo run --release -p limiter-async --example timeouts
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use limiter_async::AsyncLimiter;
use limiter_core::Quota;
use tokio::time::Instant;

const TASKS: u64 = 64;
const RUN: Duration = Duration::from_secs(2);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = Quota::per_second(1_000)?.with_burst(10)?;
    let limiter = AsyncLimiter::new(quota);
    let used = Arc::new(AtomicU64::new(0));
    let gave_up = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + RUN;
    let tasks: Vec<_> = (0..TASKS)
        .map(|id| {
            let (limiter, used, gave_up) = (limiter.clone(), used.clone(), gave_up.clone());
            tokio::spawn(async move {
                let mut k = id;
                loop {
                    k = k
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let took = if k >> 63 == 0 {
                        let patience = Duration::from_micros(500 + (k >> 40) % 1_500);
                        match tokio::time::timeout(patience, limiter.take_until(end)).await {
                            Ok(result) => result.is_ok(),
                            Err(_) => {
                                gave_up.fetch_add(1, Ordering::Relaxed);
                                false
                            }
                        }
                    } else {
                        limiter.take_until(end).await.is_ok()
                    };
                    if Instant::now() >= end {
                        return;
                    }
                    if took {
                        used.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await?;
    }
    let used = used.load(Ordering::Relaxed);
    let capacity = u64::from(quota.burst()) + RUN.as_millis() as u64;
    println!(
        "{TASKS} tasks, 1000/s burst 10, {RUN:?}, half of the takes under a 0.5-2 ms timeout:"
    );
    println!(
        "  waiters that gave up  {:>6}",
        gave_up.load(Ordering::Relaxed)
    );
    println!(
        "  permits used          {used:>6} of {capacity} the quota allows ({:.1} %)",
        100.0 * used as f64 / capacity as f64
    );
    Ok(())
}
