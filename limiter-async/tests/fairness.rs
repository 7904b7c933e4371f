//! FIFO: permits are served in the order they were reserved, whatever `n`.
//!
//! Expected times follow from the GCRA slot of each reservation (see
//! `pacing.rs` for the derivation and tokio's 1 ms rounding); the quotas
//! here use periods that are whole milliseconds, so every slot is on a tick
//! and no two waiters share one.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use limiter_async::AsyncLimiter;
use limiter_core::{AcquireError, Quota};
use tokio::time::Instant;

fn quota(per_second: u32, burst: u32) -> Quota {
    Quota::per_second(per_second)
        .and_then(|q| q.with_burst(burst))
        .expect("valid quota")
}

type Waiter = Pin<Box<dyn Future<Output = ()> + Send>>;

#[tokio::test(start_paused = true)]
async fn waiters_are_served_in_reservation_order_whatever_n() {
    // t = 100 ms, burst 3 (burst span 300 ms). Emptied at 0 (tat = 300 ms),
    // then waiters for 1, 3, 2, 1, 3 permits reserve in that order. Waiter i
    // moves tat to 300 + 100 · (n_0 + … + n_i) ms and its slot is that minus
    // the 300 ms burst span: 100, 400, 600, 700, 1000 ms. The single permit
    // of waiter 3 does not jump ahead of the pair of waiter 2.
    let limiter = AsyncLimiter::new(quota(10, 3));
    limiter.take_n(3).await.expect("burst");
    let start = Instant::now();
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, n) in [1, 3, 2, 1, 3].into_iter().enumerate() {
        let limiter = limiter.clone();
        let served = Arc::clone(&served);
        let mut waiter: Waiter = Box::pin(async move {
            limiter.take_n(n).await.expect("fits the burst");
            served
                .lock()
                .expect("not poisoned")
                .push((i, start.elapsed()));
        });
        // The first poll reserves the slot: this fixes the order. The task
        // then records the instant and the order in which it is served.
        assert!(futures::poll!(waiter.as_mut()).is_pending());
        tasks.push(tokio::spawn(waiter));
    }
    // A latecomer does not barge in when a permit "comes free": at 150 ms tat
    // is 1300 ms, so one more permit would have to wait 1400 − 300 − 150.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        limiter.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_millis(950)
        })
    );
    for task in tasks {
        task.await.expect("waiter");
    }
    let served = served.lock().expect("not poisoned").clone();
    let ms = Duration::from_millis;
    assert_eq!(
        served,
        [
            (0, ms(100)),
            (1, ms(400)),
            (2, ms(600)),
            (3, ms(700)),
            (4, ms(1000))
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn take_n_10_among_20_take_loops_completes_at_its_fifo_slot() {
    // t = 2 ms, burst 10 (burst span 20 ms). At time 0 the first loop takes
    // the 10 burst permits (tat = 20 ms) and reserves the slot at 2 ms
    // (tat 22); the other 19 loops reserve 4, 6, …, 40 ms (tat 60). From
    // then on exactly one loop wakes at each even millisecond 2k and
    // re-reserves, leaving tat = 60 + 2k ms and taking the slot 40 + 2k.
    //
    // The caller asks for 10 permits at 51 ms, an odd millisecond, so no
    // loop wakes in the same tick. tat is 110 ms (last wake at 50), the
    // request moves it to 130 ms, and its slot is 130 − 20 = 110 ms: behind
    // the 20 loop slots already reserved (52 … 90 ms) and ahead of every
    // loop that reserves later (112 ms on). A retry loop asking for 10
    // permits at once would never see them free while the loops run.
    let limiter = AsyncLimiter::new(quota(500, 10));
    let served = Arc::new(AtomicU64::new(0));
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let limiter = limiter.clone();
        let served = Arc::clone(&served);
        loops.spawn(async move {
            loop {
                limiter.take().await.unwrap();
                // Relaxed: a plain count, read on the same (single) thread.
                served.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let start = Instant::now();
    tokio::time::sleep(Duration::from_millis(51)).await;
    limiter.take_n(10).await.expect("10 fits the burst");
    assert_eq!(start.elapsed(), Duration::from_millis(110));
    // The loops were served the burst plus one permit per even millisecond
    // 2 … 90: 10 + 45; none between 90 and 110 ms, when the 10 permits of
    // the big request came due.
    // Relaxed: current-thread runtime; the loops ran on this thread.
    assert_eq!(served.load(Ordering::Relaxed), 55);
    loops.abort_all();
}
