//! Differential property suite: random sequences of clock moves (forward,
//! and now and then backward), `try_acquire_n`, `reserve_n`, `cancel` of a
//! random outstanding reservation, `set_quota` and `available`, run on the
//! lock-free `RateLimiter` and on the sequential reference model of
//! `tests/support/model.rs` (u128 arithmetic, written from the
//! specification). Every decision, every wait, every slot, every refund and
//! every `available` must be identical.
//!
//! 50,000 cases by default (`PROPTEST_CASES` overrides it; scripts/test-all
//! sets 4 for miri). Some cases start near `MAX_SPAN` so the out-of-range
//! refusals are compared too.

use std::time::Duration;

use limiter_core::{Clock, ManualClock, Quota, RateLimiter, Reservation};
use proptest::prelude::*;

#[allow(dead_code, unreachable_pub)] // shared with loom-tests, which uses all of it
mod support;

use support::model::{MAX_SPAN, Model, ModelQuota, Refusal, refusal};

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

fn start() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..=1_000,
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
fn run(t: u64, burst: u32, start: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let quota = Quota::from_nanos(t, burst).unwrap();
    let clock = ManualClock::starting_at(start);
    let limiter = RateLimiter::with_clock(quota, clock.clone());
    let mut model = Model::new(model_quota(quota));
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
                    prop_assert_eq!(limiter.cancel(r), model.cancel(id), "op {}: {:?}", i, op);
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
        ops in prop::collection::vec(op(), 1..64),
    ) {
        run(t, burst, start, &ops)?;
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
    let mut model = Model::new(model_quota(q(100)));
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
    assert!(!model.cancel(g.id));
    assert!(!l.cancel(r), "refunded across 16 quota changes");
    assert_eq!(l.available(), model.available(2_000));
    assert_eq!(model.tat, 2_100);
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
    assert!(m.cancel(g.id));
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
