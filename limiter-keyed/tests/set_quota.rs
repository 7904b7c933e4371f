//! `KeyedLimiter::set_quota` against a sequential model: one
//! `RateLimiter` per key, every one of them changed at once (eagerly) by
//! `RateLimiter::set_quota`. The keyed limiter applies a change lazily, on
//! each key's next decision, at the change's own time: every decision, wait
//! and look must be the model's, whatever the interleaving of changes,
//! decisions and time.

use std::collections::HashMap;
use std::time::Duration;

use limiter_core::{ManualClock, Quota, RateLimiter};
use limiter_keyed::{KeyedError, KeyedLimiter};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Take(u8, u32),
    Look(u8),
    Set(usize),
}

fn quotas() -> [Quota; 4] {
    let q = |t: u64, burst: u32| {
        Quota::with_period(Duration::from_nanos(t))
            .unwrap()
            .with_burst(burst)
            .unwrap()
    };
    [q(100, 3), q(30, 5), q(250, 1), q(100, 8)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..=400).prop_map(Op::Advance),
        5 => (0u8..3, 0u32..=4).prop_map(|(k, n)| Op::Take(k, n)),
        1 => (0u8..3).prop_map(Op::Look),
        2 => (0usize..4).prop_map(Op::Set),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 1_000 }))]

    #[test]
    fn a_lazy_change_decides_as_an_eager_one(ops in proptest::collection::vec(op(), 1..60)) {
        let quotas = quotas();
        let clock = ManualClock::new();
        let keyed = KeyedLimiter::builder(quotas[0])
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut model: HashMap<u8, RateLimiter<ManualClock>> = HashMap::new();
        let mut quota = quotas[0];
        for op in ops {
            match op {
                Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
                Op::Set(i) => {
                    quota = quotas[i];
                    keyed.set_quota(quota);
                    for limiter in model.values() {
                        limiter.set_quota(quota);
                    }
                    prop_assert_eq!(keyed.quota(), quota);
                }
                Op::Take(key, n) => {
                    let reference = model
                        .entry(key)
                        .or_insert_with(|| RateLimiter::with_clock(quota, clock.clone()));
                    let expected = reference.try_acquire_n(n).map_err(KeyedError::Limited);
                    prop_assert_eq!(keyed.try_acquire_n(&key, n), expected, "key {}", key);
                }
                Op::Look(key) => {
                    let expected = model.get(&key).map_or(quota.burst(), |l| l.available());
                    prop_assert_eq!(keyed.available(&key), expected, "key {}", key);
                }
            }
        }
    }
}

#[test]
fn a_key_with_its_own_quota_keeps_it() {
    let clock = ManualClock::new();
    let own = Quota::per_second(100).unwrap().with_burst(10).unwrap();
    let keyed = KeyedLimiter::builder(Quota::per_second(10).unwrap())
        .quota_for("admin", own)
        .clock(clock)
        .build()
        .unwrap();
    keyed.try_acquire_n(&"admin", 4).unwrap();
    keyed.set_quota(Quota::per_second(1).unwrap());
    assert_eq!(keyed.available(&"admin"), 6);
    assert_eq!(keyed.quota_of(&"admin"), own);
    assert_eq!(keyed.quota_of(&"guest"), Quota::per_second(1).unwrap());
}

#[test]
fn a_reservation_made_before_a_change_is_not_given_back() {
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::builder(Quota::per_second(10).unwrap())
        .clock(clock)
        .build()
        .unwrap();
    let r = keyed.reserve_n(&1u8, 1, Duration::ZERO).unwrap();
    keyed.set_quota(Quota::per_second(20).unwrap());
    assert!(!keyed.cancel(&1u8, r), "refunded into the new quota");
    let r = keyed.reserve_n(&1u8, 1, Duration::MAX).unwrap();
    assert!(keyed.cancel(&1u8, r), "a reservation of the quota in force");
}
