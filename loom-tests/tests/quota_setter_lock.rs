//! Model checks of the spin lock that serialises quota changes
//! (`QuotaVersions::lock`: a weak CAS 0 → 1 with acquire, a release store of 0
//! on drop).
//!
//! Two setters must behave as if one ran entirely before the other: the
//! second rescales the first's `tat` with the first's `t`, writes a slot the
//! first is not using, and installs the generation after the first's. A
//! broken lock would let both write the same slot (a quota mixing one
//! setter's `t` with the other's burst) or rescale with a stale `t`.
#![cfg(loom)]

use limiter_core::{Quota, RateLimiter};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{FixedClock, History, assert_linearizable, check, model_quota, quota};

const NOW: u64 = 1_000;

type Shared = Arc<RateLimiter<FixedClock>>;

fn spawn_setter(l: &Shared, q: Quota) -> thread::JoinHandle<History> {
    let l = l.clone();
    thread::spawn(move || {
        let mut h = History::new();
        h.set_quota(&*l, q);
        h
    })
}

#[test]
fn two_setters_apply_one_after_the_other() {
    let outcomes = ["a last, debt 40", "b last, debt 10"];
    check("set_quota vs set_quota, limiter in debt", &outcomes, || {
        // t = 10, burst 2, both taken: debt 20 ns.
        let old = quota(10, 2);
        let a = quota(20, 2);
        let b = quota(5, 4);
        let limiter: Shared = Arc::new(RateLimiter::with_clock(old, FixedClock(NOW)));
        let mut setup = History::new();
        setup.try_acquire_n(&*limiter, 2).unwrap();
        let (ha, hb) = (spawn_setter(&limiter, a), spawn_setter(&limiter, b));
        let threads = [ha.join().unwrap(), hb.join().unwrap()];
        // a then b: debt 20 → 40 → 10 under b; b then a: 20 → 10 → 40 under
        // a. A probe for the whole burst waits exactly the debt.
        let mut after = History::new();
        let final_quota = after.quota(&*limiter);
        let probe = after
            .reserve_n(&limiter, "probe", final_quota.burst(), u64::MAX)
            .unwrap();
        let debt = probe.wait().as_nanos();
        let last = if final_quota == b {
            assert_eq!(debt, 10);
            "b"
        } else {
            assert_eq!(final_quota, a, "a quota that neither setter set");
            assert_eq!(debt, 40);
            "a"
        };
        assert_linearizable(model_quota(old), NOW, &setup, &threads, &after);
        format!("{last} last, debt {debt}")
    });
}

#[test]
fn two_setters_and_an_acquirer() {
    let outcomes = ["admitted true", "admitted false"];
    check("set_quota vs set_quota vs try_acquire", &outcomes, || {
        // old: t = 10, burst 1 with its permit taken; a: t = 20, burst 1;
        // b: t = 5, burst 3. Whether the acquirer gets in depends on which
        // quota is in force and how the debt was rescaled.
        let old = quota(10, 1);
        let a = quota(20, 1);
        let b = quota(5, 3);
        let limiter: Shared = Arc::new(RateLimiter::with_clock(old, FixedClock(NOW)));
        let mut setup = History::new();
        setup.try_acquire_n(&*limiter, 1).unwrap();
        let (ha, hb) = (spawn_setter(&limiter, a), spawn_setter(&limiter, b));
        let l = limiter.clone();
        let acquirer = thread::spawn(move || {
            let mut h = History::new();
            let ok = h.try_acquire_n(&*l, 1).is_ok();
            (h, ok)
        });
        let (hc, admitted) = acquirer.join().unwrap();
        let threads = [ha.join().unwrap(), hb.join().unwrap(), hc];
        let mut after = History::new();
        after.quota(&*limiter);
        after.available(&limiter);
        after.reserve_n(&limiter, "probe", 1, u64::MAX);
        assert_linearizable(model_quota(old), NOW, &setup, &threads, &after);
        format!("admitted {admitted}")
    });
}
