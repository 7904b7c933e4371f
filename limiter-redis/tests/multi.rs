//! Several limits in one atomic decision on a real server: exact grants,
//! waits and refusals under a manual client clock, nothing charged on a
//! refusal, the typed errors, and a property test of `try_acquire_all` /
//! `reserve_all` against a plain sequential model of the GCRA per key.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::{ManualClock, Quota};
use limiter_redis::{Admission, FailurePolicy, RedisLimitError, RedisLimiter, Source};
use proptest::prelude::*;
use support::{RedisServer, denied};

fn quota(period_ms: u64, burst: u32) -> Quota {
    Quota::with_period(Duration::from_millis(period_ms))
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

async fn limiter(server: &RedisServer, clock: &ManualClock, prefix: &str) -> RedisLimiter {
    RedisLimiter::builder(server.manager().await, quota(100, 1))
        .key_prefix(prefix)
        .client_clock(clock.clone())
        // The manual clock stands still while Redis' expiry clock runs.
        .expiry_margin(Duration::from_secs(3600))
        .build()
        .unwrap()
}

/// Remaining permits of `key` under `q`, read with an `n = 0` decision.
async fn remaining(limiter: &RedisLimiter, key: &str, q: Quota) -> u32 {
    limiter.try_acquire_all(&[(key, q, 0)]).await.unwrap()[0].remaining
}

#[tokio::test]
async fn all_or_nothing_with_the_longest_wait() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_700_000_000_000_000_000);
    let limiter = limiter(&server, &clock, "multi").await;
    let (user, route, global) = (quota(100, 2), quota(200, 3), quota(50, 4));
    let limits = [
        ("user", user, 1),
        ("route", route, 1),
        ("global", global, 2),
    ];
    let granted = limiter.try_acquire_all(&limits).await.unwrap();
    let summary: Vec<(u32, Duration)> = granted
        .iter()
        .map(|a| (a.remaining, a.reset_after))
        .collect();
    let ms = Duration::from_millis;
    assert_eq!(summary, [(1, ms(100)), (2, ms(200)), (2, ms(100))]);
    assert!(
        granted
            .iter()
            .all(|a| a.wait.is_zero() && a.source == Source::Redis)
    );
    limiter.try_acquire_all(&limits).await.unwrap();
    // user and global are empty now; the route has one left.
    let d = denied(limiter.try_acquire_all(&limits).await);
    // user's next permit is 100 ms away, global's two 100 ms: the longest.
    assert_eq!(
        (d.retry_after, d.remaining, d.source),
        (ms(100), 0, Source::Redis)
    );
    assert_eq!(d.reset_after, ms(400)); // route's: two permits of 200 ms
    assert_eq!(remaining(&limiter, "route", route).await, 1); // not charged
    // A reservation waits for the longest slot: global's 2 permits at 100 ms.
    let r = limiter.reserve_all(&limits, ms(100)).await.unwrap();
    assert!(r.iter().all(|a| a.wait == ms(100)));
    assert_eq!(remaining(&limiter, "route", route).await, 0);
    // Only global: the next pair is 200 ms away.
    let d = denied(limiter.reserve_all(&limits[2..], ms(150)).await);
    assert_eq!(d.retry_after, ms(200));
    clock.advance(ms(200));
    assert_eq!(
        limiter.try_acquire_all(&limits[2..]).await.unwrap()[0].remaining,
        0
    );
}

#[tokio::test]
async fn bad_requests_are_refused_before_any_call() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::new(server.manager().await, quota(100, 2)).unwrap();
    let q = quota(100, 2);
    assert!(limiter.try_acquire_all(&[]).await.unwrap().is_empty());
    assert!(matches!(
        limiter.try_acquire_all(&[("a", q, 1), ("a", q, 1)]).await,
        Err(RedisLimitError::DuplicateKey { key }) if key == "a"
    ));
    assert!(matches!(
        limiter.try_acquire_all(&[("a", q, 1), ("b", q, 3)]).await,
        Err(RedisLimitError::InsufficientCapacity {
            requested: 3,
            burst: 2
        })
    ));
    let thirds = Quota::per_second(3).unwrap();
    assert!(matches!(
        limiter.try_acquire_all(&[("a", thirds, 1)]).await,
        Err(RedisLimitError::UnsupportedQuota { .. })
    ));
    assert_eq!(limiter.redis_calls(), 0);
    // One server takes keys of any slot.
    assert_eq!(
        limiter
            .try_acquire_all(&[("a", q, 1), ("b", q, 1)])
            .await
            .unwrap()
            .len(),
        2
    );
}

/// The sequential model: one `tat` per key in µs, decided all or nothing.
#[derive(Debug, Clone, Default)]
struct Model {
    tat: [u64; 3],
}

const QUOTAS: [(u64, u32); 3] = [(100_000, 2), (30_000, 5), (250_000, 3)]; // (t µs, burst)

impl Model {
    /// The answer to `parts` (key index, n) at `now` with `max_wait` µs:
    /// Ok((wait, per-key remaining, reset)) or Err(retry_after).
    fn decide(
        &mut self,
        now: u64,
        parts: &[(usize, u32)],
        max_wait: u64,
    ) -> Result<(u64, Vec<(u32, u64)>), u64> {
        let mut longest = 0i64;
        let mut allowed = true;
        for &(k, n) in parts {
            let (t, burst) = QUOTAS[k];
            let base = self.tat[k].max(now);
            let room = (now + t * u64::from(burst)) as i64 - base as i64;
            if n > 0 {
                let need = i64::from(n) * t as i64 - room;
                allowed &= need <= max_wait as i64;
                longest = longest.max(need);
            }
        }
        if !allowed {
            return Err(longest as u64);
        }
        let mut each = Vec::new();
        for &(k, n) in parts {
            let (t, burst) = QUOTAS[k];
            let base = self.tat[k].max(now);
            let room = (now + t * u64::from(burst)) as i64 - base as i64 - i64::from(n) * t as i64;
            let new_tat = base + u64::from(n) * t;
            if n > 0 {
                self.tat[k] = new_tat;
            }
            let remaining = if room < t as i64 {
                0
            } else {
                (room / t as i64) as u32
            };
            each.push((remaining, new_tat - now));
        }
        Ok((longest as u64, each))
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
        (0u64..300_000).prop_map(Step::Advance),
        (
            proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3),
            proptest::collection::vec(0u32..=3, 3),
            prop_oneof![Just(0u64), 0u64..400_000],
        )
            .prop_map(|(keys, ns, max_wait)| Step::Decide {
                parts: keys
                    .into_iter()
                    .map(|k| (k, ns[k].min(QUOTAS[k].1)))
                    .collect(),
                max_wait,
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn multi_key_decisions_match_the_sequential_model(steps in proptest::collection::vec(step(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let server = RedisServer::start();
        rt.block_on(async {
            let start = 1_700_000_000_000_000u64; // µs
            let clock = ManualClock::starting_at(start * 1_000);
            let limiter = limiter(&server, &clock, "model").await;
            let names = ["a", "b", "c"];
            let quotas: Vec<Quota> = QUOTAS
                .iter()
                .map(|&(t, b)| Quota::with_period(Duration::from_micros(t)).unwrap().with_burst(b).unwrap())
                .collect();
            let mut model = Model { tat: [start; 3] };
            let mut now = start;
            for step in steps {
                match step {
                    Step::Advance(us) => {
                        clock.advance(Duration::from_micros(us));
                        now += us;
                    }
                    Step::Decide { parts, max_wait } => {
                        let limits: Vec<(&str, Quota, u32)> =
                            parts.iter().map(|&(k, n)| (names[k], quotas[k], n)).collect();
                        let got = limiter.reserve_all(&limits, Duration::from_micros(max_wait)).await;
                        match (model.decide(now, &parts, max_wait), got) {
                            (Ok((wait, each)), Ok(admissions)) => {
                                let seen: Vec<(u32, u64)> = admissions
                                    .iter()
                                    .map(|a: &Admission| (a.remaining, a.reset_after.as_micros() as u64))
                                    .collect();
                                prop_assert_eq!(seen, each);
                                prop_assert!(admissions.iter().all(|a| a.wait == Duration::from_micros(wait)));
                            }
                            (Err(retry), Err(RedisLimitError::RateLimited { retry_after, .. })) => {
                                prop_assert_eq!(retry_after, Duration::from_micros(retry));
                            }
                            (want, got) => prop_assert!(false, "model {want:?}, Redis {got:?}"),
                        }
                    }
                }
            }
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn every_failure_policy_answers_a_multi_key_decision() {
    let (a, b) = (quota(3_600_000, 4), quota(3_600_000, 2));
    let limits = [("a", a, 1), ("b", b, 1)];
    for policy in [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Local { share: 0.5 },
        FailurePolicy::Error,
    ] {
        let mut server = RedisServer::start();
        let limiter = RedisLimiter::builder(server.manager().await, a)
            .call_timeout(Duration::from_millis(200))
            .retry_interval(Duration::from_secs(60))
            .failure_policy(policy)
            .build()
            .unwrap();
        limiter.try_acquire_all(&limits).await.unwrap();
        server.kill();
        let mut admitted = 0;
        for _ in 0..3 {
            match (policy, limiter.try_acquire_all(&limits).await) {
                (FailurePolicy::Open, Ok(all)) => {
                    assert!(all.len() == 2 && all.iter().all(|x| x.source == Source::FailOpen));
                    admitted += 1;
                }
                (FailurePolicy::Closed, r) => assert_eq!(denied(r).source, Source::FailClosed),
                (FailurePolicy::Local { .. }, Ok(all)) => {
                    assert!(all.iter().all(|x| x.source == Source::Local));
                    admitted += 1;
                }
                (FailurePolicy::Local { .. }, r) => {
                    let d = denied(r);
                    // b's local limiter (burst ⌊2 · 0.5⌋ = 1) refused: its
                    // next permit is 2 h away at half the rate (less the
                    // real time since the grant: the local clock is real).
                    assert_eq!(d.source, Source::Local);
                    let two_hours = Duration::from_secs(7_200);
                    assert!(
                        d.retry_after <= two_hours
                            && d.retry_after > two_hours - Duration::from_secs(60)
                    );
                }
                (FailurePolicy::Error, Err(e)) => assert!(e.is_unavailable(), "{e}"),
                (policy, other) => panic!("{policy:?}: {other:?}"),
            }
        }
        let expected = match policy {
            FailurePolicy::Open => 3,
            // Local: a at burst 2, b at burst 1: one decision, all or nothing.
            FailurePolicy::Local { .. } => 1,
            _ => 0,
        };
        assert_eq!(admitted, expected, "{policy:?}");
        assert_eq!(
            limiter.redis_failures(),
            1,
            "{policy:?}: one failed call, then the breaker"
        );
    }
}
