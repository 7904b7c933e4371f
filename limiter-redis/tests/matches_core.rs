//! The script decides exactly as `limiter_core::RateLimiter` does: the same
//! operation sequence on a shared `ManualClock` (client-clock mode) gets the
//! same answers, waits and remaining counts.

use limiter_test_support::redis as support;

use std::time::Duration;

use limiter_core::{AcquireError, ManualClock, Quota, RateLimiter};
use limiter_redis::{RedisLimitError, RedisLimiter, Source};
use support::{RedisServer, denied};

/// A small deterministic generator (64-bit LCG), so failures replay.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

async fn compare(server: &RedisServer, quota: Quota, seed: u64, steps: usize) {
    let clock = ManualClock::new();
    let core = RateLimiter::with_clock(quota, clock.clone());
    let redis = RedisLimiter::builder(server.manager().await, quota)
        .key_prefix(format!("cmp{seed}"))
        .client_clock(clock.clone())
        .deny_cache(false)
        // The manual clock stands still while real time runs on Redis.
        .expiry_margin(Duration::from_secs(60))
        .build()
        .unwrap();
    let t_us = quota.period_nanos() / 1_000;
    let burst = quota.burst();
    let mut rng = Lcg(seed);
    let (mut granted, mut denied_count) = (0, 0);
    for step in 0..steps {
        let n = rng.below(u64::from(burst) + 1) as u32;
        let ctx = format!("seed {seed} step {step} n {n} now {}", clock.now_us());
        match rng.below(4) {
            0 => {
                let result = redis.try_acquire_n("k", n).await;
                match core.try_acquire_n(n) {
                    Ok(()) => {
                        let a = result.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        assert_eq!(a.source, Source::Redis, "{ctx}");
                        assert_eq!(a.wait, Duration::ZERO, "{ctx}");
                        assert_eq!(a.remaining, core.available(), "{ctx}");
                        granted += 1;
                    }
                    Err(AcquireError::RateLimited { wait }) => {
                        let d = denied(result);
                        assert_eq!(d.source, Source::Redis, "{ctx}");
                        assert_eq!(d.retry_after, wait, "{ctx}");
                        assert_eq!(d.remaining, core.available(), "{ctx}");
                        denied_count += 1;
                    }
                    Err(e) => panic!("{ctx}: {e}"),
                }
            }
            1 => {
                let max_wait = Duration::from_micros(rng.below(3 * t_us));
                let result = redis.reserve_n("k", n, max_wait).await;
                match core.reserve_n(n, max_wait) {
                    Ok(r) => {
                        let a = result.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        assert_eq!(a.wait, r.wait(), "{ctx}");
                        assert_eq!(a.remaining, core.available(), "{ctx}");
                        granted += 1;
                    }
                    Err(AcquireError::RateLimited { wait }) => {
                        let d = denied(result);
                        assert_eq!(d.retry_after, wait, "{ctx}");
                        assert_eq!(d.remaining, core.available(), "{ctx}");
                        denied_count += 1;
                    }
                    Err(e) => panic!("{ctx}: {e}"),
                }
            }
            2 => match redis.peek("k").await {
                Ok(a) => {
                    assert!(core.available() >= 1, "{ctx}");
                    assert_eq!(a.remaining, core.available(), "{ctx}");
                }
                result => {
                    let d = denied(result);
                    assert_eq!(core.available(), 0, "{ctx}");
                    assert_eq!(d.remaining, 0, "{ctx}");
                    assert!(d.retry_after > Duration::ZERO, "{ctx}");
                }
            },
            _ => clock.advance(Duration::from_micros(rng.below(2 * t_us))),
        }
    }
    // The sequence exercised both outcomes, not just one.
    assert!(
        granted > 20 && denied_count > 20,
        "granted {granted}, denied {denied_count}"
    );
    // Over the burst is a typed error on both.
    assert!(matches!(
        redis.try_acquire_n("k", burst + 1).await,
        Err(RedisLimitError::InsufficientCapacity { requested, burst: b })
            if requested == burst + 1 && b == burst
    ));
}

trait NowMicros {
    fn now_us(&self) -> u64;
}

impl NowMicros for ManualClock {
    fn now_us(&self) -> u64 {
        limiter_core::Clock::now(self) / 1_000
    }
}

#[tokio::test]
async fn same_decisions_as_the_in_process_limiter() {
    let server = RedisServer::start();
    let paced = Quota::with_period(Duration::from_millis(10)).unwrap();
    compare(&server, paced, 1, 400).await;
    compare(&server, paced.with_burst(5).unwrap(), 2, 400).await;
    let odd = Quota::with_period(Duration::from_micros(7_919)).unwrap();
    compare(&server, odd.with_burst(13).unwrap(), 3, 400).await;
}

#[tokio::test]
async fn periods_that_are_not_whole_microseconds_are_rejected() {
    let server = RedisServer::start();
    for quota in [
        Quota::per_second(3).unwrap(),
        Quota::with_period(Duration::from_nanos(999)).unwrap(),
    ] {
        assert!(matches!(
            RedisLimiter::new(server.manager().await, quota),
            Err(RedisLimitError::UnsupportedQuota { .. })
        ));
    }
    let rounded = limiter_redis::quota_in_micros(Quota::per_second(3).unwrap()).unwrap();
    assert!(RedisLimiter::new(server.manager().await, rounded).is_ok());
}
