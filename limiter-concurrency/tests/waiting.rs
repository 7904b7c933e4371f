//! The public API under paused time: waiting, deadlines, cancellation, queue
//! order and capacity, limit changes. Every expectation is exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use limiter_concurrency::{AcquireError, ConcurrencyLimiter, NoPermit, QueueOrder};
use tokio::time::{Instant, sleep};

fn limiter(limit: u32, capacity: usize, order: QueueOrder) -> ConcurrencyLimiter {
    ConcurrencyLimiter::builder(limit)
        .queue(capacity, order)
        .build()
        .unwrap()
}

/// Lets every ready task run (paused time does not advance while tasks run).
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_released_permit_goes_to_the_waiter_at_the_release_instant() {
    let l = limiter(1, 4, QueueOrder::Fifo);
    let held = l.try_acquire_owned().unwrap();
    let start = Instant::now();
    let waiter = tokio::spawn({
        let l = l.clone();
        async move {
            let p = l.acquire().await.unwrap();
            let at = start.elapsed();
            drop(p);
            at
        }
    });
    settle().await;
    assert_eq!(l.waiting(), 1);
    // A newcomer does not overtake the waiter, even with a permit free for a
    // moment: the permit changes hands without the count moving.
    sleep(Duration::from_millis(30)).await;
    drop(held);
    assert_eq!(l.in_flight(), 1, "handed to the waiter, not freed");
    assert!(matches!(
        l.try_acquire(),
        Err(NoPermit {
            limit: 1,
            in_flight: 1
        })
    ));
    assert_eq!(waiter.await.unwrap(), Duration::from_millis(30));
    assert_eq!(l.in_flight(), 0);
    assert_eq!(l.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn fifo_and_lifo_serve_in_their_order() {
    for (order, expected) in [(QueueOrder::Fifo, [0, 1, 2]), (QueueOrder::Lifo, [2, 1, 0])] {
        let l = limiter(1, 8, order);
        let held = l.try_acquire_owned().unwrap();
        let served = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (l, served) = (l.clone(), served.clone());
            tasks.push(tokio::spawn(async move {
                let _p = l.acquire().await.unwrap();
                served.lock().unwrap().push(i);
                sleep(Duration::from_millis(1)).await;
            }));
            settle().await; // queued in index order
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*served.lock().unwrap(), expected, "{order:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_and_a_passed_deadline_fail_at_once() {
    let l = limiter(1, 1, QueueOrder::Fifo);
    let _held = l.try_acquire().unwrap();
    let first = tokio::spawn({
        let l = l.clone();
        async move { l.acquire_timeout(Duration::from_secs(1)).await.map(drop) }
    });
    settle().await;
    let start = Instant::now();
    assert_eq!(
        l.acquire().await.err(),
        Some(AcquireError::QueueFull { capacity: 1 })
    );
    assert_eq!(
        l.acquire_until(start).await.err(),
        Some(AcquireError::Timeout)
    );
    assert_eq!(start.elapsed(), Duration::ZERO, "neither waited");
    // The queued one times out exactly at its deadline and leaves the queue.
    assert_eq!(first.await.unwrap(), Err(AcquireError::Timeout));
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(l.waiting(), 0);
    // No queue at all: acquire is try_acquire.
    let none = limiter(1, 0, QueueOrder::Fifo);
    let _p = none.try_acquire().unwrap();
    assert_eq!(
        none.acquire().await.err(),
        Some(AcquireError::QueueFull { capacity: 0 })
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_loses_nothing() {
    let l = limiter(1, 4, QueueOrder::Fifo);
    let held = l.try_acquire_owned().unwrap();
    // Waiter A is handed the permit, then dropped before it runs: the
    // permit must go on to B, not vanish.
    let a = tokio::spawn({
        let l = l.clone();
        async move {
            let _p = l.acquire().await.unwrap();
            unreachable!("aborted before it is polled again");
        }
    });
    settle().await;
    let b = tokio::spawn({
        let l = l.clone();
        async move { l.acquire().await.map(|p| p.in_flight_at_admission()) }
    });
    settle().await;
    assert_eq!(l.waiting(), 2);
    drop(held); // handed to A, which has not run yet
    a.abort();
    assert_eq!(b.await.unwrap(), Ok(1));
    assert_eq!((l.in_flight(), l.waiting()), (0, 0));
    // A waiter dropped while still waiting leaves no trace either.
    let held = l.try_acquire_owned().unwrap();
    let c = tokio::spawn({
        let l = l.clone();
        async move { l.acquire().await.map(drop) }
    });
    settle().await;
    c.abort();
    settle().await;
    assert_eq!(l.waiting(), 0);
    drop(held);
    assert_eq!(l.in_flight(), 0);
    assert!(l.try_acquire().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_raise_wakes_exactly_the_waiters_it_admits_and_a_cut_revokes_nothing() {
    let l = limiter(2, 16, QueueOrder::Fifo);
    let held: Vec<_> = (0..2).map(|_| l.try_acquire_owned().unwrap()).collect();
    let admitted = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let (l, admitted) = (l.clone(), admitted.clone());
        tasks.push(tokio::spawn(async move {
            let p = l.acquire_owned().await.unwrap();
            admitted.fetch_add(1, Ordering::SeqCst);
            p
        }));
    }
    settle().await;
    assert_eq!(l.waiting(), 5);
    assert_eq!(l.set_limit(5), Ok(2));
    settle().await;
    assert_eq!(
        admitted.load(Ordering::SeqCst),
        3,
        "exactly the 3 the raise frees"
    );
    assert_eq!((l.in_flight(), l.waiting()), (5, 2));
    // Cut to 1 with 5 held: nobody loses a permit; releases drain to below
    // the limit before anyone waiting is admitted.
    assert_eq!(l.set_limit(1), Ok(5));
    assert_eq!(l.in_flight(), 5);
    drop(held);
    settle().await;
    assert_eq!((l.in_flight(), admitted.load(Ordering::SeqCst)), (3, 3));
    let mut done = Vec::new();
    for t in tasks.drain(..3) {
        done.push(t.await.unwrap());
    }
    drop(done.pop());
    drop(done.pop());
    settle().await;
    assert_eq!((l.in_flight(), admitted.load(Ordering::SeqCst)), (1, 3));
    drop(done.pop()); // now a permit is free under the limit of 1
    settle().await;
    assert_eq!((l.in_flight(), admitted.load(Ordering::SeqCst)), (1, 4));
    assert!(l.set_limit(0).is_err());
    drop(tasks);
}

#[test]
fn clones_share_one_limit() {
    let a = ConcurrencyLimiter::new(1).unwrap();
    let b = a.clone();
    let _p = a.try_acquire().unwrap();
    assert!(b.try_acquire().is_err());
    assert!(a.same_limiter(&b));
    assert!(ConcurrencyLimiter::new(0).is_err());
}

#[tokio::test(start_paused = true)]
async fn a_timeout_no_instant_can_hold_waits_without_a_deadline() {
    let l = limiter(1, 4, QueueOrder::Fifo);
    let held = l.try_acquire_owned().unwrap();
    let start = Instant::now();
    let waiter = tokio::spawn({
        let l = l.clone();
        async move {
            let p = l.acquire_timeout(Duration::MAX).await.map(drop);
            (p, start.elapsed())
        }
    });
    settle().await;
    assert_eq!(l.waiting(), 1, "queued, not panicked nor refused");
    // A year later it still waits; the release serves it.
    sleep(Duration::from_secs(365 * 86_400)).await;
    assert_eq!(l.waiting(), 1);
    drop(held);
    assert_eq!(
        waiter.await.unwrap(),
        (Ok(()), Duration::from_secs(365 * 86_400))
    );
}
