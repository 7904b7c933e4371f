//! `throttle`: each item of a stream waits for a permit.

use std::time::Duration;

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::stream;
use futures::{Stream, StreamExt, TryStreamExt};
use limiter_async::{AsyncLimiter, TokioClock};
use limiter_core::{AcquireError, Decide, Denial, Grant, Policy, Quota, RateLimiter, Reservation};
use tokio::time::Instant;

fn quota(per_second: u32, burst: u32) -> Quota {
    Quota::per_second(per_second)
        .and_then(|q| q.with_burst(burst))
        .expect("valid quota")
}

#[tokio::test(start_paused = true)]
async fn items_are_paced_at_their_slots() {
    // t = 100 ms, burst 2: items 0 and 1 at once, then item k at
    // (k − 1) · 100 ms.
    let limiter = AsyncLimiter::new(quota(10, 2));
    let start = Instant::now();
    let times: Vec<(u32, Duration)> = limiter
        .throttle(stream::iter(0..6))
        .map_ok(|item| (item, start.elapsed()))
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    let ms = Duration::from_millis;
    assert_eq!(
        times,
        [
            (0, ms(0)),
            (1, ms(0)),
            (2, ms(100)),
            (3, ms(200)),
            (4, ms(300)),
            (5, ms(400))
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_source_is_not_delayed() {
    // The source yields every 250 ms, slower than the 10/s quota: each item
    // finds a permit ready and passes at once (no timer).
    let limiter = AsyncLimiter::new(quota(10, 1));
    let start = Instant::now();
    let source = stream::iter(0..4).then(|item| async move {
        tokio::time::sleep(Duration::from_millis(250)).await;
        item
    });
    let times: Vec<Duration> = limiter
        .throttle(source)
        .map_ok(|_| start.elapsed())
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    let expected: Vec<Duration> = (1..=4).map(|k| Duration::from_millis(250 * k)).collect();
    assert_eq!(times, expected);
}

#[tokio::test(start_paused = true)]
async fn the_stream_shares_fifo_order_with_other_waiters() {
    // t = 100 ms, burst 1. The stream's first item takes the free permit,
    // its second reserves 100 ms; a take() then reserves 200 ms; the
    // third item, asked for after the second passes, gets 300 ms.
    let limiter = AsyncLimiter::new(quota(10, 1));
    let start = Instant::now();
    let mut throttled = limiter.throttle(stream::iter(0..3));
    assert_eq!(throttled.next().await, Some(Ok(0)));
    let mut second = Box::pin(throttled.next());
    assert!(futures::poll!(second.as_mut()).is_pending());
    let mut other = Box::pin(limiter.take());
    assert!(futures::poll!(other.as_mut()).is_pending());
    assert_eq!(second.await, Some(Ok(1)));
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    other.await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    assert_eq!(throttled.next().await, Some(Ok(2)));
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(throttled.next().await, None);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_next_keeps_the_item_and_a_dropped_stream_refunds() {
    let limiter = AsyncLimiter::new(quota(10, 1));
    let start = Instant::now();
    let mut throttled = limiter.throttle(stream::iter(0..3));
    assert_eq!(throttled.next().await, Some(Ok(0)));
    // Item 1 waits for the 100 ms slot; the `next()` future is dropped at
    // 30 ms, but the item and its slot stay in the stream.
    let outcome = tokio::time::timeout(Duration::from_millis(30), throttled.next()).await;
    assert!(outcome.is_err());
    assert_eq!(throttled.size_hint(), (2, Some(2)));
    assert_eq!(throttled.next().await, Some(Ok(1)));
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    // Item 2 waits for 200 ms; dropping the stream gives that slot back.
    let mut third = Box::pin(throttled.next());
    assert!(futures::poll!(third.as_mut()).is_pending());
    drop(third);
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(200)
        }),
        "item 2 still holds its slot"
    );
    drop(throttled);
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(100)
        }),
        "the stream's slot was given back"
    );
}

/// A GCRA limiter that answers with scripted refusals first.
struct Refusing {
    refusals: Mutex<VecDeque<Option<AcquireError>>>,
    inner: RateLimiter<TokioClock>,
}

impl Decide for Refusing {
    type Key = ();
    type Ticket = Reservation;

    fn decide(&self, _: &(), cost: u32, max_wait: Duration) -> Result<Grant<Reservation>, Denial> {
        match self.refusals.lock().unwrap().pop_front().flatten() {
            Some(error) => Err(Denial::refused(error, Policy::from(self.inner.quota()))),
            None => self.inner.decide(&(), cost, max_wait),
        }
    }
    fn cancel(&self, _: &(), reservation: Reservation) -> bool {
        self.inner.cancel(reservation)
    }
}

#[tokio::test(start_paused = true)]
async fn an_item_refused_for_good_comes_back_with_the_reason() {
    let insufficient = AcquireError::InsufficientCapacity {
        requested: 1,
        burst: 0,
    };
    let out_of_range = AcquireError::TimeOutOfRange { now: u64::MAX };
    let limiter = AsyncLimiter::from_limiter(Refusing {
        refusals: Mutex::new([None, Some(insufficient), Some(out_of_range)].into()),
        inner: RateLimiter::with_clock(quota(10, 1), TokioClock::new()),
    });
    let start = Instant::now();
    let items = tokio::time::timeout(
        Duration::from_secs(10),
        limiter
            .throttle(stream::iter(0..4))
            .map_err(|refused| (refused.item, refused.error))
            .collect::<Vec<_>>(),
    )
    .await
    .expect("the stream lost an item and hung");
    assert_eq!(
        items,
        [Ok(0), Err((1, insufficient)), Err((2, out_of_range)), Ok(3)]
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(100),
        "item 3 waited its slot"
    );
}
