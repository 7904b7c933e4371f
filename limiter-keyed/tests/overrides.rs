//! Per-key quotas set and removed live (`set_quota_for`,
//! `remove_quota_for`) against a sequential model: one `RateLimiter` per
//! key, moved by `RateLimiter::set_quota` when its key's override is set or
//! removed, and when the shared quota changes for keys without one. Every
//! decision, wait and look of the keyed limiter must be the model's.

use std::collections::HashMap;
use std::time::Duration;

use limiter_core::{ManualClock, Quota, RateLimiter};
use limiter_keyed::{KeyedError, KeyedLimiter, OverrideError, WhenFull};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Take(u8, u32),
    Look(u8),
    SetShared(usize),
    SetOverride(u8, usize),
    RemoveOverride(u8),
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
        1 => (0usize..4).prop_map(Op::SetShared),
        2 => (0u8..3, 0usize..4).prop_map(|(k, i)| Op::SetOverride(k, i)),
        1 => (0u8..3).prop_map(Op::RemoveOverride),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 1_000 }))]

    #[test]
    fn overrides_decide_as_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let quotas = quotas();
        let clock = ManualClock::new();
        let keyed = KeyedLimiter::builder(quotas[0])
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut model: HashMap<u8, RateLimiter<ManualClock>> = HashMap::new();
        let mut own: HashMap<u8, Quota> = HashMap::new();
        let mut shared = quotas[0];
        for op in ops {
            match op {
                Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
                Op::SetShared(i) => {
                    shared = quotas[i];
                    keyed.set_quota(shared);
                    for (key, limiter) in &model {
                        if !own.contains_key(key) {
                            limiter.set_quota(shared);
                        }
                    }
                }
                Op::SetOverride(key, i) => {
                    let previous = own.insert(key, quotas[i]);
                    prop_assert_eq!(keyed.set_quota_for(&key, quotas[i]), Ok(previous));
                    if let Some(l) = model.get(&key) {
                        l.set_quota(quotas[i]);
                    }
                }
                Op::RemoveOverride(key) => {
                    let removed = own.remove(&key);
                    prop_assert_eq!(keyed.remove_quota_for(&key), removed);
                    if let (Some(l), Some(_)) = (model.get(&key), removed) {
                        l.set_quota(shared);
                    }
                }
                Op::Take(key, n) => {
                    let quota = own.get(&key).copied().unwrap_or(shared);
                    let reference = model
                        .entry(key)
                        .or_insert_with(|| RateLimiter::with_clock(quota, clock.clone()));
                    let expected = reference.try_acquire_n(n).map_err(KeyedError::Limited);
                    prop_assert_eq!(keyed.try_acquire_n(&key, n), expected, "key {}", key);
                }
                Op::Look(key) => {
                    let quota = own.get(&key).copied().unwrap_or(shared);
                    prop_assert_eq!(keyed.quota_of(&key), quota);
                    let expected = model.get(&key).map_or(quota.burst(), |l| l.available());
                    prop_assert_eq!(keyed.available(&key), expected, "key {}", key);
                }
            }
        }
    }
}

#[test]
fn an_evicted_key_comes_back_under_its_override() {
    let clock = ManualClock::new();
    let gold = Quota::per_second(100).unwrap().with_burst(10).unwrap();
    let keyed = KeyedLimiter::builder(Quota::per_second(1).unwrap())
        .max_keys(1)
        .when_full(WhenFull::EvictLeastRecent)
        .clock(clock)
        .build()
        .unwrap();
    keyed.set_quota_for(&"gold", gold).unwrap();
    keyed.try_acquire_n(&"gold", 10).unwrap();
    keyed.try_acquire(&"other").unwrap(); // evicts "gold", debt and all
    assert_eq!(keyed.len(), 1);
    assert_eq!(keyed.try_acquire_n(&"gold", 10), Ok(())); // back full, at 10
}

#[test]
fn past_the_cap_nothing_changes() {
    let keyed = KeyedLimiter::builder(Quota::per_second(1).unwrap())
        .max_overrides(1)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let q = Quota::per_second(5).unwrap();
    keyed.set_quota_for(&1u32, q).unwrap();
    let refused = keyed.set_quota_for(&2, q).unwrap_err();
    assert_eq!(
        refused,
        OverrideError::TooManyOverrides { max_overrides: 1 }
    );
    assert!(refused.to_string().contains("raise max_overrides"));
    assert_eq!(keyed.overrides(), vec![(1, q)]);
    assert_eq!(keyed.override_of(&2), None);
    let too_many = KeyedLimiter::builder(Quota::per_second(1).unwrap())
        .quota_for(1u32, q)
        .quota_for(2, q)
        .max_overrides(1)
        .build();
    assert!(too_many.is_err());
}

/// Threads deciding on one key while another moves it between two quotas
/// of the same rate: no decision is lost or doubled, so exactly the burst
/// plus what time refills is admitted, however the moves interleave.
#[test]
fn moves_under_contention_neither_lose_nor_double_permits() {
    let clock = ManualClock::new();
    let a = Quota::per_second(1).unwrap().with_burst(1_000).unwrap();
    let keyed = std::sync::Arc::new(
        KeyedLimiter::builder(a)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let admitted = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..600 {
                    if keyed.try_acquire(&"k").is_ok() {
                        admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
        s.spawn(|| {
            for _ in 0..200 {
                keyed.set_quota_for(&"k", a).unwrap();
                keyed.remove_quota_for(&"k");
            }
        });
    });
    // The clock stood still: the burst, exactly.
    assert_eq!(admitted.into_inner(), 1_000);
    assert_eq!(keyed.available(&"k"), 0);
}
