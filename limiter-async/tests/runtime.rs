//! Thread-safety: the limiter is `Send + Sync`, its futures and streams are
//! `Send`, and it works on the multi-thread runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::stream;
use limiter_async::{AsyncLimiter, Throttled, TokioClock};
use limiter_core::{AcquireError, Quota};
use tokio::time::Instant;

fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
fn assert_send<T: Send>(_: &T) {}

#[test]
fn the_limiter_is_send_and_sync_and_its_futures_are_send() {
    assert_send_sync::<AsyncLimiter>();
    assert_send_sync::<TokioClock>();
    let limiter = AsyncLimiter::new(Quota::per_second(10).expect("valid quota"));
    // Futures are only built here, never polled: nothing is reserved.
    assert_send(&limiter.take());
    assert_send(&limiter.take_n(2));
    assert_send(&limiter.take_timeout(Duration::from_secs(1)));
    assert_send(&limiter.take_until(Instant::now()));
    let throttled: Throttled<stream::Iter<std::ops::Range<u8>>> =
        limiter.throttle(stream::iter(0..3));
    assert_send(&throttled);
    assert_eq!(limiter.limiter().available(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_on_worker_threads_share_one_limiter_exactly() {
    // One permit per hour and a burst of 1000: 8 tasks × 101 permits all
    // fit the burst, so nobody waits on the real clock, and no permit can
    // refill during the test. Exactly 192 remain; requests past them are
    // refused at once.
    let quota = Quota::per_hour(1)
        .and_then(|q| q.with_burst(1_000))
        .expect("valid quota");
    let limiter = AsyncLimiter::new(quota);
    let insufficient = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let limiter = limiter.clone();
        let insufficient = Arc::clone(&insufficient);
        tasks.push(tokio::spawn(async move {
            for _ in 0..100 {
                limiter.take().await.unwrap();
            }
            limiter
                .take_timeout(Duration::from_secs(1))
                .await
                .expect("within the burst");
            if let Err(AcquireError::InsufficientCapacity { .. }) = limiter.take_n(1_001).await {
                // Relaxed: a plain count, read after every task is joined.
                insufficient.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    // Relaxed: the joins ordered every increment before this read.
    assert_eq!(insufficient.load(Ordering::Relaxed), 8);
    assert_eq!(limiter.limiter().available(), 192);
    limiter.take_n(192).await.expect("the rest of the burst");
    assert!(matches!(
        limiter.take_timeout(Duration::from_secs(1)).await,
        Err(AcquireError::RateLimited { .. })
    ));
    assert_eq!(limiter.limiter().available(), 0);
}
