//! limiter-concurrency's admission CAS under loom: no interleaving of
//! acquisitions and releases holds more permits than the limit, and the
//! load-then-store variant (the check-then-act gap) is caught.
#![cfg(loom)]

use std::sync::Arc;

use limiter_concurrency::ConcurrencyLimiter;
use limiter_concurrency::loom_hooks::Broken;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::thread;
use loom_tests::check;

/// Limit 1, a permit held by the main thread and released while two threads
/// try to take one: never two holders at once, and the count ends at zero.
fn scenario(broken: Broken) -> String {
    let limiter = ConcurrencyLimiter::__loom_broken(1, 0, broken);
    let holders = Arc::new(AtomicU32::new(0));
    let held = limiter.try_acquire_owned().unwrap();
    holders.fetch_add(1, Ordering::SeqCst);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (l, holders) = (limiter.clone(), holders.clone());
            thread::spawn(move || match l.try_acquire() {
                Ok(p) => {
                    let before = holders.fetch_add(1, Ordering::SeqCst);
                    assert!(before < 1, "over-admission: {} holders of 1", before + 1);
                    holders.fetch_sub(1, Ordering::SeqCst);
                    drop(p);
                    true
                }
                Err(_) => false,
            })
        })
        .collect();
    holders.fetch_sub(1, Ordering::SeqCst);
    drop(held);
    let got: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let left = limiter.in_flight();
    assert_eq!(
        left, 0,
        "over-admission or a lost release: {left} in flight at the end"
    );
    format!("{got:?}")
}

#[test]
fn acquisitions_and_a_release_never_exceed_the_limit() {
    check(
        "concurrency: release vs 2 x try_acquire, limit 1",
        &[
            "[false, false]",
            "[false, true]",
            "[true, false]",
            "[true, true]",
        ],
        || scenario(Broken::None),
    );
}

#[test]
#[should_panic(expected = "over-admission")]
fn a_load_and_store_admission_is_caught() {
    check("BROKEN load+store admission", &[], || {
        scenario(Broken::LoadStoreAdmit)
    });
}
