//! Model checks of the calendar quota's CAS protocol (limiter-calendar): one
//! `AtomicU64` `[start | used]` moved by `compare_exchange_weak`, and a
//! window cache that any thread may overwrite with an exact window.
//!
//! A deliberately broken variant (a load and a store instead of the CAS) is
//! shown to be caught by the same assertion.
#![cfg(loom)]

use limiter_calendar::__loom::decide;
use limiter_calendar::{CalendarLimiter, CalendarQuota, Period};
use limiter_core::Clock;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use loom_tests::{FixedClock, check};

const NS: u64 = 1_000_000_000;
/// 2024-03-01T00:00:00Z, a UTC day boundary.
const MIDNIGHT: u64 = 1_709_251_200;

fn daily(limit: u32) -> CalendarQuota {
    CalendarQuota::new(limit, Period::Day).unwrap()
}

/// Two threads each try 2 then 1 permits against a limit of 3 in one
/// period: every interleaving grants exactly 3, each request all or nothing.
#[test]
fn racing_tries_grant_exactly_the_limit() {
    check(
        "calendar: 2 threads x try 2, try 1, limit 3",
        &["1+2", "2+1", "3+0", "0+3"],
        || {
            let clock = FixedClock(MIDNIGHT * NS + 5);
            let limiter = Arc::new(CalendarLimiter::with_clock(daily(3), clock));
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let limiter = limiter.clone();
                    thread::spawn(move || {
                        [2, 1]
                            .into_iter()
                            .filter(|&n| limiter.try_acquire_n(n).is_ok())
                            .sum::<u32>()
                    })
                })
                .collect();
            let got: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            assert_eq!(got.iter().sum::<u32>(), 3, "over-admission or lost grant");
            assert_eq!(limiter.available(), 0);
            format!("{}+{}", got[0], got[1])
        },
    );
}

/// A clock shared by the threads, moved by one of them.
#[derive(Debug, Clone)]
struct SharedClock(Arc<AtomicU64>);

impl Clock for SharedClock {
    fn now(&self) -> u64 {
        // SeqCst: the model's own clock; the ordering is the model's choice.
        self.0.load(Ordering::SeqCst)
    }
}

/// One thread decides at the last nanosecond of a period while another
/// moves the clock into the next period and decides there (limit 1): a
/// decision made on the old period's reading never spends the new period
/// twice, and the old period's grant never blocks the new one.
#[test]
fn a_decision_racing_the_reset_never_spends_a_period_twice() {
    check(
        "calendar: old-period try vs reset + new-period try, limit 1",
        &[
            "early new, late refused",
            "late new, early refused",
            "old+new",
        ],
        || {
            let clock = SharedClock(Arc::new(AtomicU64::new(MIDNIGHT * NS - 1)));
            let limiter = Arc::new(CalendarLimiter::with_clock(daily(1), clock.clone()));
            let late = {
                let limiter = limiter.clone();
                thread::spawn(move || limiter.acquire_n(1).map(|g| g.reset_at))
            };
            let early = {
                let limiter = limiter.clone();
                thread::spawn(move || {
                    clock.0.store(MIDNIGHT * NS, Ordering::SeqCst);
                    limiter.acquire_n(1).map(|g| g.reset_at)
                })
            };
            let late = late.join().unwrap();
            let early = early.join().unwrap();
            let old_reset = u32::try_from(MIDNIGHT).unwrap();
            let new_reset = u32::try_from(MIDNIGHT + 86_400).unwrap();
            let new_grants = [late, early]
                .iter()
                .filter(|r| **r == Ok(new_reset))
                .count();
            assert_eq!(
                new_grants, 1,
                "the new period grants exactly its one permit"
            );
            match (late, early) {
                (Ok(r), Ok(_)) if r == old_reset => "old+new".into(),
                (Err(_), Ok(_)) => "early new, late refused".into(),
                (Ok(_), Err(_)) => "late new, early refused".into(),
                other => panic!("unexpected outcome {other:?}"),
            }
        },
    );
}

/// The broken variant: the same decision, written with a plain store.
#[derive(Debug)]
struct LoadStore {
    word: AtomicU64,
}

impl LoadStore {
    fn try_acquire_n(&self, n: u32, start: u32, limit: u32) -> bool {
        let word = self.word.load(Ordering::SeqCst);
        match decide(word, start, n, limit) {
            Some(next) => {
                self.word.store(next, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }
}

#[test]
#[should_panic(expected = "over-admission")]
fn a_load_and_store_instead_of_the_cas_is_caught() {
    check(
        "BROKEN calendar load+store: 2 threads, limit 1",
        &[],
        || {
            let broken = Arc::new(LoadStore {
                word: AtomicU64::new(0),
            });
            let start = u32::try_from(MIDNIGHT).unwrap();
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let broken = broken.clone();
                    thread::spawn(move || u32::from(broken.try_acquire_n(1, start, 1)))
                })
                .collect();
            let got: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(got, 1, "over-admission: {got} grants for a limit of 1");
            format!("{got}")
        },
    );
}
