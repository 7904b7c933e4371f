//! `take(&key).await` under a paused tokio clock: exact FIFO waits, timeouts
//! decided up front, and refunds when a waiting future is dropped.

use std::time::Duration;

use limiter_async::TokioClock;
use limiter_core::{AcquireError, Quota};
use limiter_keyed::{KeyedError, KeyedLimiter};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

fn limiter() -> KeyedLimiter<&'static str, TokioClock> {
    KeyedLimiter::builder(Quota::per_second(10).unwrap())
        .max_keys(2)
        .clock(TokioClock::new())
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn waiters_on_a_key_are_served_at_their_slots_in_order() {
    let l = limiter();
    let start = Instant::now();
    l.take(&"a").await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);
    l.take(&"b").await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO, "another key does not wait");
    assert_eq!(
        l.take(&"c").await,
        Err(KeyedError::TooManyKeys { max_keys: 2 })
    );
    let (x, y) = tokio::join!(l.take(&"a"), l.take(&"a"));
    x.unwrap();
    y.unwrap();
    assert_eq!(start.elapsed(), 200 * MS);
    // By now "b" is idle again and makes room for "c".
    l.take(&"c").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_decided_before_sleeping() {
    let l = limiter();
    l.take(&"a").await.unwrap();
    let start = Instant::now();
    assert_eq!(
        l.take_with_timeout(&"a", 99 * MS).await,
        Err(KeyedError::Limited(AcquireError::RateLimited {
            wait: 100 * MS
        }))
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    l.take_with_timeout(&"a", 100 * MS).await.unwrap();
    assert_eq!(start.elapsed(), 100 * MS);
    assert!(matches!(
        l.take_n(&"a", 2).await,
        Err(KeyedError::Limited(
            AcquireError::InsufficientCapacity { .. }
        ))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_wait_gives_its_permit_back() {
    let l = limiter();
    l.take(&"a").await.unwrap();
    let timed_out = tokio::time::timeout(50 * MS, l.take(&"a")).await;
    assert!(timed_out.is_err());
    // The abandoned slot at +100 ms was refunded: the next waiter gets it.
    let start = Instant::now();
    l.take(&"a").await.unwrap();
    assert_eq!(start.elapsed(), 50 * MS);
}

#[tokio::test(start_paused = true)]
async fn waiters_timing_out_in_queue_order_burn_nothing() {
    // Ten waiters on one key behind its drained burst, each under a 1 ms
    // timeout: they expire in FIFO order, so all but the last are dropped
    // while later ones hold their slots. Every permit comes back, and the
    // next waiter gets the first slot after the burst: 99 ms, not 999 ms.
    let l: KeyedLimiter<&'static str, TokioClock> =
        KeyedLimiter::builder(Quota::per_second(10).unwrap().with_burst(10).unwrap())
            .clock(TokioClock::new())
            .build()
            .unwrap();
    let l = std::sync::Arc::new(l);
    l.take_n(&"a", 10).await.unwrap();
    let start = Instant::now();
    let waiters: Vec<_> = (0..10)
        .map(|_| {
            let l = std::sync::Arc::clone(&l);
            tokio::spawn(async move { tokio::time::timeout(MS, l.take(&"a")).await })
        })
        .collect();
    for waiter in waiters {
        assert!(waiter.await.unwrap().is_err(), "each waiter timed out");
    }
    l.take(&"a").await.unwrap();
    assert_eq!(start.elapsed(), 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_times_out_and_retries_keeps_its_place() {
    // Two waiters queue; the first gives up before its slot and retries at
    // once: it gets its own slot back, not one behind the second waiter.
    let l = std::sync::Arc::new(limiter());
    l.take(&"a").await.unwrap();
    let start = Instant::now();
    let waiter = || {
        let l = std::sync::Arc::clone(&l);
        tokio::spawn(async move { l.take(&"a").await.map(|()| start.elapsed()) })
    };
    let first = waiter();
    tokio::task::yield_now().await; // the first reserves 100 ms
    let second = waiter();
    tokio::task::yield_now().await; // the second reserves 200 ms
    tokio::time::sleep(10 * MS).await;
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    l.take(&"a").await.unwrap();
    assert_eq!(start.elapsed(), 100 * MS);
    assert_eq!(second.await.unwrap(), Ok(200 * MS));
}
