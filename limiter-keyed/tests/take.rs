//! `take(&key).await` under a paused tokio clock: exact FIFO waits, timeouts
//! and deadlines decided up front, and refunds when a waiting future is
//! dropped.

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
        l.take_timeout(&"a", 99 * MS).await,
        Err(KeyedError::Limited(AcquireError::RateLimited {
            wait: 100 * MS
        }))
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    l.take_timeout(&"a", 100 * MS).await.unwrap();
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

fn burst(b: u32) -> KeyedLimiter<&'static str, TokioClock> {
    KeyedLimiter::builder(Quota::per_second(10).unwrap().with_burst(b).unwrap())
        .max_keys(2)
        .clock(TokioClock::new())
        .build()
        .unwrap()
}

fn limited(wait: Duration) -> Result<(), KeyedError> {
    Err(KeyedError::Limited(AcquireError::RateLimited { wait }))
}

#[tokio::test(start_paused = true)]
async fn take_n_timeout_decides_up_front_and_consumes_nothing_when_too_late() {
    let l = burst(4);
    l.take_n_timeout(&"a", 4, Duration::ZERO).await.unwrap();
    let start = Instant::now();
    assert_eq!(l.take_n_timeout(&"a", 2, 199 * MS).await, limited(200 * MS));
    assert_eq!(start.elapsed(), Duration::ZERO, "refused without sleeping");
    // Nothing was consumed: two permits still come at +200 ms, not +400 ms.
    l.take_n_timeout(&"a", 2, 200 * MS).await.unwrap();
    assert_eq!(start.elapsed(), 200 * MS);
    assert!(matches!(
        l.take_n_timeout(&"a", 5, Duration::MAX).await,
        Err(KeyedError::Limited(AcquireError::InsufficientCapacity {
            requested: 5,
            burst: 4
        }))
    ));
    // Another key is unaffected by the first key's waits.
    l.take_n_timeout(&"b", 4, Duration::ZERO).await.unwrap();
    assert_eq!(start.elapsed(), 200 * MS);
}

#[tokio::test(start_paused = true)]
async fn take_until_waits_for_a_slot_at_or_before_the_deadline() {
    let l = limiter();
    let start = Instant::now();
    let deadline = start + 150 * MS;
    l.take_until(&"a", deadline).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);
    l.take_until(&"a", deadline).await.unwrap();
    assert_eq!(start.elapsed(), 100 * MS);
    // The next slot (+200 ms) is past the deadline: refused at once with
    // the wait it would need, measured from now.
    assert_eq!(l.take_until(&"a", deadline).await, limited(100 * MS));
    assert_eq!(start.elapsed(), 100 * MS);
    // A deadline a nanosecond before the slot does not; one exactly at it
    // does.
    let ns = Duration::from_nanos(1);
    assert_eq!(
        l.take_until(&"a", start + 200 * MS - ns).await,
        limited(100 * MS)
    );
    l.take_until(&"a", start + 200 * MS).await.unwrap();
    assert_eq!(start.elapsed(), 200 * MS);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_already_passed_acts_as_a_zero_timeout() {
    let l = limiter();
    let past = Instant::now();
    tokio::time::advance(500 * MS).await;
    let start = Instant::now();
    // A permit available now is taken...
    l.take_until(&"a", past).await.unwrap();
    // ...one that would need any wait is refused at once, consuming nothing.
    assert_eq!(l.take_until(&"a", past).await, limited(100 * MS));
    assert_eq!(l.take_n_until(&"a", 1, past).await, limited(100 * MS));
    assert_eq!(start.elapsed(), Duration::ZERO);
    l.take(&"a").await.unwrap();
    assert_eq!(start.elapsed(), 100 * MS, "the refusals took no slot");
}

#[tokio::test(start_paused = true)]
async fn take_n_until_takes_all_n_or_nothing_by_the_deadline() {
    let l = burst(2);
    l.take_n(&"a", 2).await.unwrap();
    let start = Instant::now();
    let soon = start + 100 * MS;
    assert_eq!(l.take_n_until(&"a", 2, soon).await, limited(200 * MS));
    assert_eq!(start.elapsed(), Duration::ZERO);
    l.take_n_until(&"a", 1, soon).await.unwrap();
    assert_eq!(start.elapsed(), 100 * MS);
    assert!(matches!(
        l.take_n_until(&"a", 3, start + Duration::from_secs(60))
            .await,
        Err(KeyedError::Limited(
            AcquireError::InsufficientCapacity { .. }
        ))
    ));
}

#[tokio::test(start_paused = true)]
async fn the_deadline_variants_refuse_a_new_key_when_full_at_once() {
    let l = limiter();
    l.take(&"a").await.unwrap();
    l.take(&"b").await.unwrap();
    let start = Instant::now();
    let later = start + Duration::from_secs(10);
    assert_eq!(
        l.take_until(&"c", later).await,
        Err(KeyedError::TooManyKeys { max_keys: 2 })
    );
    assert_eq!(
        l.take_n_timeout(&"c", 1, Duration::from_secs(10)).await,
        Err(KeyedError::TooManyKeys { max_keys: 2 })
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_take_until_gives_its_permit_back() {
    let l = limiter();
    l.take(&"a").await.unwrap();
    let start = Instant::now();
    let abandoned =
        tokio::time::timeout(50 * MS, l.take_until(&"a", start + Duration::from_secs(1))).await;
    assert!(abandoned.is_err());
    // The slot at +100 ms was refunded: the next waiter gets it.
    l.take(&"a").await.unwrap();
    assert_eq!(start.elapsed(), 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_the_wait_of_a_rate_limited_refusal_only() {
    let l = limiter();
    l.take(&"a").await.unwrap();
    let refused = l.take_timeout(&"a", 30 * MS).await.unwrap_err();
    assert_eq!(refused.retry_after(), Some(100 * MS));
    tokio::time::advance(40 * MS).await;
    let refused = l.take_until(&"a", Instant::now()).await.unwrap_err();
    assert_eq!(refused.retry_after(), Some(60 * MS));
    let too_big = l.take_n(&"a", 2).await.unwrap_err();
    assert_eq!(too_big.retry_after(), None);
    l.take(&"b").await.unwrap();
    let full = l.take_until(&"c", Instant::now()).await.unwrap_err();
    assert_eq!(full, KeyedError::TooManyKeys { max_keys: 2 });
    assert_eq!(full.retry_after(), None);
    let out_of_range = KeyedError::Limited(AcquireError::TimeOutOfRange { now: u64::MAX });
    assert_eq!(out_of_range.retry_after(), None);
}
