//! Charging after admission: "admit now, charge the rest later" as GCRA
//! debt, capped.
//!
//! The cost of a request is often known only once it has run (tokens
//! generated, rows scanned, bytes sent). The request is admitted on its
//! up-front cost; the rest is charged afterwards with [`ChargeAfter`] (or
//! [`charge_in_chunks`] for any limiter that can reserve), which moves `tat`
//! forward by `permits · t` beyond what is spent already, so later requests
//! of the same subject wait until the debt is paid.
//!
//! # The cap
//!
//! One response must not lock a subject out for long: a charge never moves
//! `tat` past `now + tau + max(cap − t, 0) + t`, that is, right after the
//! charge the next single permit comes at most `max(cap, t)` later. The
//! part of a charge above the cap is dropped and reported
//! ([`Debt::dropped`]) so the caller can count it.
//!
//! # How
//!
//! The charge is made of ordinary reservations of at most `burst` permits
//! each, accepted only if their slot is within `cap − t`; each is one CAS of
//! the limiter's own protocol, so the charge composes with concurrent
//! decisions without a new atomic protocol. It costs one reservation per
//! `burst` permits charged (at most `(tau + cap) / t / burst + 1` of them,
//! whatever the charge asked for): cheap for the token budgets this is
//! for, whose bursts are large. A reservation refused for
//! waiting too long tells its exact wait, and since a GCRA wait grows by
//! exactly `t` per permit, the largest chunk that fits is computed from it
//! rather than searched for. The reservations are dropped, which keeps them
//! spent: that is the debt.

use core::time::Duration;

use crate::error::AcquireError;
use crate::quota::{Quota, saturating_nanos};

/// The cap on debt a front end uses when it is not told one (a rules
/// file's `max_debt`, the HTTP layer's): one minute.
pub const DEFAULT_MAX_DEBT: Duration = Duration::from_secs(60);

/// The largest cap on debt a front end accepts: one day. A larger cap
/// would let one response lock a subject out for longer than an operator
/// can be expected to notice and undo.
pub const MAX_DEBT_LIMIT: Duration = Duration::from_secs(86_400);

/// The most refused attempts one charge makes, beyond the chunks it needs,
/// before it reports what is left as dropped (each refusal below the cap is
/// another thread's progress; a charge is not a spin loop).
const MAX_RETRIES: u64 = 64;

/// What a charge after admission did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Debt {
    /// Permits charged (now owed by the subject).
    pub charged: u64,
    /// Permits not charged because the cap was reached (or the limiter's
    /// time ran out of range).
    pub dropped: u64,
}

/// Charge permits after admission, as capped debt (see the module docs).
pub trait ChargeAfter {
    /// Charges `permits` more, never pushing the next permit more than
    /// `max(cap, t)` away.
    fn charge_after(&self, permits: u64, cap: Duration) -> Debt;
}

/// Charges `permits` as debt through `reserve(n, max_wait)`, a reservation
/// of `n ≤ burst` permits whose slot must come within `max_wait` (kept
/// spent), under `quota` (the quota the reservations are decided on: the
/// key's own for a keyed limiter). The building block of [`ChargeAfter`]
/// for limiters that reserve through another interface (a keyed limiter's
/// key, a cell with its caller's quota, a remote backend).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{debt::Debt, cell::CellClock, cell::GcraCell, ManualClock, Quota, debt::charge_in_chunks};
///
/// let quota = Quota::per_second(10)?.with_burst(2)?; // t = 100 ms
/// let (cell, clock) = (GcraCell::new(), ManualClock::new());
/// let on = CellClock { clock: &clock, origin: 0 };
/// let debt = charge_in_chunks(5, Duration::from_millis(300), quota, |n, max_wait| {
///     match cell.reserve_n_on(on, quota, n, max_wait) {
///         Some(r) => r.map(drop),
///         None => Err(limiter_core::AcquireError::TimeOutOfRange { now: 0 }), // retired
///     }
/// });
/// // 2 from the burst, 2 of debt: the next permit is 300 ms away, the cap;
/// // the fifth would have pushed it past.
/// assert_eq!(debt, Debt { charged: 4, dropped: 1 });
/// assert_eq!(cell.available(quota, 299_999_999), 0);
/// assert_eq!(cell.available(quota, 300_000_000), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn charge_in_chunks(
    permits: u64,
    cap: Duration,
    quota: Quota,
    mut reserve: impl FnMut(u32, Duration) -> Result<(), AcquireError>,
) -> Debt {
    let t = quota.period_nanos();
    let burst = u64::from(quota.burst());
    let max_wait_ns = saturating_nanos(cap).saturating_sub(t);
    let max_wait = Duration::from_nanos(max_wait_ns);
    let mut left = permits;
    let mut chunk = left.min(burst);
    // Never more permits than the cap holds: tau + cap over t, and a burst.
    let fits = (burst + max_wait_ns / t).saturating_add(1);
    let rounds = left.min(fits).div_ceil(burst) + MAX_RETRIES;
    for _ in 0..rounds {
        if chunk == 0 {
            break;
        }
        // chunk ≤ burst ≤ u32::MAX.
        let n = u32::try_from(chunk).unwrap_or(u32::MAX);
        match reserve(n, max_wait) {
            Ok(()) => {
                left -= chunk;
                chunk = left.min(burst);
            }
            Err(AcquireError::RateLimited { wait }) => {
                // wait(n) = wait(n − k) + k·t: drop just enough permits.
                let over = saturating_nanos(wait).saturating_sub(max_wait_ns);
                let fewer = over.div_ceil(t).max(1);
                if fewer >= chunk {
                    break; // at the cap
                }
                chunk -= fewer;
            }
            // More than the usable burst (a lower priority tier): halve.
            Err(AcquireError::InsufficientCapacity { .. }) => chunk /= 2,
            Err(_) => break,
        }
    }
    Debt {
        charged: permits - left,
        dropped: left,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ManualClock, RateLimiter};
    use proptest::prelude::*;

    fn limiter(per_second: u32, burst: u32) -> (RateLimiter<ManualClock>, ManualClock) {
        let clock = ManualClock::new();
        let quota = Quota::per_second(per_second)
            .unwrap()
            .with_burst(burst)
            .unwrap();
        (RateLimiter::with_clock(quota, clock.clone()), clock)
    }

    #[test]
    fn debt_makes_the_next_request_wait_exactly_its_cost() {
        let (l, clock) = limiter(10, 1); // t = 100 ms, no burst to absorb it
        l.try_acquire().unwrap();
        let d = l.charge_after(3, Duration::from_secs(10));
        assert_eq!(
            d,
            Debt {
                charged: 3,
                dropped: 0
            }
        );
        // 1 permit spent + 3 owed: the next is 400 ms away.
        let wait = l.try_acquire().unwrap_err().retry_after();
        assert_eq!(wait, Some(Duration::from_millis(400)));
        clock.advance(Duration::from_millis(400));
        assert!(l.try_acquire().is_ok());
    }

    #[test]
    fn a_charge_larger_than_the_burst_is_made_in_chunks() {
        let (l, _) = limiter(1_000, 4); // t = 1 ms
        let d = l.charge_after(1_000, Duration::from_secs(5));
        assert_eq!(
            d,
            Debt {
                charged: 1_000,
                dropped: 0
            }
        );
        // 4 from the burst, 996 of debt: 996 ms to the next permit.
        let wait = l.try_acquire().unwrap_err().retry_after();
        assert_eq!(
            wait,
            Some(Duration::from_millis(996) + Duration::from_millis(1))
        );
    }

    #[test]
    fn the_cap_bounds_the_wait_and_reports_the_rest() {
        let (l, _) = limiter(10, 1);
        let cap = Duration::from_millis(550);
        let d = l.charge_after(100, cap);
        // tat may reach now + tau + (cap − t) + t = 550 ms: 5 permits.
        assert_eq!(
            d,
            Debt {
                charged: 5,
                dropped: 95
            }
        );
        let wait = l.try_acquire().unwrap_err().retry_after().unwrap();
        assert!(wait <= cap, "{wait:?}");
        assert_eq!(wait, Duration::from_millis(500));
        // Already at the cap: nothing more is charged.
        assert_eq!(
            l.charge_after(1, cap),
            Debt {
                charged: 0,
                dropped: 1
            }
        );
        assert_eq!(
            l.charge_after(0, cap),
            Debt {
                charged: 0,
                dropped: 0
            }
        );
    }

    proptest! {
        // miri does not see PROPTEST_CASES: 4 cases there, as elsewhere.
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

        /// Whatever the state and the charge, the next permit is never more
        /// than max(cap, t) away after it, and nothing is charged that the
        /// cap allowed to drop... unless the cap was reached.
        #[test]
        fn never_past_the_cap(
            per_second in 1u32..1_000,
            burst in 1u32..20,
            spent in 0u32..20,
            permits in 0u64..5_000,
            cap_ms in 0u64..3_000,
        ) {
            let (l, _) = limiter(per_second, burst);
            let _ = l.try_acquire_n(spent.min(burst));
            let cap = Duration::from_millis(cap_ms);
            let d = l.charge_after(permits, cap);
            prop_assert_eq!(d.charged + d.dropped, permits);
            let t = l.quota().period();
            match l.try_acquire().map_err(|e| e.retry_after()) {
                Ok(()) => {}
                Err(wait) => {
                    let wait = wait.unwrap();
                    prop_assert!(wait <= cap.max(t), "{:?} > {:?}", wait, cap.max(t));
                    // Dropping happens only at the cap: one more permit
                    // would have gone past it.
                    if d.dropped > 0 {
                        prop_assert!(wait + t > cap.saturating_sub(t), "dropped below the cap");
                    }
                }
            }
        }
    }
}
