//! Property: the [`Headroom`] a decision reports is what the limiter then
//! holds. Right after the decision exactly `remaining` permits are
//! available; one nanosecond before `refill_in` still `remaining`, and at
//! `refill_in` one more (when the limiter was not full). Checked for the
//! global limiter and the per-key cell over random histories.

use std::time::Duration;

use limiter_core::{GcraCell, Headroom, ManualClock, Quota, RateLimiter};
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
                    if let Some(Ok(r)) = cell.reserve_n(quota, now, n, max_wait) {
                        let left = cell.headroom_after(&r, quota, now).unwrap();
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
    let r = a.reserve_n(quota, 0, 1, Duration::ZERO).unwrap().unwrap();
    assert_eq!(b.headroom_after(&r, quota, 0), None);
}
