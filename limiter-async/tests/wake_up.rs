//! The two wake-ups (`WakeUp::Precise`, the default, and `WakeUp::Timer`)
//! keep every guarantee of the waiting layer.
//!
//! * Under paused time both sleep on tokio's timer, so they give the same
//!   exact virtual times (the rest of this crate's tests run on the
//!   default, `Precise`, in paused time too).
//! * In real time the precise wake-up is exercised on limiters whose clock
//!   is a frozen `ManualClock`: the slots (and so every expectation) are
//!   exact, while the waits themselves run on the real precise timer. No
//!   test asserts how long a real wait took.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use limiter_async::{AsyncLimiter, PRECISE_RANGE, WakeUp};
use limiter_core::{AcquireError, ManualClock, Quota, RateLimiter};
use tokio::time::Instant;

fn quota(per_second: u32, burst: u32) -> Quota {
    Quota::per_second(per_second)
        .and_then(|q| q.with_burst(burst))
        .expect("valid quota")
}

/// A limiter on a frozen manual clock, waited for in real time.
fn frozen(per_second: u32, wake: WakeUp) -> AsyncLimiter<RateLimiter<ManualClock>> {
    AsyncLimiter::from_limiter(RateLimiter::with_clock(
        quota(per_second, 1),
        ManualClock::new(),
    ))
    .with_wake_up(wake)
}

#[tokio::test(start_paused = true)]
async fn both_wake_ups_give_the_same_exact_virtual_times() {
    for wake in [WakeUp::Precise, WakeUp::Timer] {
        // Burst 1 at 10,000/s: two permits per 1 ms tick, 1,000 in 500 ms
        // (tests/pacing.rs derives this); burst 10: the full rate, 99 ms.
        for (burst, expected_ms) in [(1, 500), (10, 99)] {
            let limiter = AsyncLimiter::new(quota(10_000, burst)).with_wake_up(wake);
            let start = Instant::now();
            for _ in 0..1_000 {
                limiter.take().await.expect("in range");
            }
            assert_eq!(
                start.elapsed(),
                Duration::from_millis(expected_ms),
                "{wake:?}, burst {burst}"
            );
        }
    }
}

/// Takes one free permit, then checks that the wait of a 10/s, burst 1
/// limiter shrinks exactly as paused time is advanced.
async fn follows_paused_time(limiter: &AsyncLimiter) {
    limiter.take().await.expect("free");
    let limited = |ms| {
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(ms),
        })
    };
    // Frozen: the wait does not shrink until time is advanced.
    assert_eq!(limiter.try_acquire(), limited(100));
    tokio::time::advance(Duration::from_millis(60)).await;
    assert_eq!(limiter.try_acquire(), limited(40));
    // A waiter sleeps in virtual time to its slot 40 ms on (tokio's timer
    // wakes on its next millisecond tick, which a limiter made in real time
    // need not be aligned with), and the limiter saw that time pass.
    let start = Instant::now();
    limiter.take().await.expect("in range");
    let late = start.elapsed() - Duration::from_millis(40);
    assert!(
        late <= Duration::from_millis(1),
        "woke {late:?} after the slot"
    );
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(100) - late
        })
    );
}

#[tokio::test]
async fn a_limiter_made_before_pausing_follows_paused_time() {
    let limiter = AsyncLimiter::new(quota(10, 1));
    tokio::time::pause();
    follows_paused_time(&limiter).await;
}

#[tokio::test]
async fn a_limiter_made_after_pausing_follows_paused_time() {
    tokio::time::pause();
    let limiter = AsyncLimiter::new(quota(10, 1));
    follows_paused_time(&limiter).await;
}

#[tokio::test]
async fn precise_waiters_are_served_in_reservation_order() {
    // 2,000/s, burst 1, frozen clock: the first take is free, the next
    // three reserve slots 0.5, 1 and 1.5 ms ahead (all within
    // PRECISE_RANGE, so on the precise timer) in spawn order, the order a
    // current-thread runtime first polls them in.
    assert!(Duration::from_micros(1_500) < PRECISE_RANGE);
    let limiter = frozen(2_000, WakeUp::Precise);
    limiter.take().await.expect("free");
    let order = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..3)
        .map(|i| {
            let limiter = limiter.clone();
            let order = Arc::clone(&order);
            tokio::spawn(async move {
                limiter.take().await.expect("in range");
                order.lock().expect("order").push(i);
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(*order.lock().expect("order"), [0, 1, 2]);
    // Four permits granted on a frozen clock: the next slot is 2 ms out.
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(2)
        })
    );
}

#[tokio::test]
async fn a_dropped_precise_wait_gives_its_slot_back() {
    let limiter = frozen(1_000, WakeUp::Precise);
    limiter.take().await.expect("free");
    // Reserves the slot 1 ms ahead on the first poll, then is dropped.
    assert_eq!(limiter.take().now_or_never(), None);
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(1)
        }),
        "the cancelled slot is free again"
    );
    // And a timeout the slot does not fit fails at once, consuming nothing.
    assert_eq!(
        limiter.take_timeout(Duration::from_micros(999)).await,
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(1)
        })
    );
    limiter
        .take_timeout(Duration::from_millis(1))
        .await
        .expect("fits");
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(2)
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_stream_on_the_precise_timer_yields_every_item_in_order() {
    let limiter = frozen(2_000, WakeUp::Precise);
    let items: Vec<u32> = limiter
        .throttle(futures::stream::iter(0..4))
        .map(|item| item.expect("granted"))
        .collect()
        .await;
    assert_eq!(items, [0, 1, 2, 3]);
    // Slots at 0, 0.5, 1 and 1.5 ms: the next is 2 ms out.
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(2)
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timer_wake_up_waits_the_same_slots_in_real_time() {
    let limiter = frozen(1_000, WakeUp::Timer);
    for _ in 0..3 {
        limiter.take().await.expect("in range");
    }
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(3)
        })
    );
}
