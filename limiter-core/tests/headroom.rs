//! Property: the [`Headroom`] a decision reports is what the limiter then
//! holds. Right after the decision exactly `remaining` permits are
//! available; one nanosecond before `refill_in` still `remaining`, and at
//! `refill_in` one more (when the limiter was not full). Checked for the
//! global limiter and the per-key cell over random histories.

use std::time::Duration;

use limiter_core::{Headroom, ManualClock, Quota, RateLimiter, cell::CellClock, cell::GcraCell};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Reserve(u32, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u64..=250).prop_map(Op::Advance),
        3 => (0u32..=4, prop_oneof![Just(0u64), 0u64..=300, Just(u64::MAX)])
            .prop_map(|(n, w)| Op::Reserve(n, w)),
    ]
}

/// Checks `left` against `available_at(dt)`, the permits available `dt`
/// nanoseconds after the decision.
fn check(
    left: Headroom,
    burst: u32,
    available_at: impl Fn(u64) -> u32,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(available_at(0), left.remaining);
    let refill = u64::try_from(left.refill_in.as_nanos()).unwrap();
    if left.remaining == burst {
        prop_assert_eq!(refill, 0);
    } else {
        prop_assert!(refill > 0);
        prop_assert_eq!(available_at(refill - 1), left.remaining);
        prop_assert_eq!(available_at(refill), left.remaining + 1);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 2_000 }))]

    #[test]
    fn headroom_is_what_the_limiter_then_holds(
        t in 1u64..=100,
        burst in 1u32..=4,
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let quota = Quota::with_period(Duration::from_nanos(t)).unwrap().with_burst(burst).unwrap();
        let clock = ManualClock::new();
        let limiter = RateLimiter::with_clock(quota, clock.clone());
        let cell = GcraCell::new();
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Advance(d) => {
                    now += d;
                    clock.advance(Duration::from_nanos(d));
                }
                Op::Reserve(n, w) => {
                    let max_wait = Duration::from_nanos(w);
                    // Probe the limiter by moving its clock forward, reading
                    // `available`, and moving it back.
                    if let Ok((r, left)) = limiter.reserve_n_with_headroom(n, max_wait) {
                        check(left, burst, |dt| {
                            clock.set(now + dt);
                            let a = limiter.available();
                            clock.set(now);
                            a
                        })?;
                        let _kept = r;
                    }
                    let on = CellClock { clock: &clock, origin: 0 };
                    if let Some(Ok(r)) = cell.reserve_n_on(on, quota, n, max_wait) {
                        let left = cell.headroom_of(&r, quota, 0).unwrap();
                        check(left, burst, |dt| cell.available(quota, now + dt))?;
                    }
                }
            }
        }
    }
}

#[test]
fn another_cells_reservation_has_no_headroom_here() {
    let quota = Quota::per_second(10).unwrap();
    let (a, b) = (GcraCell::new(), GcraCell::new());
    let on = CellClock {
        clock: &ManualClock::new(),
        origin: 0,
    };
    let r = a
        .reserve_n_on(on, quota, 1, Duration::ZERO)
        .unwrap()
        .unwrap();
    assert_eq!(b.headroom_of(&r, quota, 0), None);
}

/// The same property through [`Decide`], for every algorithm of the crate:
/// right after a grant exactly `remaining` permits are available, still
/// `remaining` one nanosecond before `refill_in`, and more at `refill_in`
/// (exactly one more where permits come back one at a time: GCRA and its
/// wrappers), and `refill_in` is zero only when nothing is missing.
mod through_decide {
    use std::time::Duration;

    use limiter_core::{
        Decide, Grant, ManualClock, Metered, PriorityLimiter, Quota, RateLimiter, Reservation,
        SlidingWindow, WarmUpLimiter, adaptive::AdaptiveBuilder, adaptive::EwmaAimd,
    };
    use proptest::prelude::*;

    use super::{Op, op};

    /// Runs `ops` on `decider` and checks every grant with `available`, the
    /// permits available now.
    fn run<D: Decide<Key = (), Ticket = Reservation>>(
        decider: &D,
        clock: &ManualClock,
        ops: &[Op],
        full: u32,
        one_at_a_time: bool,
        available: impl Fn() -> u32,
    ) -> Result<(), TestCaseError> {
        let mut now = 0u64;
        clock.set(0);
        for op in ops {
            match *op {
                Op::Advance(d) => {
                    now += d;
                    clock.set(now);
                }
                Op::Reserve(n, w) => {
                    let Ok(Grant { headroom, .. }) =
                        decider.decide(&(), n, Duration::from_nanos(w))
                    else {
                        continue;
                    };
                    let at = |dt: u64| {
                        clock.set(now + dt);
                        let a = available();
                        clock.set(now);
                        a
                    };
                    prop_assert_eq!(at(0), headroom.remaining);
                    let refill = u64::try_from(headroom.refill_in.as_nanos()).unwrap();
                    if refill == 0 {
                        prop_assert!(headroom.remaining >= full, "{:?}", headroom);
                    } else {
                        prop_assert_eq!(at(refill - 1), headroom.remaining);
                        let more = at(refill);
                        prop_assert!(more > headroom.remaining);
                        if one_at_a_time {
                            prop_assert_eq!(more, headroom.remaining + 1);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn quota(t: u64, burst: u32) -> Quota {
        Quota::with_period(Duration::from_nanos(t))
            .unwrap()
            .with_burst(burst)
            .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 300 }))]

        #[test]
        fn gcra_and_its_wrappers(
            t in 1u64..=100,
            burst in 1u32..=4,
            ops in proptest::collection::vec(op(), 1..40),
        ) {
            // One clock each: a limiter counts from its clock's reading when made.
            let q = quota(t, burst);
            let clock = ManualClock::new();
            let plain = RateLimiter::with_clock(q, clock.clone());
            run(&plain, &clock, &ops, burst, true, || plain.available())?;
            let clock = ManualClock::new();
            let metered = Metered::new(RateLimiter::with_clock(q, clock.clone()));
            run(&metered, &clock, &ops, burst, true, || metered.inner().available())?;
            let clock = ManualClock::new();
            let by_ref = RateLimiter::with_clock(q, clock.clone());
            run(&&by_ref, &clock, &ops, burst, true, || by_ref.available())?;
        }

        #[test]
        fn priority_classes(
            t in 1u64..=100,
            burst in 2u32..=8,
            class in 0usize..=1,
            ops in proptest::collection::vec(op(), 1..40),
        ) {
            let clock = ManualClock::new();
            let limiter = std::sync::Arc::new(
                PriorityLimiter::with_clock(quota(t, burst), &[1.0, 0.5], clock.clone()).unwrap(),
            );
            let view = limiter.class(class).unwrap();
            let usable = if class == 0 { burst } else { burst / 2 };
            run(&view, &clock, &ops, usable, true, || limiter.available(class).unwrap())?;
        }

        #[test]
        fn sliding_windows(
            limit in 1u32..=6,
            window in 1u64..=300,
            ops in proptest::collection::vec(op(), 1..40),
        ) {
            let clock = ManualClock::new();
            let w = SlidingWindow::with_clock(limit, Duration::from_nanos(window), clock.clone()).unwrap();
            run(&w, &clock, &ops, limit, false, || w.available())?;
        }

        #[test]
        fn warm_up(
            t in 1u64..=100,
            warm in 1u64..=1_000,
            ops in proptest::collection::vec(op(), 1..40),
        ) {
            let clock = ManualClock::new();
            let w = WarmUpLimiter::with_clock(quota(t, 1), Duration::from_nanos(warm), clock.clone()).unwrap();
            // A warm-up limiter that may proceed takes any number of permits.
            run(&w, &clock, &ops, 1, false, || w.available())?;
        }
    }

    #[test]
    fn adaptive_reports_the_rate_in_force() {
        let clock = ManualClock::new();
        let adaptive =
            AdaptiveBuilder::with_clock(EwmaAimd::new(Duration::from_millis(100)), clock.clone())
                .min_rate(10.0)
                .max_rate(100.0)
                .burst(4)
                .build()
                .unwrap();
        let ops = [
            Op::Reserve(1, 0),
            Op::Reserve(2, 0),
            Op::Advance(5_000_000),
            Op::Reserve(1, 0),
            Op::Reserve(3, u64::MAX),
        ];
        run(&adaptive, &clock, &ops, 4, true, || {
            adaptive.limiter().available()
        })
        .unwrap();
        assert_eq!(
            adaptive.decide(&(), 0, Duration::ZERO).unwrap().policy,
            limiter_core::Policy::from(adaptive.limiter().quota())
        );
    }

    #[test]
    fn a_pair_reports_the_part_with_fewer_permits_left() {
        let clock = ManualClock::new();
        let per_user = RateLimiter::with_clock(quota(100, 2), clock.clone());
        let global = RateLimiter::with_clock(quota(10, 5), clock.clone());
        let both = (&per_user, &global);
        let g = both.decide(&(), 1, Duration::ZERO).unwrap();
        // per_user: 1 left, the next in 100 ns; global: 4 left.
        assert_eq!(
            (g.headroom.remaining, g.headroom.refill_in),
            (1, Duration::from_nanos(100))
        );
        // The policy is the part with the slower steady rate.
        assert_eq!(g.policy.interval, Duration::from_nanos(100));
        both.decide(&(), 1, Duration::ZERO).unwrap();
        // The user's limit refuses: the global permit is given back.
        let denial = both.decide(&(), 1, Duration::ZERO).unwrap_err();
        assert_eq!(global.available(), 3);
        // A denial carries the policy of the part that refused.
        assert_eq!(
            denial.policy(),
            Some(limiter_core::Policy::from(quota(100, 2)))
        );
    }
}
