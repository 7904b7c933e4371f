//! The sliding window, warm-up and priority limiters against plain
//! sequential reference models written from their specifications (u128 and
//! f64 arithmetic, no atomics, no packing): every decision and every wait
//! identical over random operation sequences.

use std::time::Duration;

use limiter_core::{
    AcquireError, ManualClock, PriorityLimiter, Quota, SlidingWindow, WarmUpBuilder,
};
use proptest::prelude::*;

/// 10,000 cases natively; 4 under miri, which cannot read `PROPTEST_CASES`
/// from an isolated environment and interprets every case.
fn cases() -> u32 {
    let default = if cfg!(miri) { 4 } else { 10_000 };
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

/// A clock move: forward by this many ns, or (rarely) back.
fn clock_move(scale: u64) -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => (0..scale * 3).prop_map(|d| d as i64),
        1 => (0..scale).prop_map(|d| -(d as i64)),
    ]
}

fn apply(clock: &ManualClock, now: &mut u64, step: i64) {
    *now = if step >= 0 {
        *now + step as u64
    } else {
        now.saturating_sub(step.unsigned_abs())
    };
    clock.set(*now);
}

// --- sliding window ------------------------------------------------------------

/// The spec: counts per window index, the estimate
/// prev·(W − e) + (curr + n)·W ≤ limit·W, a clock before the newest window
/// read as that window's start.
struct WindowModel {
    limit: u128,
    w: u128,
    newest: u128,
    counts: std::collections::HashMap<u128, u128>,
}

impl WindowModel {
    fn view(&self, now: u128) -> (u128, u128, u128) {
        let (k, e) = if now / self.w >= self.newest {
            (now / self.w, now % self.w)
        } else {
            (self.newest, 0)
        };
        let count = |k: u128| self.counts.get(&k).copied().unwrap_or(0);
        (k, e, if k == 0 { 0 } else { count(k - 1) })
    }

    fn fits(&self, prev: u128, curr: u128, e: u128, n: u128) -> bool {
        prev * (self.w - e) + (curr + n) * self.w <= self.limit * self.w
    }

    fn try_acquire(&mut self, now: u128, n: u128) -> Result<(), AcquireError> {
        if n > self.limit {
            return Err(AcquireError::InsufficientCapacity {
                requested: n as u32,
                burst: self.limit as u32,
            });
        }
        let (k, e, prev) = self.view(now);
        let curr = self.counts.get(&k).copied().unwrap_or(0);
        if self.fits(prev, curr, e, n) {
            *self.counts.entry(k).or_default() += n;
            self.newest = self.newest.max(k);
            return Ok(());
        }
        // The wait: scan forward nanosecond by nanosecond would be too slow;
        // instead try each of the three windows' earliest fitting offset by
        // bisection on the monotone estimate.
        let start = k * self.w;
        let at = |t: u128| -> bool {
            let (kk, ee) = (t / self.w, t % self.w);
            let c = |x: u128| {
                if x == k {
                    curr
                } else if x + 1 == k {
                    prev
                } else {
                    0
                }
            };
            let p = if kk == 0 { 0 } else { c(kk - 1) };
            self.fits(p, c(kk), ee, n)
        };
        let (mut lo, mut hi) = (start + e, start + 2 * self.w);
        while lo < hi {
            let mid = (lo + hi) / 2;
            // The estimate only falls within a window and at a boundary, so
            // "fits" is monotone in t over [now, 2 windows on].
            if at(mid) { hi = mid } else { lo = mid + 1 }
        }
        Err(AcquireError::RateLimited {
            wait: Duration::from_nanos((lo - now) as u64),
        })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn sliding_window_matches_its_model(
        limit in 1u32..20,
        w in 1u64..2_000,
        ops in prop::collection::vec((clock_move(700), 0u32..25), 1..60),
    ) {
        let clock = ManualClock::new();
        let window = SlidingWindow::with_clock(limit, Duration::from_nanos(w), clock.clone()).unwrap();
        let mut model = WindowModel { limit: limit.into(), w: w.into(), newest: 0, counts: Default::default() };
        let mut now = 0;
        for (step, n) in ops {
            apply(&clock, &mut now, step);
            prop_assert_eq!(window.try_acquire_n(n), model.try_acquire(now.into(), n.into()), "at {} n {}", now, n);
        }
    }
}

// --- warm-up --------------------------------------------------------------------

/// Stored permits are kept as 32.32 fixed point, as the state word's
/// documented encoding says.
fn quantize(stored: f64) -> f64 {
    ((stored * 4_294_967_296.0) as u64) as f64 / 4_294_967_296.0
}

/// Guava's SmoothWarmingUp, transcribed plainly in f64 nanoseconds.
struct WarmUpModel {
    stable: f64,
    threshold: f64,
    max: f64,
    slope: f64,
    cool_down: f64,
    stored: f64,
    next_free: u64,
}

impl WarmUpModel {
    fn new(period: f64, warm_up: f64, cold_factor: f64, now: u64) -> WarmUpModel {
        let cold = cold_factor * period;
        let threshold = 0.5 * warm_up / period;
        let max = threshold + 2.0 * warm_up / (period + cold);
        let slope = (cold - period) / (max - threshold);
        let stored = quantize(max);
        WarmUpModel {
            stable: period,
            threshold,
            max,
            slope,
            cool_down: warm_up / max,
            stored,
            next_free: now,
        }
    }

    fn permits_to_time(&self, permits: f64) -> f64 {
        self.stable + permits * self.slope
    }

    fn stored_permits_to_wait_time(&self, stored: f64, mut take: f64) -> f64 {
        let above = stored - self.threshold;
        let mut micros = 0.0;
        if above > 0.0 {
            let take_above = above.min(take);
            let length = self.permits_to_time(above) + self.permits_to_time(above - take_above);
            micros = take_above * length / 2.0;
            take -= take_above;
        }
        micros + self.stable * take
    }

    fn reserve(&mut self, now: u64, n: u32, max_wait: u64) -> Result<u64, AcquireError> {
        // The refill is committed only with a grant of permits: a request
        // for none (or a refusal) writes nothing, so the next refill sums
        // the whole idle time at once (two partial float sums can differ
        // from it in the last bit, and the ceiling by a nanosecond).
        let (next_free, stored) = if now > self.next_free {
            let refilled = self.stored + (now - self.next_free) as f64 / self.cool_down;
            (now, refilled.min(self.max))
        } else {
            (self.next_free, self.stored)
        };
        let wait = next_free - now;
        if wait > max_wait {
            return Err(AcquireError::RateLimited {
                wait: Duration::from_nanos(wait),
            });
        }
        if n == 0 {
            return Ok(0);
        }
        let spend = f64::from(n).min(stored);
        let cost =
            self.stored_permits_to_wait_time(stored, spend) + self.stable * (f64::from(n) - spend);
        self.next_free = next_free + cost.ceil() as u64;
        self.stored = quantize(stored - spend);
        Ok(wait)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn warm_up_matches_guavas_algorithm(
        period_ms in 1u64..500,
        warm_up_ms in 1u64..5_000,
        cold_factor in prop_oneof![Just(3.0), 1.0f64..6.0],
        ops in prop::collection::vec((clock_move(2_000_000_000), 0u32..4, prop::option::of(0u64..5_000_000_000)), 1..40),
    ) {
        let clock = ManualClock::new();
        let quota = Quota::with_period(Duration::from_millis(period_ms)).unwrap();
        let limiter = WarmUpBuilder::with_clock(quota, Duration::from_millis(warm_up_ms), clock.clone())
            .cold_factor(cold_factor)
            .build()
            .unwrap();
        let mut model = WarmUpModel::new((period_ms * 1_000_000) as f64, (warm_up_ms * 1_000_000) as f64, cold_factor, 0);
        let mut now = 0;
        for (step, n, max_wait) in ops {
            // Warm-up keeps no history before next_free: only forward moves.
            apply(&clock, &mut now, step.max(0));
            let max_wait = max_wait.unwrap_or(0);
            let got = limiter.reserve_n(n, Duration::from_nanos(max_wait)).map(|r| r.wait().as_nanos() as u64);
            let want = model.reserve(now, n, max_wait);
            prop_assert_eq!(got, want);
        }
    }
}

// --- priority tiers ---------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The spec: one tat, class i admits n iff max(tat, now) + n·t ≤ now +
    /// (burst − ceil((1 − share_i)·burst))·t; lower classes never reserve
    /// ahead.
    #[test]
    fn priority_tiers_match_their_model(
        burst in 1u32..20,
        t in 1u64..1_000,
        ops in prop::collection::vec((clock_move(3_000), 0usize..3, 0u32..8, 0u64..5_000), 1..60),
    ) {
        let shares = [1.0, 0.7, 0.3];
        let clock = ManualClock::new();
        let quota = Quota::with_period(Duration::from_nanos(t)).unwrap().with_burst(burst).unwrap();
        let Ok(limiter) = PriorityLimiter::with_clock(quota, &shares, clock.clone()) else {
            // Too small a burst for class 2's 0.3: rejected, as specified.
            prop_assert!(burst < 4);
            return Ok(());
        };
        let (t, burst) = (u128::from(t), u128::from(burst));
        // Shares in tenths, exactly: headroom = ceil((10 − 10·share)·burst / 10).
        let usable = |share: f64| burst - ((10 - (share * 10.0).round() as u128) * burst).div_ceil(10);
        let mut tat: u128 = 0;
        let mut now = 0u64;
        for (step, class, n, max_wait) in ops {
            apply(&clock, &mut now, step);
            let max_wait = if class == 0 { u128::from(max_wait) } else { 0 };
            let u = usable(shares[class]);
            let nowl = u128::from(now);
            let want = if u128::from(n) > u {
                Err(AcquireError::InsufficientCapacity { requested: n, burst: u as u32 })
            } else if n == 0 {
                Ok(0)
            } else {
                let new_tat = tat.max(nowl) + u128::from(n) * t;
                let wait = new_tat.saturating_sub(nowl + u * t);
                if wait > max_wait {
                    Err(AcquireError::RateLimited { wait: Duration::from_nanos(wait as u64) })
                } else {
                    tat = new_tat;
                    Ok(wait as u64)
                }
            };
            let got = limiter.reserve_n(class, n, Duration::from_nanos(max_wait as u64)).map(|r| r.wait().as_nanos() as u64);
            prop_assert_eq!(got, want);
            let class_view_available = limiter.available(class).unwrap() as u128;
            let room = (nowl + u * t).saturating_sub(tat.max(nowl)) / t;
            prop_assert_eq!(class_view_available, room);
        }
    }
}

#[test]
fn models_agree_on_a_known_case() {
    // The Guava sequence through the model itself, so the model is checked too.
    let mut m = WarmUpModel::new(5e8, 4e9, 3.0, 0);
    let mut now = 0;
    let mut waits = vec![];
    for _ in 0..5 {
        let w = m.reserve(now, 1, u64::MAX).unwrap();
        now += w;
        waits.push(w / 1_000_000);
    }
    assert_eq!(waits, [0, 1_375, 1_125, 875, 625]);
}
