//! Property: whatever mix of reservations, cancellations (in any order),
//! kept reservations, plain tries and time, the permits the limiter admits
//! (tries at their instant, kept reservations at their slot) never exceed
//! the quota in any window: at most `burst + floor((b − a)/t)` in `[a, b]`.
//! Then two exact cases show the refunds reaching later waiters.

use std::time::Duration;

use limiter_core::{Clock, ManualClock, Quota, RateLimiter, Reservation};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Try(u32),
    Reserve(u32, u64),
    Cancel(usize),
    Keep(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..=60).prop_map(Op::Advance),
        2 => (1u32..=3).prop_map(Op::Try),
        5 => (1u32..=3, prop_oneof![0u64..=200, Just(u64::MAX)]).prop_map(|(n, w)| Op::Reserve(n, w)),
        4 => any::<usize>().prop_map(Op::Cancel),
        2 => any::<usize>().prop_map(Op::Keep),
    ]
}

fn assert_within_quota(
    mut admitted: Vec<(u64, u32)>,
    t: u64,
    burst: u32,
) -> Result<(), TestCaseError> {
    admitted.sort_unstable();
    for i in 0..admitted.len() {
        let mut permits = 0u64;
        for j in i..admitted.len() {
            permits += u64::from(admitted[j].1);
            let (a, b) = (admitted[i].0, admitted[j].0);
            prop_assert!(
                permits <= u64::from(burst) + (b - a) / t,
                "{} permits in [{}, {}]",
                permits,
                a,
                b
            );
        }
    }
    Ok(())
}

fn run(t: u64, burst: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Quota::from_nanos(t, burst).unwrap(), clock.clone());
    let mut admitted = Vec::new();
    let mut outstanding: Vec<Reservation> = Vec::new();
    for op in ops {
        match *op {
            Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
            Op::Try(n) if limiter.try_acquire_n(n).is_ok() => admitted.push((clock.now(), n)),
            Op::Reserve(n, w) => {
                if let Ok(r) = limiter.reserve_n(n, Duration::from_nanos(w)) {
                    outstanding.push(r);
                }
            }
            Op::Cancel(i) if !outstanding.is_empty() => {
                let r = outstanding.remove(i % outstanding.len());
                let slot = (r.ready_at(), r.permits());
                // A refused cancel leaves the permits spent: count them.
                if !limiter.cancel(r) {
                    admitted.push(slot);
                }
            }
            Op::Keep(i) if !outstanding.is_empty() => {
                let r = outstanding.remove(i % outstanding.len());
                admitted.push((r.ready_at(), r.permits()));
            }
            _ => {}
        }
    }
    admitted.extend(outstanding.iter().map(|r| (r.ready_at(), r.permits())));
    assert_within_quota(admitted, t, burst)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 5_000 }))]

    #[test]
    fn no_mix_of_reserve_cancel_and_time_exceeds_the_quota(
        t in 1u64..=40,
        burst in 1u32..=5,
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(t, burst, &ops)?;
    }
}

#[test]
fn waiters_that_give_up_in_queue_order_leave_the_limiter_as_they_found_it() {
    // 50 waiters behind a drained burst of 10, cancelled oldest first: the
    // last cancel unwinds all refunds, and the next waiter gets the first
    // slot after the burst.
    let clock = ManualClock::new();
    let q = Quota::per_second(10).unwrap().with_burst(10).unwrap();
    let limiter = RateLimiter::with_clock(q, clock.clone());
    limiter.try_acquire_n(10).unwrap();
    let queue: Vec<_> = (0..50)
        .map(|_| limiter.reserve_n(1, Duration::MAX).unwrap())
        .collect();
    clock.advance(Duration::from_millis(1));
    assert!(queue.into_iter().all(|r| limiter.cancel(r)));
    let next = limiter.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!(next.wait(), Duration::from_millis(99));
}

#[test]
fn waiters_that_give_up_in_any_order_are_refunded_to_later_waiters() {
    // Every other waiter gives up: each refunded slot goes to a newcomer, so
    // the newcomers fill the holes before any fresh slot is used.
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Quota::per_second(10).unwrap(), clock.clone());
    limiter.try_acquire().unwrap();
    let queue: Vec<_> = (0..10)
        .map(|_| limiter.reserve_n(1, Duration::MAX).unwrap())
        .collect();
    let mut kept = Vec::new();
    for (i, r) in queue.into_iter().enumerate() {
        if i % 2 == 0 {
            assert!(limiter.cancel(r));
        } else {
            kept.push(r.ready_at());
        }
    }
    let newcomers: Vec<_> = (0..6)
        .map(|_| limiter.reserve_n(1, Duration::MAX).unwrap().ready_at())
        .collect();
    let ms = 1_000_000;
    assert_eq!(
        newcomers,
        [100 * ms, 300 * ms, 500 * ms, 700 * ms, 900 * ms, 1_100 * ms]
    );
    assert_eq!(kept, [200 * ms, 400 * ms, 600 * ms, 800 * ms, 1_000 * ms]);
}
