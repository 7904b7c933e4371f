//! Cancel safety: a dropped waiter hands its permits back to the limiter,
//! whether or not later waiters reserved after it: the state is restored
//! when nothing depends on them, and otherwise the slot goes to the next
//! waiter that would wait longer.
//!
//! Quota everywhere: 10/s, so t = 100 ms and slots are 100 ms apart. "The
//! next slot" is read with `try_acquire`, whose `RateLimited { wait }`
//! reports it without consuming anything; "the next waiter's slot" with a
//! `take` and the paused clock.

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
    limiter.take().await.unwrap();
    let start = Instant::now();
    // The waiter's slot is 100 ms; tokio's timeout drops it at 30 ms.
    let outcome = tokio::time::timeout(Duration::from_millis(30), limiter.take()).await;
    assert!(outcome.is_err(), "timed out");
    assert_eq!(start.elapsed(), Duration::from_millis(30));
    // Refunded: the next slot is again the one at 100 ms, 70 ms from now
    // (not 200 ms, as it would be had the permit stayed spent).
    assert_eq!(limiter.try_acquire(), next_slot_in(70));
    limiter.take().await.unwrap();
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
    assert_eq!(limiter.try_acquire(), next_slot_in(90));
}

#[tokio::test(start_paused = true)]
async fn an_aborted_task_gives_its_permit_back() {
    let limiter = limiter(1);
    limiter.take().await.unwrap();
    let task = tokio::spawn({
        let limiter = limiter.clone();
        async move { limiter.take().await.unwrap() }
    });
    // Let the task reserve its slot (100 ms) and go to sleep.
    tokio::task::yield_now().await;
    assert_eq!(limiter.try_acquire(), next_slot_in(200));
    task.abort();
    assert!(task.await.expect_err("aborted").is_cancelled());
    assert_eq!(limiter.try_acquire(), next_slot_in(100));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_with_a_later_reservation_hands_its_slot_on() {
    let limiter = limiter(1);
    limiter.take().await.unwrap();
    let start = Instant::now();
    let mut first = Box::pin(limiter.take()); // slot 100 ms
    assert!(futures::poll!(first.as_mut()).is_pending());
    let mut second = Box::pin(limiter.take()); // slot 200 ms
    assert!(futures::poll!(second.as_mut()).is_pending());
    drop(first);
    // The 200 ms slot is promised to `second`, so the state cannot move
    // back; the 100 ms slot is a refund. A try still sees the state...
    assert_eq!(limiter.try_acquire(), next_slot_in(300));
    // ...and the next waiter gets the refunded slot, not 300 ms.
    let third = tokio::spawn({
        let limiter = limiter.clone();
        async move {
            limiter.take().await.unwrap();
            Instant::now()
        }
    });
    second.await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    assert_eq!(
        third.await.unwrap() - start,
        Duration::from_millis(100),
        "the third waiter took the first one's slot"
    );
    assert_eq!(limiter.try_acquire(), next_slot_in(100));
}

#[tokio::test(start_paused = true)]
async fn waiters_timing_out_in_queue_order_burn_nothing() {
    // Ten tasks wait behind a drained burst of ten, each under a 1 ms
    // timeout. Equal timeouts expire in FIFO order, so every waiter but the
    // last is dropped while later ones still hold their slots.
    let limiter = AsyncLimiter::new(
        Quota::per_second(10)
            .and_then(|q| q.with_burst(10))
            .expect("valid"),
    );
    limiter.take_n(10).await.unwrap();
    let start = Instant::now();
    let waiters: Vec<_> = (0..10)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_millis(1), limiter.take()).await
            })
        })
        .collect();
    for waiter in waiters {
        assert!(waiter.await.unwrap().is_err(), "each waiter timed out");
    }
    assert_eq!(start.elapsed(), Duration::from_millis(1));
    // Every permit came back: the next take waits for the first slot after
    // the burst, 99 ms from now (not 999 ms).
    limiter.take().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn waiters_that_time_out_and_retry_lose_no_capacity() {
    // 20 tasks want one permit each under a quota of 100/s with a burst of
    // 5, and wrap every attempt in a timeout of 1 to 7 ms, retrying until
    // they get it. A waiter that times out before its slot gives the slot
    // up, and its retry (or another's) takes it back: the permits go out at
    // exactly the quota's slots, the burst at 0 and then one every 10 ms,
    // as if nobody had ever timed out.
    let limiter = AsyncLimiter::new(
        Quota::per_second(100)
            .and_then(|q| q.with_burst(5))
            .expect("valid"),
    );
    let start = Instant::now();
    let tasks: Vec<_> = (0..20u64)
        .map(|i| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let patience = Duration::from_millis(1 + i % 7);
                // Gives up after a second: a slot lost to a timeout would
                // push every retry further out.
                while start.elapsed() < Duration::from_secs(1) {
                    if tokio::time::timeout(patience, limiter.take()).await.is_ok() {
                        return Some(Instant::now() - start);
                    }
                }
                None
            })
        })
        .collect();
    let mut admitted = Vec::new();
    for task in tasks {
        admitted.push(task.await.unwrap().expect("every task got its permit"));
    }
    admitted.sort();
    let expected: Vec<_> = (0..20u64)
        .map(|k| Duration::from_millis(k.saturating_sub(4) * 10))
        .collect();
    assert_eq!(admitted, expected);
}

#[tokio::test(start_paused = true)]
async fn dropping_waiters_last_first_refunds_each_in_turn() {
    let limiter = limiter(1);
    limiter.take().await.unwrap();
    let mut first = Box::pin(limiter.take()); // slot 100 ms
    assert!(futures::poll!(first.as_mut()).is_pending());
    let mut second = Box::pin(limiter.take()); // slot 200 ms
    assert!(futures::poll!(second.as_mut()).is_pending());
    drop(second);
    assert_eq!(limiter.try_acquire(), next_slot_in(200));
    drop(first);
    assert_eq!(limiter.try_acquire(), next_slot_in(100));
}

#[tokio::test(start_paused = true)]
async fn a_future_dropped_before_its_first_poll_reserved_nothing() {
    let limiter = limiter(1);
    limiter.take().await.unwrap();
    drop(limiter.take());
    drop(limiter.take_n(1));
    assert_eq!(limiter.try_acquire(), next_slot_in(100));
}
