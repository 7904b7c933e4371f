//! Model checks of the acquisition CAS loop (`AtomicState::update` through
//! `RateLimiter::try_acquire_n`) at a frozen time.
//!
//! Every interleaving must admit exactly `burst` permits, each call must be
//! all-or-nothing, and every denial must report the exact wait; the
//! linearizability check compares the whole run against the sequential
//! model.
#![cfg(loom)]

use limiter_core::RateLimiter;
use loom::sync::Arc;
use loom::thread;
use loom_tests::model::Refusal;
use loom_tests::{FixedClock, History, assert_linearizable, check, model_quota, quota};

const T: u64 = 10;
const NOW: u64 = 1_000;

/// Runs one thread per entry of `requests` (each a list of `n`s to try) on a
/// full limiter, then checks linearizability and returns the permits each
/// thread was granted.
fn run(burst: u32, requests: &'static [&'static [u32]]) -> (Vec<History>, u32) {
    let q = quota(T, burst);
    let limiter = Arc::new(RateLimiter::with_clock(q, FixedClock(NOW)));
    let handles: Vec<_> = requests
        .iter()
        .map(|ns| {
            let limiter = limiter.clone();
            thread::spawn(move || {
                let mut h = History::new();
                for &n in *ns {
                    let _ = h.try_acquire_n(&*limiter, n);
                }
                h
            })
        })
        .collect();
    let threads: Vec<History> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut after = History::new();
    let left = after.available(&limiter);
    assert_linearizable(model_quota(q), NOW, &History::new(), &threads, &after);
    let admitted = threads
        .iter()
        .flat_map(|h| &h.events)
        .map(|e| match e {
            loom_tests::Event::TryAcquire { n, out: Ok(()) } => *n,
            _ => 0,
        })
        .sum::<u32>();
    assert_eq!(admitted + left, burst, "admitted {admitted}, {left} left");
    (threads, admitted)
}

fn denial_waits(threads: &[History]) -> Vec<(u32, u128)> {
    threads
        .iter()
        .flat_map(|h| &h.events)
        .filter_map(|e| match e {
            loom_tests::Event::TryAcquire {
                n,
                out: Err(Refusal::Limited { wait }),
            } => Some((*n, *wait)),
            _ => None,
        })
        .collect()
}

/// Which requests of each thread were granted, as a coverage label.
fn granted(threads: &[History]) -> String {
    let per_thread: Vec<String> = threads
        .iter()
        .map(|h| {
            h.events
                .iter()
                .map(|e| match e {
                    loom_tests::Event::TryAcquire { out: Ok(()), .. } => 'y',
                    _ => 'n',
                })
                .collect()
        })
        .collect();
    per_thread.join(" ")
}

#[test]
fn two_threads_admit_exactly_the_burst() {
    let outcomes = ["yy yn", "yn yy"];
    check("try_acquire: 2 threads x 2, burst 3", &outcomes, || {
        let (threads, admitted) = run(3, &[&[1, 1], &[1, 1]]);
        assert_eq!(admitted, 3, "over- or under-admission");
        // The one denial came when the limiter was empty: exactly one period.
        assert_eq!(denial_waits(&threads), vec![(1, u128::from(T))]);
        granted(&threads)
    });
}

#[test]
fn three_threads_admit_exactly_the_burst() {
    let outcomes = ["y y n", "y n y", "n y y"];
    check("try_acquire: 3 threads x 1, burst 2", &outcomes, || {
        let (threads, admitted) = run(2, &[&[1], &[1], &[1]]);
        assert_eq!(admitted, 2, "over- or under-admission");
        assert_eq!(denial_waits(&threads), vec![(1, u128::from(T))]);
        granted(&threads)
    });
}

#[test]
fn try_acquire_n_is_all_or_nothing() {
    let outcomes = [
        "y n y, wait 10",
        "y n y, wait 20",
        "n y y, wait 10",
        "n y y, wait 20",
    ];
    check(
        "try_acquire_n: 2 + 2 + 1 permits, burst 3",
        &outcomes,
        || {
            let (threads, admitted) = run(3, &[&[2], &[2], &[1]]);
            assert_eq!(admitted, 3, "over- or under-admission");
            // Exactly one of the two requests for 2 fits; its denial waits for
            // the missing permit (one period) or both (two periods).
            let denials = denial_waits(&threads);
            assert_eq!(denials.len(), 1, "{denials:?}");
            let (n, wait) = denials[0];
            assert_eq!(n, 2);
            assert!(wait == u128::from(T) || wait == u128::from(2 * T), "{wait}");
            format!("{}, wait {wait}", granted(&threads))
        },
    );
}

#[test]
fn two_threads_asking_for_the_whole_burst() {
    check(
        "try_acquire_n: 3 + 3 permits, burst 3",
        &["y n", "n y"],
        || {
            let (threads, admitted) = run(3, &[&[3], &[3]]);
            assert_eq!(admitted, 3);
            assert_eq!(denial_waits(&threads), vec![(3, u128::from(3 * T))]);
            granted(&threads)
        },
    );
}

#[test]
fn the_scenario_that_catches_a_load_and_store() {
    // The control for `broken_variants.rs`: the real limiter passes it.
    let outcomes = ["admitted [true, false]", "admitted [false, true]"];
    check(
        "try_acquire: 2 threads, burst 1 (control)",
        &outcomes,
        || {
            loom_tests::scenarios::two_threads_one_permit(|q| {
                RateLimiter::with_clock(q, FixedClock(loom_tests::scenarios::NOW))
            })
        },
    );
}
