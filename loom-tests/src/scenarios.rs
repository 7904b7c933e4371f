//! Scenarios shared by the checks of the real limiter and of the broken
//! variants, so a broken variant is caught by exactly the assertions that
//! the real limiter passes. Each returns a coverage label for [`check`](crate::check).

use core::time::Duration;

use limiter_core::{
    cell::CellClock, cell::CellQuota, cell::GcraCell, cell::QuotaOf, cell::SharedQuota,
};
use loom::sync::Arc;
use loom::thread;

use super::{FixedClock, History, Subject, assert_linearizable, model_quota, quota};

/// The frozen time of the scenarios, ns.
pub const NOW: u64 = 1_000;

/// Two threads each try one permit of a limiter with a burst of 1 at a
/// frozen time: exactly one must be admitted. Returns which one.
pub fn two_threads_one_permit<S: Subject + 'static>(make: impl Fn(super::Quota) -> S) -> String {
    let q = quota(10, 1);
    let limiter = Arc::new(make(q));
    let spawn = |l: Arc<S>| {
        thread::spawn(move || {
            let mut h = History::new();
            let _ = h.try_acquire_n(&*l, 1);
            h
        })
    };
    let (a, b) = (spawn(limiter.clone()), spawn(limiter.clone()));
    let threads = [a.join().unwrap(), b.join().unwrap()];
    let admitted: Vec<bool> = threads
        .iter()
        .map(|h| matches!(h.events[0], super::Event::TryAcquire { out: Ok(()), .. }))
        .collect();
    let count = admitted.iter().filter(|a| **a).count();
    assert_eq!(count, 1, "over-admission: {count} permits for a burst of 1");
    assert_linearizable(
        model_quota(q),
        NOW,
        &History::new(),
        &threads,
        &History::new(),
    );
    format!("admitted {admitted:?}")
}

/// A quota change races two acquisitions on an idle limiter, where a
/// mixed decision is the easiest to make (the change leaves `tat` as it
/// is) and the easiest to see: old `t` = 10 ns, burst 1; new `t` = 3 ns,
/// burst 4.
///
/// The sequential orders give (admitted, final debt) = (2, 6 ns) or
/// (1, 3 ns). A decision that uses the old `t` but lands under the new
/// quota leaves a debt of 10 ns, which no order produces.
pub fn quota_change_on_an_idle_limiter<S: Subject + 'static>(
    make: impl Fn(super::Quota) -> S,
) -> String {
    let old = quota(10, 1);
    let new = quota(3, 4);
    let limiter = Arc::new(make(old));
    let l = limiter.clone();
    let setter = thread::spawn(move || {
        let mut h = History::new();
        h.set_quota(&*l, new);
        h
    });
    let l = limiter.clone();
    let acquirer = thread::spawn(move || {
        let mut h = History::new();
        let admitted = (0..2).filter(|_| h.try_acquire_n(&*l, 1).is_ok()).count();
        (h, admitted)
    });
    let setter = setter.join().unwrap();
    let (acquirer, admitted) = acquirer.join().unwrap();
    // The probe asks for the whole new burst: its denial waits exactly
    // the final debt tat − now.
    let mut after = History::new();
    assert_eq!(after.quota(&*limiter), new);
    let debt = match after.try_acquire_n(&*limiter, 4) {
        Err(super::model::Refusal::Limited { wait }) => wait,
        other => panic!("the probe was not refused: {other:?}"),
    };
    assert!(
        matches!((admitted, debt), (2, 6) | (1, 3)),
        "a decision mixed the quotas: admitted {admitted}, final debt {debt} ns"
    );
    assert_linearizable(
        model_quota(old),
        NOW,
        &History::new(),
        &[setter, acquirer],
        &after,
    );
    format!("admitted {admitted}, debt {debt}")
}

/// A decision on a keyed cell in debt racing a change of the shared quota
/// it follows (and a look that moves the cell): the quotas of
/// `tests/keyed_set_quota.rs`. Returns the outcome label, panicking on a
/// mixed decision.
pub fn keyed_decision_racing_a_change() -> String {
    let shared = Arc::new(SharedQuota::new(quota(10, 2)));
    let cells = Arc::new((GcraCell::new(), CellQuota::following(&shared)));
    let clock = FixedClock(NOW);
    let on = CellClock {
        clock: &clock,
        origin: 0,
    };
    fn follow<'a>(s: &'a SharedQuota, c: &'a (GcraCell, CellQuota)) -> QuotaOf<'a> {
        QuotaOf::Following {
            shared: s,
            record: &c.1,
        }
    }
    let _taken = cells
        .0
        .reserve_n_on(on, follow(&shared, &cells), 2, Duration::ZERO)
        .unwrap()
        .unwrap();
    let (s, c) = (shared.clone(), cells.clone());
    let setter = thread::spawn(move || {
        s.set(quota(30, 3), NOW);
        // A look moves the cell, racing the decision's own move.
        c.0.available(follow(&s, &c), NOW);
    });
    let (s, c) = (shared.clone(), cells.clone());
    let decider = thread::spawn(move || {
        let clock = FixedClock(NOW);
        let on = CellClock {
            clock: &clock,
            origin: 0,
        };
        c.0.reserve_n_on(on, follow(&s, &c), 1, Duration::ZERO)
            .unwrap()
            .map(|_kept| ())
    });
    setter.join().unwrap();
    let decided = decider.join().unwrap();
    // Settled under the new quota: 1 permit free at debt 60, 0 at 90.
    let free = cells.0.available(follow(&shared, &cells), NOW);
    match decided {
        Err(e) => {
            assert_eq!(
                e.retry_after(),
                Some(Duration::from_nanos(10)),
                "a mixed refusal"
            );
            assert_eq!(free, 1, "debt 60 after a refusal");
            "refused under the old quota".to_string()
        }
        Ok(()) => {
            assert_eq!(free, 0, "debt 90 after an admission");
            assert_eq!(cells.1.quota(), quota(30, 3));
            let wait = cells
                .0
                .reserve_n_on(on, follow(&shared, &cells), 3, Duration::MAX)
                .unwrap()
                .unwrap()
                .wait();
            assert_eq!(wait, Duration::from_nanos(90), "final debt");
            "admitted under the new quota".to_string()
        }
    }
}
