//! Deadlines are decided against the slot before anything is consumed.

use std::time::Duration;

use futures::FutureExt;
use limiter_async::{AsyncLimiter, TokioClock};
use limiter_core::{AcquireError, Quota};
use tokio::time::Instant;

fn quota(per_second: u32, burst: u32) -> Quota {
    Quota::per_second(per_second)
        .and_then(|q| q.with_burst(burst))
        .expect("valid quota")
}

fn limited(ms: u64) -> Result<(), AcquireError> {
    Err(AcquireError::RateLimited {
        wait: Duration::from_millis(ms),
    })
}

#[tokio::test(start_paused = true)]
async fn a_timeout_shorter_than_the_slot_fails_at_once_and_consumes_nothing() {
    // t = 100 ms, burst 2; emptied at 0, so the next slot is 100 ms away.
    let limiter = AsyncLimiter::new(quota(10, 2));
    limiter.take_n(2).await.expect("burst");
    let start = Instant::now();
    let refused = limiter
        .take_timeout(Duration::from_millis(99))
        .now_or_never();
    assert_eq!(refused, Some(limited(100)), "decided on the first poll");
    assert_eq!(start.elapsed(), Duration::ZERO);
    // Capacity untouched: nothing available, and the next slot is still the
    // one 100 ms away (a consumed permit would have pushed it to 200 ms).
    assert_eq!(limiter.limiter().available(), 0);
    assert_eq!(limiter.try_acquire(), limited(100));
    // A timeout that the slot fits always succeeds, at the slot.
    limiter
        .take_timeout(Duration::from_millis(100))
        .await
        .expect("slot fits");
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn take_until_compares_the_slot_with_the_deadline() {
    let limiter = AsyncLimiter::new(quota(10, 1));
    let start = Instant::now();
    // A deadline already passed acts as a zero timeout: a free permit is
    // still taken.
    limiter.take_until(start).await.expect("free permit");
    assert_eq!(
        limiter.take_until(start + Duration::from_millis(99)).await,
        limited(100)
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    limiter
        .take_until(start + Duration::from_millis(100))
        .await
        .expect("slot on the deadline");
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    // Passed deadline, no free permit: refused with the wait, at once.
    assert_eq!(limiter.take_until(start).await, limited(100));
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn unbounded_timeouts_and_deadlines_do_not_panic() {
    let limiter = AsyncLimiter::new(quota(10, 1));
    let start = Instant::now();
    limiter.take().await.unwrap();
    limiter.take_timeout(Duration::MAX).await.expect("no limit");
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    let far = TokioClock::with_origin(start).instant_at(u64::MAX);
    limiter.take_until(far).await.expect("no limit");
    assert_eq!(start.elapsed(), Duration::from_millis(200));
}

#[tokio::test(start_paused = true)]
async fn more_than_the_burst_is_refused_at_once_by_every_method() {
    let limiter = AsyncLimiter::new(quota(10, 2));
    let insufficient = Err(AcquireError::InsufficientCapacity {
        requested: 3,
        burst: 2,
    });
    assert_eq!(limiter.take_n(3).now_or_never(), Some(insufficient));
    assert_eq!(limiter.limiter().available(), 2, "nothing consumed");
    // Zero permits: granted at once, nothing consumed.
    assert_eq!(limiter.take_n(0).now_or_never(), Some(Ok(())));
    assert_eq!(limiter.limiter().available(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_take_whose_slot_is_now_completes_on_the_first_poll() {
    // `now_or_never` polls once with a no-op waker: Some means the future
    // completed in its first poll. (That alone would not tell a timer for
    // "now" apart from no timer; `a_free_permit_needs_no_runtime_at_all`
    // does, since building a Sleep outside a runtime panics.)
    let limiter = AsyncLimiter::new(quota(10, 2));
    assert_eq!(limiter.take().now_or_never(), Some(Ok(())));
    assert_eq!(limiter.take_n(1).now_or_never(), Some(Ok(())));
    // The third must wait, so its first poll is pending; dropping it hands
    // the permit back.
    assert_eq!(limiter.take().now_or_never(), None);
    assert_eq!(limiter.try_acquire(), limited(100));
}

#[test]
fn a_free_permit_needs_no_runtime_at_all() {
    // Outside any runtime: no timer is touched when the slot is now, so a
    // plain executor completes the take. One permit per hour, so the real
    // time this test takes cannot refill it.
    let limiter = AsyncLimiter::new(Quota::per_hour(1).expect("valid quota"));
    assert_eq!(futures::executor::block_on(limiter.take()), Ok(()));
    assert!(limiter.try_acquire().is_err());
}
