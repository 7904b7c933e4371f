//! A short real-time run: threads hammer one limiter with `try_acquire`, and
//! one thread paces itself with the blocking `take`. Prints the configured
//! and achieved rates and the admitted/denied counts.
//!
//! `cargo run --release --example quickstart`

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use limiter_core::{Quota, RateLimiter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run = Duration::from_secs(1);

    // 1. Non-blocking: 4 threads try as fast as they can for one second.
    let quota = Quota::per_second(10_000)?.with_burst(100)?;
    let limiter = RateLimiter::new(quota);
    let (admitted, denied) = (AtomicU64::new(0), AtomicU64::new(0));
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                while start.elapsed() < run {
                    match limiter.try_acquire() {
                        Ok(()) => admitted.fetch_add(1, Ordering::Relaxed),
                        Err(_) => denied.fetch_add(1, Ordering::Relaxed),
                    };
                }
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let (admitted, denied) = (admitted.into_inner(), denied.into_inner());
    println!("try_acquire, 4 threads, {:.2} s:", elapsed);
    println!(
        "  configured   {:>10.0} permits/s (burst {})",
        quota.permits_per_second(),
        quota.burst()
    );
    println!(
        "  achieved     {:>10.0} permits/s",
        (admitted - u64::from(quota.burst())) as f64 / elapsed
    );
    println!("  admitted     {admitted:>10}");
    println!("  denied       {denied:>10}");

    // 2. Blocking: one thread paces itself with `take`, 200 permits at 1,000/s.
    let quota = Quota::per_second(1_000)?;
    let limiter = RateLimiter::new(quota);
    let start = Instant::now();
    for _ in 0..200 {
        limiter.take()?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!("take, 1 thread, 200 permits:");
    println!(
        "  configured   {:>10.0} permits/s",
        quota.permits_per_second()
    );
    println!("  achieved     {:>10.0} permits/s", 199.0 / elapsed);
    println!(
        "  elapsed      {:>10.1} ms (the first permit at once, then 199 paced)",
        elapsed * 1e3
    );
    Ok(())
}
