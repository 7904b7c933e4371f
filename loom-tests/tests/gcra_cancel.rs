//! Model checks of `cancel` (one strong CAS from the reservation's `after`
//! word back to its `before` word) racing new reservations, acquisitions,
//! other cancels and quota changes.
//!
//! A cancel restores the state when nothing depends on the reservation, and
//! otherwise records its slot as a refund for a later reservation; it must
//! never let the limiter admit more than its quota. The linearizability
//! check compares every outcome with the sequential model (a stack of
//! changes, with refunds for cancels below its top, popped once everything
//! above them is cancelled too), so the refund protocol under the change
//! lock is checked against that plain reading.
#![cfg(loom)]

use core::time::Duration;

use limiter_core::RateLimiter;
use loom::sync::Arc;
use loom::thread;
use loom_tests::{
    FixedClock, History, assert_linearizable, check, model_quota, quota, spawn_cancel,
};

const T: u64 = 10;
const NOW: u64 = 1_000;

type Shared = Arc<RateLimiter<FixedClock>>;

fn refunded(h: &History) -> bool {
    matches!(h.events[0], loom_tests::Event::Cancel { out: true, .. })
}

#[test]
fn cancel_racing_a_new_reservation() {
    let outcomes = ["refunded true, slot 0", "refunded true, slot 10"];
    check("cancel vs reserve_n, burst 1", &outcomes, || {
        let q = quota(T, 1);
        let limiter: Shared = Arc::new(RateLimiter::with_clock(q, FixedClock(NOW)));
        let mut setup = History::new();
        let r = setup.reserve_n(&limiter, "r", 1, u64::MAX).unwrap();
        let canceller = spawn_cancel(&limiter, "r", r);
        let l = limiter.clone();
        let reserver = thread::spawn(move || {
            let mut h = History::new();
            let s = h.reserve_n(&l, "s", 1, u64::MAX).unwrap();
            (h, s)
        });
        let hc = canceller.join().unwrap();
        let (hr, s) = reserver.join().unwrap();
        let refunded = refunded(&hc);
        // The slot at 0 is free again whichever came first: restored before
        // the new reservation (which takes it), or refunded after it (the
        // new one holds 10, and the probe gets the refund at 0).
        assert!(refunded, "a slot that has not passed is always given back");
        let mut after = History::new();
        let probe = after.reserve_n(&limiter, "probe", 1, u64::MAX).unwrap();
        let slots = [s.ready_at() - NOW, probe.ready_at() - NOW];
        assert!(slots == [0, 10] || slots == [10, 0], "slots {slots:?}");
        assert_linearizable(model_quota(q), NOW, &setup, &[hc, hr], &after);
        format!("refunded {refunded}, slot {}", s.ready_at() - NOW)
    });
}

#[test]
fn cancel_racing_an_acquisition_never_over_admits() {
    let outcomes = [
        "refunded true, admitted true",
        "refunded true, admitted false",
    ];
    check("cancel vs try_acquire, burst 1", &outcomes, || {
        let q = quota(T, 1);
        let limiter: Shared = Arc::new(RateLimiter::with_clock(q, FixedClock(NOW)));
        let mut setup = History::new();
        let r = setup.reserve_n(&limiter, "r", 1, 0).unwrap();
        let canceller = spawn_cancel(&limiter, "r", r);
        let l = limiter.clone();
        let acquirer = thread::spawn(move || {
            let mut h = History::new();
            let _ = h.try_acquire_n(&*l, 1);
            h
        });
        let hc = canceller.join().unwrap();
        let ha = acquirer.join().unwrap();
        let refunded = refunded(&hc);
        let admitted = matches!(
            ha.events[0],
            loom_tests::Event::TryAcquire { out: Ok(()), .. }
        );
        // The burst is 1: the reservation holds it unless refunded.
        let in_use = u32::from(!refunded) + u32::from(admitted);
        assert!(
            in_use <= 1,
            "over-admission: refunded {refunded}, admitted {admitted}"
        );
        // A denial writes nothing, so it can never make the refund fail.
        assert!(refunded, "a denial must not block the refund");
        let mut after = History::new();
        after.available(&limiter);
        assert_linearizable(model_quota(q), NOW, &setup, &[hc, ha], &after);
        format!("refunded {refunded}, admitted {admitted}")
    });
}

#[test]
fn cancels_in_any_order_unwind_or_refund() {
    // older cancel, newer cancel, late reservation: every cancel gives its
    // slot back; the late reservation gets 0 (both gone first, in any
    // order), 10 (only the newer one gone, or the older one's refund... the
    // model decides which orders allow it) or 20 (it came first).
    let outcomes = [
        "older true, newer true, late slot 0",
        "older true, newer true, late slot 10",
        "older true, newer true, late slot 20",
    ];
    check(
        "cancel older vs cancel newer vs reserve_n",
        &outcomes,
        || {
            let q = quota(T, 1);
            let limiter: Shared = Arc::new(RateLimiter::with_clock(q, FixedClock(NOW)));
            let mut setup = History::new();
            let older = setup.reserve_n(&limiter, "older", 1, u64::MAX).unwrap();
            let newer = setup.reserve_n(&limiter, "newer", 1, u64::MAX).unwrap();
            let a = spawn_cancel(&limiter, "older", older);
            let b = spawn_cancel(&limiter, "newer", newer);
            let l = limiter.clone();
            let c = thread::spawn(move || {
                let mut h = History::new();
                let late = h.reserve_n(&l, "late", 1, u64::MAX).unwrap();
                (h, late)
            });
            let (ha, hb) = (a.join().unwrap(), b.join().unwrap());
            let (hc, late) = c.join().unwrap();
            let label = format!(
                "older {}, newer {}, late slot {}",
                refunded(&ha),
                refunded(&hb),
                late.ready_at() - NOW
            );
            let mut after = History::new();
            after.reserve_n(&limiter, "probe", 1, u64::MAX);
            assert_linearizable(model_quota(q), NOW, &setup, &[ha, hb, hc], &after);
            label
        },
    );
}

#[test]
fn cancel_racing_a_quota_change() {
    let outcomes = ["refunded true, debt 60", "refunded false, debt 90"];
    check("cancel vs set_quota", &outcomes, || {
        let q = quota(T, 2);
        let limiter: Shared = Arc::new(RateLimiter::with_clock(q, FixedClock(NOW)));
        let mut setup = History::new();
        setup.try_acquire_n(&*limiter, 2).unwrap();
        let r = setup.reserve_n(&limiter, "r", 1, u64::MAX).unwrap();
        let l = limiter.clone();
        let setter = thread::spawn(move || {
            let mut h = History::new();
            h.set_quota(&*l, quota(3 * T, 2));
            h
        });
        let canceller = spawn_cancel(&limiter, "r", r);
        let (hs, hc) = (setter.join().unwrap(), canceller.join().unwrap());
        let refunded = refunded(&hc);
        // Refunded before the change: 2 permits of debt, rescaled 20 → 60 ns;
        // after it, no refund: 3 permits of debt, 30 → 90 ns. A probe for
        // the whole burst waits exactly the debt.
        let mut after = History::new();
        after.quota(&*limiter);
        let probe = after.reserve_n(&limiter, "probe", 2, u64::MAX).unwrap();
        let debt = probe.wait();
        let expected = if refunded { 2 * 3 * T } else { 3 * 3 * T };
        assert_eq!(
            debt,
            Duration::from_nanos(expected),
            "refunded = {refunded}"
        );
        assert_linearizable(model_quota(q), NOW, &setup, &[hs, hc], &after);
        format!("refunded {refunded}, debt {}", debt.as_nanos())
    });
}
