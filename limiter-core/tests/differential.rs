//! Differential property suite: random sequences of clock moves (forward,
//! and now and then backward), `try_acquire_n`, `reserve_n`, `cancel` of a
//! random outstanding reservation, `set_quota` and `available`, run on the
//! lock-free `RateLimiter` and on the sequential reference model of
//! `limiter_test_support::model` (u128 arithmetic, written from the
//! specification). Every decision, every wait, every slot, every refund and
//! every `available` must be identical.
//!
//! 50,000 cases by default (`PROPTEST_CASES` overrides it; scripts/test-all
//! sets 4 for miri). Some limiters are made with the clock near `MAX_SPAN`,
//! at the Unix epoch's scale (1.8·10^18 ns) or an hour before `u64::MAX`,
//! and some cases run up to the end of the limiter's span, so the epoch
//! and the out-of-range refusals are compared too. Cancels of reservations
//! that are not the last exercise the refunds.

use std::time::Duration;

use limiter_core::{Clock, ManualClock, Quota, RateLimiter, Reservation};
use proptest::prelude::*;

use limiter_test_support::model::{MAX_SPAN, Model, ModelQuota, Refusal, refusal};

/// Cases per property: 10,000 unless `PROPTEST_CASES` says otherwise
/// (`with_cases` overrides proptest's own reading of the variable).
fn cases() -> u32 {
    let default = if cfg!(miri) { 4 } else { 50_000 };
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    StepBack(u64),
    TryAcquire(u32),
    Reserve(u32, u64),
    Cancel(usize),
    SetQuota(u64, u32),
    Available,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..=120).prop_map(Op::Advance),
        1 => (0u64..=80).prop_map(Op::StepBack),
        4 => (0u32..=9).prop_map(Op::TryAcquire),
        3 => (0u32..=9, prop_oneof![Just(0u64), 0u64..=400, Just(u64::MAX)])
            .prop_map(|(n, w)| Op::Reserve(n, w)),
        2 => any::<usize>().prop_map(Op::Cancel),
        1 => (1u64..=40, 1u32..=8).prop_map(|(t, b)| Op::SetQuota(t, b)),
        1 => Just(Op::Available),
    ]
}

/// The clock reading when the limiter is made.
fn start() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..=1_000,
        1 => (MAX_SPAN as u64 - 1_500)..=(MAX_SPAN as u64 - 200),
        1 => 1_800_000_000_000_000_000u64..=1_800_000_000_000_001_000,
        1 => (u64::MAX - 1_500)..=(u64::MAX - 200),
        1 => (u64::MAX - 3_600_000_000_000)..=(u64::MAX - 3_599_999_999_000),
    ]
}

/// How far the clock has moved since the limiter was made, before the ops.
fn lead() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => Just(0u64),
        1 => (MAX_SPAN as u64 - 1_500)..=(MAX_SPAN as u64 - 200),
    ]
}

fn model_quota(q: Quota) -> ModelQuota {
    ModelQuota {
        t: u128::from(q.period_nanos()),
        burst: q.burst(),
    }
}

/// Runs `ops` on both and fails at the first difference.
fn run(t: u64, burst: u32, start: u64, lead: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let quota = Quota::from_nanos(t, burst).unwrap();
    let clock = ManualClock::starting_at(start);
    let limiter = RateLimiter::with_clock(quota, clock.clone());
    let mut model = Model::starting_at(model_quota(quota), start);
    clock.set(start.saturating_add(lead));
    let mut outstanding: Vec<(Reservation, Option<u64>)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let now = clock.now();
        match *op {
            Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
            Op::StepBack(d) => clock.set(clock.now().saturating_sub(d)),
            Op::TryAcquire(n) => {
                let real = limiter.try_acquire_n(n).map_err(refusal);
                prop_assert_eq!(real, model.try_acquire(now.into(), n), "op {}: {:?}", i, op);
            }
            Op::Reserve(n, max_wait) => {
                let real = limiter.reserve_n(n, Duration::from_nanos(max_wait));
                let expected = model.reserve(now.into(), n, max_wait.into());
                match (real, expected) {
                    (Ok(r), Ok(g)) => {
                        prop_assert_eq!(r.wait().as_nanos(), g.wait, "op {}: {:?}", i, op);
                        prop_assert_eq!(u128::from(r.ready_at()), g.ready_at, "op {}", i);
                        prop_assert_eq!(r.permits(), n);
                        outstanding.push((r, g.id));
                    }
                    (Err(e), Err(m)) => prop_assert_eq!(refusal(e), m, "op {}: {:?}", i, op),
                    (real, expected) => {
                        prop_assert!(false, "op {}: {:?}: {:?} vs {:?}", i, op, real, expected)
                    }
                }
            }
            Op::Cancel(pick) => {
                if !outstanding.is_empty() {
                    let (r, id) = outstanding.swap_remove(pick % outstanding.len());
                    let expected = model.cancel(now.into(), id);
                    prop_assert_eq!(limiter.cancel(r), expected, "op {}: {:?}", i, op);
                }
            }
            Op::SetQuota(t, burst) => {
                let q = Quota::from_nanos(t, burst).unwrap();
                limiter.set_quota(q);
                model.set_quota(now.into(), model_quota(q));
                prop_assert_eq!(limiter.quota(), q);
            }
            Op::Available => {
                prop_assert_eq!(limiter.available(), model.available(now.into()), "op {}", i);
            }
        }
        // After every step the state is the model's, as far as the next
        // plain try can tell.
        let now = clock.now();
        prop_assert_eq!(
            limiter.available(),
            model.available(now.into()),
            "after op {}",
            i
        );
    }
    Ok(())
}

/// The explicit case count; no failure file under miri, whose isolation has
/// no file system (proptest would abort on `getcwd`).
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::with_cases(cases());
    if cfg!(miri) {
        config.failure_persistence = None;
    }
    config
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_limiter_matches_the_sequential_model(
        t in prop_oneof![1u64..=5, 6u64..=50],
        burst in 1u32..=8,
        start in start(),
        lead in lead(),
        ops in prop::collection::vec(op(), 1..64),
    ) {
        run(t, burst, start, lead, &ops)?;
    }
}

#[test]
fn cancel_after_sixteen_quota_changes_refunds_nothing() {
    // Sixteen changes bring the 4-bit generation back to the reservation's,
    // and these bring `tat` back to the reservation's `after` too: t 100 →
    // 1,000 (debt ×10), 14 changes that keep t, then t 1,000 → 10 (debt
    // ÷100) after time moved on. The state word then equals the one the
    // reservation left, but a quota change came after it, so nothing may be
    // refunded. (A refund would restore tat = 2,000, where even honest
    // accounting of the returned permit under the new quota gives 2,090:
    // 9 permits too many.)
    let clock = ManualClock::starting_at(1_000);
    let q = |t: u64| Quota::from_nanos(t, 1_000).unwrap();
    let l = RateLimiter::with_clock(q(100), clock.clone());
    let mut model = Model::starting_at(model_quota(q(100)), 1_000);
    l.try_acquire_n(10).unwrap();
    model.try_acquire(1_000, 10).unwrap();
    let r = l.reserve_n(1, Duration::ZERO).unwrap();
    let g = model.reserve(1_000, 1, 0).unwrap();
    for _ in 0..15 {
        l.set_quota(q(1_000));
        model.set_quota(1_000, model_quota(q(1_000)));
    }
    clock.set(2_000);
    l.set_quota(q(10));
    model.set_quota(2_000, model_quota(q(10)));
    assert!(!model.cancel(2_000, g.id));
    assert!(!l.cancel(r), "refunded across 16 quota changes");
    assert_eq!(l.available(), model.available(2_000));
    assert_eq!(model.tat, 1_100, "limiter time: 2,100 on the clock");
}

#[test]
fn the_model_follows_the_specification_on_known_values() {
    // t = 100, burst 3 at now = 1,000: the burst, then waits of one period
    // per permit owed; a reservation claims the next slot; cancel unwinds.
    let mut m = Model::new(ModelQuota { t: 100, burst: 3 });
    assert_eq!(m.available(1_000), 3);
    m.try_acquire(1_000, 2).unwrap();
    assert_eq!(m.try_acquire(1_000, 2), Err(Refusal::Limited { wait: 100 }));
    let g = m.reserve(1_000, 2, 100).unwrap();
    assert_eq!((g.wait, g.ready_at), (100, 1_100));
    assert_eq!(m.available(1_100), 0);
    assert!(m.cancel(1_000, g.id));
    assert_eq!(m.available(1_000), 1);
    // Quota change in debt: 200 ns owed at t = 100 become 400 at t = 200.
    m.set_quota(1_000, ModelQuota { t: 200, burst: 3 });
    assert_eq!(m.tat, 1_400);
    assert_eq!(
        m.try_acquire(1_000, 4),
        Err(Refusal::Insufficient {
            requested: 4,
            burst: 3
        })
    );
    assert_eq!(
        m.try_acquire(MAX_SPAN + 1, 1),
        Err(Refusal::OutOfRange { now: MAX_SPAN + 1 })
    );
}

#[test]
fn the_model_refunds_out_of_order_cancels_on_known_values() {
    // t = 100, burst 1, made at clock 5,000: slots at 5,100, 5,200, 5,300.
    let mut m = Model::starting_at(ModelQuota { t: 100, burst: 1 }, 5_000);
    m.try_acquire(5_000, 1).unwrap();
    let a = m.reserve(5_000, 1, u128::MAX).unwrap();
    let b = m.reserve(5_000, 1, u128::MAX).unwrap();
    let c = m.reserve(5_000, 1, u128::MAX).unwrap();
    assert_eq!([a.ready_at, b.ready_at, c.ready_at], [5_100, 5_200, 5_300]);
    // a is not the last: its slot becomes a refund, which the next
    // reservation takes instead of 5,400.
    assert!(m.cancel(5_000, a.id));
    let d = m.reserve(5_010, 1, u128::MAX).unwrap();
    assert_eq!((d.ready_at, d.wait), (5_100, 90));
    // b, then c, then d (which holds a's change again): each cancel on top
    // restores the state, so the whole queue unwinds to just the first try.
    assert!(m.cancel(5_010, b.id));
    assert!(m.cancel(5_010, c.id));
    assert!(m.cancel(5_010, d.id));
    assert_eq!(m.tat, 100);
    // A refund whose slot has passed is no refund.
    let e = m.reserve(5_010, 1, u128::MAX).unwrap();
    let _f = m.reserve(5_010, 1, u128::MAX).unwrap();
    assert!(!m.cancel(5_150, e.id));
    assert_eq!(m.reserve(5_150, 1, 0), Err(Refusal::Limited { wait: 150 }));
}
