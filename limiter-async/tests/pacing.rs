//! Pacing in exact virtual time: sequential and concurrent `take()`.
//!
//! How the expectations are derived. Under `start_paused = true` the clock
//! only moves when every task is idle, and then jumps to the next timer
//! deadline. tokio's timer wheel counts whole milliseconds from the
//! runtime's start (which is also the limiter clock's origin here, since no
//! time passes before the limiter is made), and a deadline is rounded *up*
//! to the next millisecond. So a waiter whose slot is `s` ns wakes at exactly
//! `ceil(s / 1 ms)` ms. With quota `t` (period) and `burst`, the `k`-th
//! permit of a limiter that never runs dry has the slot `(k − burst) · t`
//! (it conforms once `now + burst · t ≥ k · t`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use limiter_async::AsyncLimiter;
use limiter_core::Quota;
use tokio::time::Instant;

fn quota(per_second: u32, burst: u32) -> Quota {
    Quota::per_second(per_second)
        .and_then(|q| q.with_burst(burst))
        .expect("valid quota")
}

/// `ceil(nanos / 1 ms)` ms: when tokio's timer fires for a slot at `nanos`.
fn tick_of(nanos: u64) -> Duration {
    Duration::from_millis(nanos.div_ceil(1_000_000))
}

#[tokio::test(start_paused = true)]
async fn a_thousand_takes_at_10k_per_second_with_burst_10_take_99_ms() {
    // t = 100 µs, burst 10. Permit k has slot (k − 10) · 100 µs; permit 1000
    // has slot 99 ms exactly, so the loop ends at 99 ms. Each 1 ms wake-up
    // is late by up to 900 µs, but the tolerance (burst 10 = 1 ms of
    // permits) lets the woken task take the 10 permits that came due
    // meanwhile at once: 10 per tick, the full rate. Relative 1 ms sleeps
    // would have taken 1 s.
    let limiter = AsyncLimiter::new(quota(10_000, 10));
    let start = Instant::now();
    for _ in 0..1_000 {
        limiter.take().await.unwrap();
    }
    assert_eq!(start.elapsed(), Duration::from_millis(99));
    // tat = 1000 · t = 100 ms, now = 99 ms: exactly empty.
    assert_eq!(limiter.limiter().available(), 0);
}

#[tokio::test(start_paused = true)]
async fn with_burst_1_a_single_task_is_held_to_two_permits_per_tick() {
    // t = 100 µs, burst 1 (no tolerance). At each tick the woken task finds
    // the limiter idle (tat < now), takes one permit at once, then reserves
    // the next for now + 100 µs, which the timer rounds to the next tick:
    // 2 permits per ms, so permits 2k and 2k+1 complete at k ms and permit
    // 1000 at 500 ms. This is why the burst must cover the timer's
    // granularity (docs/async.md).
    let limiter = AsyncLimiter::new(quota(10_000, 1));
    let start = Instant::now();
    for _ in 0..1_000 {
        limiter.take().await.unwrap();
    }
    assert_eq!(start.elapsed(), Duration::from_millis(500));
}

#[tokio::test(start_paused = true)]
async fn sub_millisecond_periods_keep_their_absolute_slots() {
    // 3,000/s: t = ceil(10^9 / 3000) = 333_334 ns, burst 3. Permit k has slot
    // (k − 3) · t ns and completes at ceil of that in ms: the rounding of one
    // wake-up never shifts the next slot. Permit 300: 297 · t = 99_000_198 ns
    // -> 100 ms.
    let q = quota(3_000, 3);
    assert_eq!(q.period_nanos(), 333_334);
    let limiter = AsyncLimiter::new(q);
    let start = Instant::now();
    let mut completed = Vec::new();
    for _ in 0..300 {
        limiter.take().await.unwrap();
        completed.push(start.elapsed());
    }
    let expected: Vec<Duration> = (1..=300u64)
        .map(|k| tick_of(k.saturating_sub(3) * 333_334))
        .collect();
    assert_eq!(completed, expected);
    assert_eq!(completed[299], Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn sixty_four_tasks_with_burst_1_reach_the_full_rate() {
    // t = 100 µs, burst 1. Each of 64 tasks holds its own slot: at time 0
    // the first permit is immediate and 64 further slots are reserved (the
    // limiter is then 6.4 ms ahead of now and stays ahead). Every wake-up
    // re-reserves at the end of the line, so the j-th permit (0-based) of
    // the 6,400 has slot j · 100 µs whatever the wake-up latency. The last,
    // j = 6399, is at 639.9 ms and fires at the 640 ms tick: 10,000/s.
    let limiter = AsyncLimiter::new(quota(10_000, 1));
    let taken = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let limiter = limiter.clone();
        let taken = Arc::clone(&taken);
        tasks.push(tokio::spawn(async move {
            for _ in 0..100 {
                limiter.take().await.unwrap();
                // Relaxed: a plain count, read after every task is joined.
                taken.fetch_add(1, Ordering::Relaxed);
            }
            Instant::now()
        }));
    }
    let mut last = start;
    for task in tasks {
        last = last.max(task.await.expect("task"));
    }
    assert_eq!(last - start, Duration::from_millis(640));
    assert_eq!(start.elapsed(), Duration::from_millis(640));
    // Relaxed: the joins above ordered every increment before this read.
    assert_eq!(taken.load(Ordering::Relaxed), 6_400);
}

#[tokio::test(start_paused = true)]
async fn a_late_wake_up_is_caught_up_only_within_the_tolerance() {
    // t = 10 ms, burst 3 (tau = 20 ms). After a 1 s pause the limiter is full
    // again but holds no more than its burst: 3 permits at once, then one
    // per 10 ms from the new now, not the 100 permits "owed" for the pause.
    let limiter = AsyncLimiter::new(quota(100, 3));
    limiter.take_n(3).await.expect("burst");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = Instant::now();
    for _ in 0..3 {
        limiter.take().await.unwrap();
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    limiter.take().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(10));
}
