//! Waiting on every algorithm through the one `Decide` trait, under paused
//! time. tokio fires timers on whole milliseconds (deadlines rounded up), so
//! the expected instants below are the slots rounded up to the millisecond.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use limiter_async::{AsyncLimiter, TokioClock};
use limiter_core::{AcquireError, Metered, PriorityLimiter, Quota, SlidingWindow, WarmUpLimiter};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn a_sliding_window_is_waited_for_by_exact_retries() {
    let window = SlidingWindow::with_clock(4, Duration::from_secs(1), TokioClock::new()).unwrap();
    let limiter = AsyncLimiter::from_limiter(window);
    let start = Instant::now();
    let mut done = vec![];
    for _ in 0..7 {
        limiter.take().await.unwrap();
        done.push(start.elapsed());
    }
    // Window 0 takes 4. In window 1 (prev = 4) the k-th more needs
    // 4·(1 s − x) + k·1 s ≤ 4 s ⇔ x ≥ k/4 s: at 1.25, 1.5, 1.75 s.
    assert_eq!(done, [0, 0, 0, 0, 1_250, 1_500, 1_750].map(|m| m * MS));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_on_a_window_fails_at_once_when_the_wait_exceeds_it() {
    let window = SlidingWindow::with_clock(2, Duration::from_secs(1), TokioClock::new()).unwrap();
    let limiter = AsyncLimiter::from_limiter(window);
    limiter.take_n(2).await.unwrap();
    let start = Instant::now();
    assert_eq!(
        limiter.take_timeout(1_499 * MS).await,
        Err(AcquireError::RateLimited { wait: 1_500 * MS })
    );
    assert_eq!(start.elapsed(), Duration::ZERO, "decided without sleeping");
    assert_eq!(limiter.take_timeout(1_500 * MS).await, Ok(()));
    assert_eq!(start.elapsed(), 1_500 * MS);
}

#[tokio::test(start_paused = true)]
async fn a_warm_up_limiter_reserves_fifo_slots() {
    let quota = Quota::per_second(2).unwrap();
    let warm = WarmUpLimiter::with_clock(quota, Duration::from_secs(4), TokioClock::new()).unwrap();
    let limiter = AsyncLimiter::from_limiter(warm);
    let start = Instant::now();
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                limiter.take().await.unwrap();
                start.elapsed()
            })
        })
        .collect();
    let mut done = vec![];
    for t in tasks {
        done.push(t.await.unwrap());
    }
    // Guava's sequence from cold, cumulated: 0, 1.375, 2.5, 3.375, 4 s.
    assert_eq!(done, [0, 1_375, 2_500, 3_375, 4_000].map(|m| m * MS));
}

#[tokio::test(start_paused = true)]
async fn a_low_priority_class_waits_without_taking_class_zeros_headroom() {
    let quota = Quota::per_second(10).unwrap().with_burst(10).unwrap();
    let tiers =
        Arc::new(PriorityLimiter::with_clock(quota, &[1.0, 0.5], TokioClock::new()).unwrap());
    let low = AsyncLimiter::from_limiter(tiers.class(1).unwrap());
    let start = Instant::now();
    for _ in 0..7 {
        low.take().await.unwrap();
    }
    // 5 at once (its half of the burst), then one per 100 ms.
    assert_eq!(start.elapsed(), 200 * MS);
    assert_eq!(tiers.available(0), Ok(5), "class 0's headroom is intact");
}

#[tokio::test(start_paused = true)]
async fn a_metered_limiter_counts_async_waits() {
    let core =
        limiter_core::RateLimiter::with_clock(Quota::per_second(10).unwrap(), TokioClock::new());
    let limiter = AsyncLimiter::from_limiter(Metered::new(core));
    for _ in 0..3 {
        limiter.take().await.unwrap();
    }
    let stats = limiter.limiter().stats();
    // The second and third each reserved a 100 ms wait.
    assert_eq!(
        (stats.allowed, stats.delayed, stats.wait_total),
        (3, 2, 200 * MS)
    );
}

#[tokio::test(start_paused = true)]
async fn a_throttled_stream_retries_on_a_window() {
    let window = SlidingWindow::with_clock(2, Duration::from_secs(1), TokioClock::new()).unwrap();
    let limiter = AsyncLimiter::from_limiter(window);
    let start = Instant::now();
    let times: Vec<Duration> = limiter
        .throttle(futures::stream::iter(0..4))
        .map(|_| start.elapsed())
        .collect()
        .await;
    // Window 1: 2·(1 s − x) + k·1 s ≤ 2 s ⇔ x ≥ k/2 s.
    assert_eq!(times, [0, 0, 1_500, 2_000].map(|m| m * MS));
}
