//! The decision of `ShouldRateLimit` on the in-memory backends under a
//! manual clock: `duration_until_reset` (GCRA: the time until the bucket is
//! full again, `tat − now` to the nanosecond; fixed window: until the window
//! ends), `unlimited`, the global `SHADOW_MODE` and `QUOTA_MODE`,
//! per-descriptor `hits_addend` (a set 0 checks without spending and is
//! refused only past the limit, a set value is a cost charged even past
//! the limit), and a property test of the whole decision (all or nothing
//! across descriptors, shadow and quota mode, checks and costs, remaining
//! counts and reset times) for both algorithms against a plain sequential
//! model.

use std::collections::HashMap;
use std::time::Duration;

use limiter_core::ManualClock;
use limiter_rls::backend::CounterStore;
use limiter_rls::backend::memory::{MemoryFixed, MemoryGcra};
use limiter_rls::proto::{
    Code, DescriptorStatus, Entry, RateLimitDescriptor, RateLimitRequest, RateLimitResponse,
    UInt64Value,
};
use limiter_rls::stats::Recorder;
use limiter_rls::{Options, RateLimitService, RuleSet};
use proptest::prelude::*;

const NANOS: u64 = 1_000_000_000;
/// 2026-01-01T00:00:00Z: a whole minute (and second) in Unix time.
const EPOCH: u64 = 1_767_225_600 * NANOS;

const CONFIG: &str = "domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: s
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: q
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: r
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: m
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: free
    rate_limit: {unlimited: true}
";

/// The limit, shadow and quota flags of each key of [`CONFIG`].
fn rule(key: &str) -> (u64, bool, bool) {
    match key {
        "a" => (2, false, false),
        "b" => (5, false, false),
        "s" => (2, true, false),
        "q" => (4, false, true),
        "r" => (2, false, true),
        _ => unreachable!("{key}"),
    }
}

fn rules() -> RuleSet {
    RuleSet::from_files(vec![("a.yaml".into(), CONFIG.into())]).unwrap()
}

fn gcra(clock: &ManualClock, options: Options) -> RateLimitService<MemoryGcra<ManualClock>> {
    let backend = MemoryGcra::new(clock.clone(), 1_000);
    RateLimitService::new(rules(), backend, options, Recorder::default())
}

fn fixed(clock: &ManualClock, options: Options) -> RateLimitService<MemoryFixed<ManualClock>> {
    let backend = MemoryFixed::new(clock.clone(), 1_000);
    RateLimitService::new(rules(), backend, options, Recorder::default())
}

fn d(key: &str, value: &str, hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: key.into(),
            value: value.into(),
        }],
        limit: None,
        hits_addend: hits.map(|value| UInt64Value { value }),
        ..Default::default()
    }
}

fn ask<B: CounterStore>(
    s: &RateLimitService<B>,
    descriptors: Vec<RateLimitDescriptor>,
    hits_addend: u32,
) -> RateLimitResponse {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(s.should_rate_limit(&RateLimitRequest {
        domain: "d".into(),
        descriptors,
        hits_addend,
    }))
    .unwrap()
}

fn reset(s: &DescriptorStatus) -> Duration {
    let d = s.duration_until_reset.as_ref().unwrap();
    Duration::new(
        u64::try_from(d.seconds).unwrap(),
        u32::try_from(d.nanos).unwrap(),
    )
}

fn code(c: i32) -> Code {
    Code::try_from(c).unwrap()
}

#[test]
fn gcra_reset_is_the_time_until_the_bucket_is_full() {
    let clock = ManualClock::starting_at(EPOCH);
    let s = gcra(&clock, Options::default());
    // 60 a minute: one emission interval is 1 s, the burst 60.
    let r = ask(&s, vec![d("m", "u", None)], 0);
    assert_eq!(r.statuses[0].limit_remaining, 59);
    assert_eq!(reset(&r.statuses[0]), Duration::from_secs(1));
    let r = ask(&s, vec![d("m", "u", None)], 3);
    assert_eq!(r.statuses[0].limit_remaining, 56);
    assert_eq!(reset(&r.statuses[0]), Duration::from_secs(4));
    // Two intervals later two permits are back: full in 2 s + this one.
    clock.advance(Duration::from_secs(2));
    let r = ask(&s, vec![d("m", "u", None)], 0);
    assert_eq!(r.statuses[0].limit_remaining, 57);
    assert_eq!(reset(&r.statuses[0]), Duration::from_secs(3));
    // Between emissions: exactly the time left, not whole intervals. A
    // check (a set 0) charges nothing; 1.5 s after, 1.5 s of the 3 s debt
    // remain and one whole permit came back.
    clock.advance(Duration::from_millis(1_500));
    let r = ask(&s, vec![d("m", "u", Some(0))], 0);
    assert_eq!(r.statuses[0].limit_remaining, 58);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(1_500));
    // To the nanosecond: 1 ns later, 1 ns less.
    clock.advance(Duration::from_nanos(1));
    let r = ask(&s, vec![d("m", "u", Some(0))], 0);
    assert_eq!(reset(&r.statuses[0]), Duration::from_nanos(1_499_999_999));
    // Refused requests report it too: 2 per second (t = 500 ms), both
    // spent 100 ms apart (full at 1 s), refused 50 ms later: 850 ms away.
    let r = ask(&s, vec![d("a", "u", None)], 0);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(500));
    clock.advance(Duration::from_millis(100));
    let r = ask(&s, vec![d("a", "u", None)], 0);
    assert_eq!(r.statuses[0].limit_remaining, 0);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(900));
    clock.advance(Duration::from_millis(50));
    let r = ask(&s, vec![d("a", "u", None)], 0);
    assert_eq!(code(r.overall_code), Code::OverLimit);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(850));
    // A fresh key of another limit is full at once after a check-only call.
    let r = ask(&s, vec![d("b", "u", Some(0))], 0);
    assert_eq!(r.statuses[0].limit_remaining, 5);
    assert_eq!(reset(&r.statuses[0]), Duration::ZERO);
}

#[test]
fn fixed_window_reset_is_the_time_until_the_window_ends() {
    let clock = ManualClock::starting_at(EPOCH + 30 * NANOS);
    let s = fixed(&clock, Options::default());
    let r = ask(&s, vec![d("m", "u", None)], 0);
    assert_eq!(r.statuses[0].limit_remaining, 59);
    assert_eq!(reset(&r.statuses[0]), Duration::from_secs(30));
    clock.advance(Duration::from_millis(10_500));
    let r = ask(&s, vec![d("m", "u", None)], 0);
    assert_eq!(r.statuses[0].limit_remaining, 58);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(19_500));
    // The next window starts full.
    clock.advance(Duration::from_secs(20));
    let r = ask(&s, vec![d("m", "u", None)], 0);
    assert_eq!(r.statuses[0].limit_remaining, 59);
    assert_eq!(reset(&r.statuses[0]), Duration::from_millis(59_500));
}

#[test]
fn unlimited_answers_the_largest_remaining_and_is_never_over() {
    let clock = ManualClock::starting_at(EPOCH);
    let s = gcra(&clock, Options::default());
    for hits in [0, 1, 1_000_000] {
        let r = ask(&s, vec![d("free", "u", None), d("a", "u", Some(1))], hits);
        let st = &r.statuses[0];
        assert_eq!(code(st.code), Code::Ok);
        assert_eq!(st.limit_remaining, u32::MAX);
        assert!(st.current_limit.is_none());
        assert!(st.duration_until_reset.is_none());
    }
    // The other descriptor was decided (2 a second: the third refused).
    let r = ask(&s, vec![d("free", "u", None), d("a", "u", None)], 0);
    assert_eq!(code(r.overall_code), Code::OverLimit);
    assert_eq!(code(r.statuses[0].code), Code::Ok);
}

#[test]
fn global_shadow_mode_answers_ok_and_charges_nothing_more() {
    let clock = ManualClock::starting_at(EPOCH);
    let options = Options {
        global_shadow: true,
        ..Options::default()
    };
    let s = gcra(&clock, options);
    for _ in 0..2 {
        assert_eq!(
            code(ask(&s, vec![d("a", "u", None)], 0).overall_code),
            Code::Ok
        );
    }
    // Over the limit: the descriptor says so, the request passes, and the
    // other descriptor is not charged (the decision itself was "over").
    let r = ask(&s, vec![d("a", "u", None), d("b", "u", None)], 0);
    assert_eq!(code(r.overall_code), Code::Ok);
    assert_eq!(code(r.statuses[0].code), Code::OverLimit);
    let r = ask(&s, vec![d("b", "u", Some(0))], 0);
    assert_eq!(r.statuses[0].limit_remaining, 5, "b was not charged");
}

#[test]
fn global_quota_mode_puts_every_descriptor_in_quota_mode() {
    let clock = ManualClock::starting_at(EPOCH);
    let options = Options {
        global_quota: true,
        ..Options::default()
    };
    let s = fixed(&clock, options);
    ask(&s, vec![d("a", "u", None)], 2);
    // `a` is full; as a quota descriptor it refuses the request only if
    // every descriptor does: `b` passes and is charged.
    let r = ask(&s, vec![d("a", "u", None), d("b", "u", None)], 0);
    assert_eq!(code(r.overall_code), Code::Ok);
    assert_eq!(code(r.statuses[0].code), Code::OverLimit);
    assert_eq!(r.statuses[1].limit_remaining, 4);
    ask(&s, vec![d("b", "u", None)], 4);
    let r = ask(&s, vec![d("a", "u", None), d("b", "u", None)], 0);
    assert_eq!(code(r.overall_code), Code::OverLimit, "both over");
    // Without QUOTA_MODE the same state refuses on `a` alone.
    let plain = fixed(&clock, Options::default());
    ask(&plain, vec![d("a", "u", None)], 2);
    let r = ask(&plain, vec![d("a", "u", None), d("b", "v", None)], 0);
    assert_eq!(code(r.overall_code), Code::OverLimit);
}

/// `REDIS_TIMEOUT` (the whole request's store budget) longer than any
/// instant can hold, from the environment or `Options`: no deadline, not a
/// panic.
#[test]
fn a_store_budget_no_instant_can_hold_is_no_deadline() {
    let env = limiter_rls::settings::Settings::from_env(|k| {
        (k == "REDIS_TIMEOUT").then(|| "3000000000000000h".to_owned())
    })
    .unwrap();
    let huge = env.options.store_budget;
    assert!(std::time::Instant::now().checked_add(huge).is_none());
    for budget in [huge, Duration::MAX] {
        let clock = ManualClock::starting_at(EPOCH);
        let options = Options {
            store_budget: budget,
            ..Options::default()
        };
        let s = gcra(&clock, options);
        let r = ask(&s, vec![d("a", "u", None)], 0);
        assert_eq!(code(r.overall_code), Code::Ok);
        assert_eq!(r.statuses[0].limit_remaining, 1);
    }
}

#[test]
fn per_descriptor_hits_addend_zero_checks_and_a_set_value_overrides() {
    let clock = ManualClock::starting_at(EPOCH);
    hits_addend_rules(&gcra(&clock, Options::default()), "gcra");
    hits_addend_rules(&fixed(&clock, Options::default()), "fixed");
}

fn hits_addend_rules<B: CounterStore>(s: &RateLimitService<B>, algorithm: &str) {
    // A set value overrides the request's: 3 on b, 1 (the request's 0
    // means 1) on a.
    let r = ask(s, vec![d("b", "u", Some(3)), d("a", "u", None)], 0);
    assert_eq!(code(r.overall_code), Code::Ok, "{algorithm}");
    assert_eq!(r.statuses[0].limit_remaining, 2, "{algorithm}");
    assert_eq!(r.statuses[1].limit_remaining, 1, "{algorithm}");
    // A set 0 on a key with room: OK, nothing spent; the request's 2 go
    // to b.
    let r = ask(s, vec![d("a", "u", Some(0)), d("b", "u", None)], 2);
    assert_eq!(code(r.overall_code), Code::Ok, "{algorithm}");
    assert_eq!(r.statuses[0].limit_remaining, 1, "{algorithm}: a unspent");
    assert_eq!(r.statuses[1].limit_remaining, 0, "{algorithm}");
    // Exhaust a: exactly at the limit a check still passes (nothing is
    // past it); a cost goes past it, and then a check is over and charges
    // nothing anywhere (all or nothing): b_c keeps its room.
    ask(s, vec![d("a", "u", None)], 0);
    let r = ask(s, vec![d("a", "u", Some(0))], 0);
    assert_eq!(code(r.overall_code), Code::Ok, "{algorithm}: at the limit");
    assert_eq!(r.statuses[0].limit_remaining, 0, "{algorithm}");
    let r = ask(s, vec![d("a", "u", Some(1))], 0);
    assert_eq!(code(r.statuses[0].code), Code::OverLimit, "{algorithm}");
    let r = ask(s, vec![d("a", "u", Some(0)), d("b", "c", None)], 0);
    assert_eq!(code(r.statuses[0].code), Code::OverLimit, "{algorithm}");
    assert_eq!(code(r.overall_code), Code::OverLimit, "{algorithm}");
    let r = ask(s, vec![d("b", "c", Some(0))], 0);
    assert_eq!(r.statuses[0].limit_remaining, 5, "{algorithm}: b_c unspent");
}

/// The sequential model: per counter, GCRA's `tat` or the fixed window's
/// (window, count), in nanoseconds since the Unix epoch.
#[derive(Debug, Default)]
struct Model {
    gcra: bool,
    tat: HashMap<String, u64>,
    windows: HashMap<String, (u64, u64)>,
}

impl Model {
    /// Requests that fit now on `key` of limit `n` a second.
    fn available(&self, key: &str, n: u64, now: u64) -> u64 {
        if self.gcra {
            let t = NANOS / n;
            let tat = self.tat.get(key).copied().unwrap_or(0).max(now);
            (n * t).saturating_sub(tat - now) / t
        } else {
            let window = now / NANOS;
            match self.windows.get(key) {
                Some(&(w, c)) if w == window => n.saturating_sub(c),
                _ => n,
            }
        }
    }

    /// Whether `key` is past its limit: GCRA debt beyond the burst, a
    /// window counted past `n`.
    fn exceeded(&self, key: &str, n: u64, now: u64) -> bool {
        if self.gcra {
            let tat = self.tat.get(key).copied().unwrap_or(0);
            tat.saturating_sub(now) > n * (NANOS / n)
        } else {
            let window = now / NANOS;
            matches!(self.windows.get(key), Some(&(w, c)) if w == window && c > n)
        }
    }

    /// A cost charged past the limit: GCRA up to one unit (1 s) past it,
    /// `tat ≤ now + n·t + 1 s`, whole permits; fixed windows count it all.
    fn charge_over(&mut self, key: &str, n: u64, hits: u64, now: u64) {
        if self.gcra {
            let t = NANOS / n;
            let base = self.tat.get(key).copied().unwrap_or(0).max(now);
            let fits = (now + n * t + NANOS).saturating_sub(base) / t;
            let k = hits.min(fits);
            if k > 0 {
                self.tat.insert(key.to_owned(), base + k * t);
            }
        } else {
            self.charge(key, n, hits, now);
        }
    }

    fn charge(&mut self, key: &str, n: u64, hits: u64, now: u64) {
        if self.gcra {
            let t = NANOS / n;
            let tat = self.tat.get(key).copied().unwrap_or(0).max(now);
            self.tat.insert(key.to_owned(), tat + hits * t);
        } else {
            let window = now / NANOS;
            let e = self.windows.entry(key.to_owned()).or_insert((window, 0));
            if e.0 != window {
                *e = (window, 0);
            }
            e.1 += hits;
        }
    }

    /// The reset time of a counter: GCRA, until it is full (`tat − now`).
    fn reset(&self, counter: &str, now: u64) -> Duration {
        if self.gcra {
            let tat = self.tat.get(counter).copied().unwrap_or(0);
            Duration::from_nanos(tat.saturating_sub(now))
        } else {
            Duration::from_nanos(NANOS - now % NANOS)
        }
    }

    /// The expected overall code and statuses (code, remaining, reset) of
    /// a request, applying its charges.
    fn decide(
        &mut self,
        ds: &[(&str, &str, Option<u64>)],
        request_hits: u32,
        now: u64,
    ) -> (Code, Vec<(Code, u32, Duration)>) {
        let mut rows = Vec::new();
        for &(key, value, hits) in ds {
            let (n, shadow, quota) = rule(key);
            let h = hits.unwrap_or(u64::from(request_hits.max(1)));
            let cost = hits.is_some_and(|h| h > 0);
            let counter = format!("{key}_{value}");
            let avail = self.available(&counter, n, now);
            let over = if h == 0 {
                self.exceeded(&counter, n, now)
            } else {
                h > avail || (!cost && h > n)
            };
            rows.push((counter, n, h, avail, over, over && !shadow, quota, cost));
        }
        let normal_over = rows.iter().any(|r| r.5 && !r.6);
        let quotas = rows.iter().filter(|r| r.6).count();
        let quotas_over = rows.iter().filter(|r| r.6 && r.5).count();
        let overall = normal_over || (quotas > 0 && quotas == quotas_over);
        let mut out = Vec::new();
        for (counter, n, h, avail, over, answers_over, _, cost) in rows {
            let charged = !overall && !over && h > 0 && !cost;
            if charged {
                self.charge(&counter, n, h, now);
            }
            // A cost is charged whatever the answer, past the limit too.
            if cost {
                self.charge_over(&counter, n, h, now);
            }
            let left = if charged {
                avail - h
            } else if cost {
                self.available(&counter, n, now)
            } else {
                avail
            };
            let remaining = if over { 0 } else { left };
            out.push((
                if answers_over {
                    Code::OverLimit
                } else {
                    Code::Ok
                },
                u32::try_from(remaining).unwrap(),
                self.reset(&counter, now),
            ));
        }
        (if overall { Code::OverLimit } else { Code::Ok }, out)
    }
}

/// A descriptor of a request: key, value, per-descriptor `hits_addend`.
type Desc = (&'static str, &'static str, Option<u64>);

/// One step: 50 ms ticks to advance, the descriptors, the request's
/// `hits_addend`.
type Step = (u64, Vec<Desc>, u32);

fn descriptor_set() -> impl Strategy<Value = Vec<Desc>> {
    proptest::sample::subsequence(vec!["a", "b", "s", "q", "r"], 1..=3)
        .prop_flat_map(|keys| {
            let n = keys.len();
            (
                Just(keys),
                proptest::collection::vec(prop_oneof![Just("x"), Just("y")], n),
                proptest::collection::vec(proptest::option::of(0u64..=6), n),
            )
        })
        .prop_map(|(keys, values, hits)| {
            keys.into_iter()
                .zip(values)
                .zip(hits)
                .map(|((k, v), h)| (k, v, h))
                .collect()
        })
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec((0u64..=12, descriptor_set(), 0u32..=3), 1..40)
}

fn check<B: CounterStore>(
    s: &RateLimitService<B>,
    clock: &ManualClock,
    mut model: Model,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    let mut now = EPOCH;
    for (i, (advance, ds, hits)) in steps.into_iter().enumerate() {
        // Steps of 50 ms: whole nanoseconds for every emission interval.
        now += advance * 50_000_000;
        clock.set(now);
        let (want_code, want) = model.decide(&ds, hits, now);
        let r = ask(s, ds.iter().map(|&(k, v, h)| d(k, v, h)).collect(), hits);
        prop_assert_eq!(code(r.overall_code), want_code, "step {}: {:?}", i, ds);
        let got: Vec<(Code, u32, Duration)> = r
            .statuses
            .iter()
            .map(|st| (code(st.code), st.limit_remaining, reset(st)))
            .collect();
        prop_assert_eq!(got, want, "step {}: {:?} hits {}", i, ds, hits);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// GCRA: every answer, remaining count and reset time as the model's.
    #[test]
    fn gcra_decisions_match_the_sequential_model(steps in steps()) {
        let clock = ManualClock::starting_at(EPOCH);
        let s = gcra(&clock, Options::default());
        check(&s, &clock, Model { gcra: true, ..Model::default() }, steps)?;
    }

    /// Fixed windows: the same, with windows instead of a bucket.
    #[test]
    fn fixed_window_decisions_match_the_sequential_model(steps in steps()) {
        let clock = ManualClock::starting_at(EPOCH);
        let s = fixed(&clock, Options::default());
        check(&s, &clock, Model::default(), steps)?;
    }
}
