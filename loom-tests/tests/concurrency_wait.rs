//! limiter-concurrency's wait queue under loom: a release racing with a
//! waiter's enqueue hands it the permit (no lost wake-up), a dropped waiter
//! loses nothing, a raise of the limit admits the waiter it frees; the
//! variants that skip the hand-off or the raise's admission deadlock, which
//! loom reports.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use limiter_concurrency::ConcurrencyLimiter;
use limiter_concurrency::loom_hooks::Broken;
use loom::sync::Notify;
use loom::thread;
use loom_tests::check;

/// Wakes a thread blocked in [`block_on`] (loom sees the wait, so a wake-up
/// that never comes is a deadlock it reports).
struct Unpark(Notify);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.notify();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.notify();
    }
}

/// Polls `f` to completion on this loom thread.
fn block_on<F: Future>(f: F) -> F::Output {
    let unpark = Arc::new(Unpark(Notify::new()));
    let waker = Waker::from(unpark.clone());
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
            return v;
        }
        unpark.0.wait();
    }
}

/// Limit 1 held by the main thread; a waiter blocks on `acquire` while the
/// main thread releases. The waiter must get the permit.
fn release_vs_enqueue(broken: Broken) -> String {
    let limiter = ConcurrencyLimiter::__loom_broken(1, 4, broken);
    let held = limiter.try_acquire_owned().unwrap();
    let waiter = {
        let l = limiter.clone();
        thread::spawn(move || block_on(l.acquire()).map(drop).is_ok())
    };
    drop(held);
    assert!(waiter.join().unwrap());
    assert_eq!((limiter.in_flight(), limiter.waiting()), (0, 0));
    "served".into()
}

#[test]
fn a_release_racing_with_an_enqueue_wakes_the_waiter() {
    check(
        "concurrency: release vs acquire().await, limit 1",
        &["served"],
        || release_vs_enqueue(Broken::None),
    );
}

#[test]
#[should_panic(expected = "deadlock")]
fn a_release_that_ignores_the_queue_is_caught() {
    check("BROKEN release ignores the queue", &[], || {
        release_vs_enqueue(Broken::ReleaseIgnoresQueue)
    });
}

/// A waiter polled once (queued, or handed the permit at once) and then
/// dropped, racing with the release: afterwards the permit is free.
#[test]
fn a_dropped_waiter_loses_nothing() {
    check(
        "concurrency: release vs a dropped waiter",
        &["free"],
        || {
            let limiter = ConcurrencyLimiter::__loom_broken(1, 4, Broken::None);
            let held = limiter.try_acquire_owned().unwrap();
            let waiter = {
                let l = limiter.clone();
                thread::spawn(move || {
                    let mut fut = pin!(l.acquire());
                    let _ = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                    // Dropped here, waiting or holding.
                })
            };
            drop(held);
            waiter.join().unwrap();
            assert_eq!((limiter.in_flight(), limiter.waiting()), (0, 0));
            assert!(limiter.try_acquire().is_ok());
            "free".into()
        },
    );
}

/// Limit 1 held for good; a waiter blocks while the limit is raised to 2:
/// the raise must admit it (nobody ever releases).
fn raise_vs_enqueue(broken: Broken) -> String {
    let limiter = ConcurrencyLimiter::__loom_broken(1, 4, broken);
    limiter.try_acquire().unwrap().forget();
    let waiter = {
        let l = limiter.clone();
        thread::spawn(move || block_on(l.acquire()).map(|p| p.forget()).is_ok())
    };
    limiter.set_limit(2).unwrap();
    assert!(waiter.join().unwrap());
    assert_eq!((limiter.in_flight(), limiter.waiting()), (2, 0));
    "admitted".into()
}

#[test]
fn a_raise_admits_the_waiter_it_frees() {
    check(
        "concurrency: set_limit(2) vs acquire().await",
        &["admitted"],
        || raise_vs_enqueue(Broken::None),
    );
}

#[test]
#[should_panic(expected = "deadlock")]
fn a_raise_that_wakes_nobody_is_caught() {
    check("BROKEN raise wakes nobody", &[], || {
        raise_vs_enqueue(Broken::RaiseWakesNobody)
    });
}
