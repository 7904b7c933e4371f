//! Cancel safety: a dropped waiter hands its permits back when no later
//! reservation depends on them.
//!
//! Quota everywhere: 10/s, so t = 100 ms and slots are 100 ms apart. "The
//! next slot" is read with `try_take`, whose `RateLimited { wait }` reports
//! it without consuming anything.

use std::time::Duration;

use limiter_async::AsyncLimiter;
use limiter_core::{AcquireError, Quota};
use tokio::time::Instant;

fn limiter(burst: u32) -> AsyncLimiter {
    AsyncLimiter::new(
        Quota::per_second(10)
            .and_then(|q| q.with_burst(burst))
            .expect("valid quota"),
    )
}

fn next_slot_in(ms: u64) -> Result<(), AcquireError> {
    Err(AcquireError::RateLimited {
        wait: Duration::from_millis(ms),
    })
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_last_waiter_gives_its_permit_back() {
    let limiter = limiter(1);
    limiter.take().await;
    let start = Instant::now();
    // The waiter's slot is 100 ms; tokio's timeout drops it at 30 ms.
    let outcome = tokio::time::timeout(Duration::from_millis(30), limiter.take()).await;
    assert!(outcome.is_err(), "timed out");
    assert_eq!(start.elapsed(), Duration::from_millis(30));
    // Refunded: the next slot is again the one at 100 ms, 70 ms from now
    // (not 200 ms, as it would be had the permit stayed spent).
    assert_eq!(limiter.try_take(), next_slot_in(70));
    limiter.take().await;
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn a_select_that_drops_a_take_n_refunds_all_its_permits() {
    let limiter = limiter(3);
    limiter.take_n(3).await.expect("burst");
    let start = Instant::now();
    tokio::select! {
        _ = limiter.take_n(3) => panic!("the slot is 300 ms away"),
        () = tokio::time::sleep(Duration::from_millis(10)) => {}
    }
    assert_eq!(start.elapsed(), Duration::from_millis(10));
    // All three back: one permit's slot is 100 ms after the start.
    assert_eq!(limiter.try_take(), next_slot_in(90));
}

#[tokio::test(start_paused = true)]
async fn an_aborted_task_gives_its_permit_back() {
    let limiter = limiter(1);
    limiter.take().await;
    let task = tokio::spawn({
        let limiter = limiter.clone();
        async move { limiter.take().await }
    });
    // Let the task reserve its slot (100 ms) and go to sleep.
    tokio::task::yield_now().await;
    assert_eq!(limiter.try_take(), next_slot_in(200));
    task.abort();
    assert!(task.await.expect_err("aborted").is_cancelled());
    assert_eq!(limiter.try_take(), next_slot_in(100));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_with_a_later_reservation_keeps_its_permit_spent() {
    let limiter = limiter(1);
    limiter.take().await;
    let start = Instant::now();
    let mut first = Box::pin(limiter.take()); // slot 100 ms
    assert!(futures::poll!(first.as_mut()).is_pending());
    let mut second = Box::pin(limiter.take()); // slot 200 ms
    assert!(futures::poll!(second.as_mut()).is_pending());
    drop(first);
    // Giving the 100 ms slot back would need moving the 200 ms one forward,
    // which is promised to `second`: the permit stays spent (stricter, never
    // looser) and the next slot is still 300 ms.
    assert_eq!(limiter.try_take(), next_slot_in(300));
    second.await;
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    // Once the later waiter is gone too, nothing is left to give back: its
    // own permit was used. The next slot is 300 ms from the start.
    assert_eq!(limiter.try_take(), next_slot_in(100));
}

#[tokio::test(start_paused = true)]
async fn dropping_waiters_last_first_refunds_each_in_turn() {
    let limiter = limiter(1);
    limiter.take().await;
    let mut first = Box::pin(limiter.take()); // slot 100 ms
    assert!(futures::poll!(first.as_mut()).is_pending());
    let mut second = Box::pin(limiter.take()); // slot 200 ms
    assert!(futures::poll!(second.as_mut()).is_pending());
    drop(second);
    assert_eq!(limiter.try_take(), next_slot_in(200));
    drop(first);
    assert_eq!(limiter.try_take(), next_slot_in(100));
}

#[tokio::test(start_paused = true)]
async fn a_future_dropped_before_its_first_poll_reserved_nothing() {
    let limiter = limiter(1);
    limiter.take().await;
    drop(limiter.take());
    drop(limiter.take_n(1));
    assert_eq!(limiter.try_take(), next_slot_in(100));
}
