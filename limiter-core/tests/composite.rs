//! `try_acquire_all` / `reserve_all` over real `RateLimiter`s against a plain
//! sequential model: one `tat` per limit, the request decided on all of them
//! at once, nothing charged on a refusal. Every answer (grant, wait, the
//! refusing part and its exact wait) and every limiter's `available()` after
//! each step must match.

use core::time::Duration;

use limiter_core::{
    AcquireError, ManualClock, Quota, RateLimiter, composite::Limit, composite::reserve_all,
};
use proptest::prelude::*;

/// (t in ns, burst) of the three limits.
const QUOTAS: [(u64, u32); 3] = [(100_000_000, 2), (30_000_000, 5), (250_000_000, 3)];

#[derive(Debug, Clone)]
struct Model {
    tat: [u64; 3],
}

impl Model {
    fn room(&self, k: usize, now: u64) -> i128 {
        let (t, burst) = QUOTAS[k];
        i128::from(now + t * u64::from(burst)) - i128::from(self.tat[k].max(now))
    }

    fn available(&self, k: usize, now: u64) -> u32 {
        (self.room(k, now).max(0) / i128::from(QUOTAS[k].0)) as u32
    }

    /// The first part (in order) that refuses, with its error; otherwise
    /// takes every part and returns the longest wait.
    fn decide(
        &mut self,
        now: u64,
        parts: &[(usize, u32)],
        max_wait: u64,
    ) -> Result<u64, (usize, AcquireError)> {
        let mut longest = 0;
        for (i, &(k, n)) in parts.iter().enumerate() {
            let (t, burst) = QUOTAS[k];
            if n > burst {
                return Err((
                    i,
                    AcquireError::InsufficientCapacity {
                        requested: n,
                        burst,
                    },
                ));
            }
            let need = i128::from(n) * i128::from(t) - self.room(k, now);
            if n > 0 && need > i128::from(max_wait) {
                let wait = Duration::from_nanos(need as u64);
                return Err((i, AcquireError::RateLimited { wait }));
            }
            if n > 0 {
                longest = longest.max(need.max(0) as u64);
            }
        }
        for &(k, n) in parts {
            if n > 0 {
                self.tat[k] = self.tat[k].max(now) + u64::from(n) * QUOTAS[k].0;
            }
        }
        Ok(longest)
    }
}

#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Decide {
        parts: Vec<(usize, u32)>,
        max_wait: u64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u64..300_000_000).prop_map(Step::Advance),
        (
            proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3),
            proptest::collection::vec(0u32..=6, 3),
            prop_oneof![Just(0u64), 0u64..400_000_000],
        )
            .prop_map(|(keys, ns, max_wait)| Step::Decide {
                parts: keys.into_iter().map(|k| (k, ns[k])).collect(),
                max_wait,
            }),
    ]
}

proptest! {
    // Miri runs without the host's environment, so PROPTEST_CASES does not
    // reach it: the count is set here, as in the other properties.
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    #[test]
    fn composite_decisions_match_the_sequential_model(steps in proptest::collection::vec(step(), 1..60)) {
        let clock = ManualClock::new();
        let limiters: Vec<RateLimiter<ManualClock>> = QUOTAS
            .iter()
            .map(|&(t, b)| RateLimiter::with_clock(Quota::from_nanos(t, b).unwrap(), clock.clone()))
            .collect();
        let mut model = Model { tat: [0; 3] };
        let mut now = 0;
        for step in steps {
            match step {
                Step::Advance(ns) => {
                    clock.advance(Duration::from_nanos(ns));
                    now += ns;
                }
                Step::Decide { parts, max_wait } => {
                    let dyn_parts: Vec<(&dyn Limit, u32)> =
                        parts.iter().map(|&(k, n)| (&limiters[k] as &dyn Limit, n)).collect();
                    let got = reserve_all(&dyn_parts, Duration::from_nanos(max_wait));
                    match (model.decide(now, &parts, max_wait), got) {
                        (Ok(wait), Ok(granted)) => {
                            prop_assert_eq!(granted.wait(), Duration::from_nanos(wait));
                            prop_assert_eq!(granted.parts().len(), parts.len());
                            // The permits are kept: dropping keeps them spent.
                            drop(granted);
                        }
                        (Err((index, error)), Err(refused)) => {
                            prop_assert_eq!(refused.index, index);
                            prop_assert_eq!(refused.error, error);
                            prop_assert_eq!(refused.unrefunded, 0);
                        }
                        (want, got) => prop_assert!(false, "model {:?}, limiters {:?}", want, got),
                    }
                }
            }
            for (k, limiter) in limiters.iter().enumerate() {
                prop_assert_eq!(limiter.available(), model.available(k, now), "limit {}", k);
            }
        }
    }
}
