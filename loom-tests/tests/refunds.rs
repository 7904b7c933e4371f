//! Model checks of refunds: a cancel that is not the last records its slot
//! under the change lock, a reservation that would wait takes a refund that
//! comes sooner (giving its fresh slot back), and the cancel of the last
//! reservation restores the state over every whole refund below it.
//!
//! Every outcome is compared with the sequential model (which keeps the
//! changes as a stack and the refunds as holes), and the limiter may never
//! hand out one slot twice.
#![cfg(loom)]

use limiter_core::RateLimiter;
use loom::sync::Arc;
use loom::thread;
use loom_tests::{
    FixedClock, History, assert_linearizable, check, model_quota, quota, spawn_cancel,
};

const T: u64 = 10;
const NOW: u64 = 1_000;

type Shared = Arc<RateLimiter<FixedClock>>;

#[test]
fn a_refund_recorded_while_a_reservation_decides() {
    // Slots 0, 10, 20 are held; the one at 10 is cancelled while a late
    // reservation decides. The late one gets 10 (the refund was there) or
    // 30 (it came first; the refund then waits for the probe).
    let outcomes = ["late slot 10, probe slot 30", "late slot 30, probe slot 10"];
    check("cancel of a middle slot vs reserve_n", &outcomes, || {
        let q = quota(T, 1);
        let limiter: Shared = Arc::new(RateLimiter::with_clock(q, FixedClock(NOW)));
        let mut setup = History::new();
        let _first = setup.reserve_n(&limiter, "first", 1, u64::MAX).unwrap();
        let middle = setup.reserve_n(&limiter, "middle", 1, u64::MAX).unwrap();
        let _last = setup.reserve_n(&limiter, "last", 1, u64::MAX).unwrap();
        let canceller = spawn_cancel(&limiter, "middle", middle);
        let l = limiter.clone();
        let reserver = thread::spawn(move || {
            let mut h = History::new();
            let late = h.reserve_n(&l, "late", 1, u64::MAX).unwrap();
            (h, late)
        });
        let hc = canceller.join().unwrap();
        let (hr, late) = reserver.join().unwrap();
        let mut after = History::new();
        let probe = after.reserve_n(&limiter, "probe", 1, u64::MAX).unwrap();
        assert_ne!(
            late.ready_at(),
            probe.ready_at(),
            "one slot handed out twice"
        );
        assert_linearizable(model_quota(q), NOW, &setup, &[hc, hr], &after);
        format!(
            "late slot {}, probe slot {}",
            late.ready_at() - NOW,
            probe.ready_at() - NOW
        )
    });
}

#[test]
fn the_last_cancel_unwinds_a_refund_recorded_concurrently() {
    // Slots 0 and 10 are held and both cancelled at once: whichever order
    // the lock gives them, the state ends as it began (the probe gets 0).
    let outcomes = ["older true, newer true, probe slot 0"];
    check("cancel older vs cancel newer", &outcomes, || {
        let q = quota(T, 1);
        let limiter: Shared = Arc::new(RateLimiter::with_clock(q, FixedClock(NOW)));
        let mut setup = History::new();
        let older = setup.reserve_n(&limiter, "older", 1, u64::MAX).unwrap();
        let newer = setup.reserve_n(&limiter, "newer", 1, u64::MAX).unwrap();
        let a = spawn_cancel(&limiter, "older", older);
        let b = spawn_cancel(&limiter, "newer", newer);
        let (ha, hb) = (a.join().unwrap(), b.join().unwrap());
        let out = |h: &History| matches!(h.events[0], loom_tests::Event::Cancel { out: true, .. });
        let label = format!("older {}, newer {}", out(&ha), out(&hb));
        let mut after = History::new();
        let probe = after.reserve_n(&limiter, "probe", 1, u64::MAX).unwrap();
        assert_linearizable(model_quota(q), NOW, &setup, &[ha, hb], &after);
        format!("{label}, probe slot {}", probe.ready_at() - NOW)
    });
}
