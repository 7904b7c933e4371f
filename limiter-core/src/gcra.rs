//! The GCRA decision as pure functions of `(tat, now, request, quota)`.
//!
//! Names, used the same way in `docs/design.md`:
//!
//! * `t`: the emission interval, nanoseconds per permit;
//! * `tau`: the tolerance, `t · (burst − 1)`;
//! * `tat`: the theoretical arrival time, the instant (ns since the limiter's
//!   epoch, see [`crate::clock::Epoch`]) at which the whole burst would be
//!   available again if nothing more came;
//! * `burst_span = t · burst = tau + t`.
//!
//! A request for `n` permits at `now` moves `tat` to
//! `tat' = max(tat, now) + n·t` and conforms iff `tat' ≤ now + burst_span`,
//! that is `tat' − t ≤ now + tau` for its last permit. When it does not
//! conform, it would at `now + wait` with `wait = tat' − (now + burst_span)`.
//! A reservation accepts that wait if it is at most `max_wait`, and its slot
//! is `now + wait`.
//!
//! Bounds: every function takes the `limit` of the limiter's time
//! (`limit ≤ MAX_SPAN`, the epoch's [`limit`](crate::clock::Epoch::limit)).
//! The caller guarantees `tat ≤ limit` and the quota guarantees
//! `burst_span ≤ MAX_SPAN`, with `MAX_SPAN < 2^60`. Every sum below therefore
//! stays under 2^62 and cannot overflow a `u64`; `now` beyond `limit` is
//! refused before any arithmetic, and so is a new `tat` beyond it.
//!
//! Nothing here touches an atomic: the CAS loop lives in [`crate::state`], and
//! these functions are tested on their own (and against a `u128` reference
//! model in the property tests).

use crate::quota::{MAX_SPAN, Quota};

/// The quota parameters the decision needs, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    /// Emission interval `t`, at least 1.
    pub(crate) t: u64,
    /// Burst, at least 1, with `t · burst ≤ MAX_SPAN`.
    pub(crate) burst: u32,
}

impl From<Params> for Quota {
    fn from(p: Params) -> Quota {
        // Params are only ever made from a valid Quota.
        Quota::from_valid(p.t, p.burst)
    }
}

impl Params {
    /// The policy these parameters state: `burst` at once, one more every `t`.
    #[inline]
    pub(crate) fn policy(self) -> crate::decision::Policy {
        crate::decision::Policy {
            burst: self.burst,
            interval: core::time::Duration::from_nanos(self.t),
        }
    }
}

impl From<Quota> for Params {
    fn from(q: Quota) -> Params {
        Params {
            t: q.period_nanos(),
            burst: q.burst(),
        }
    }
}

/// A granted request: the new `tat` and the wait until its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    /// `tat` after the request.
    pub(crate) tat: u64,
    /// Nanoseconds from `now` until the request conforms (0 = now).
    pub(crate) wait: u64,
}

/// Why a request was refused. Mirrors [`crate::AcquireError`] in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `n > burst`: never satisfiable under these parameters.
    Insufficient,
    /// Would conform after this many nanoseconds, more than allowed.
    Wait(u64),
    /// `now`, or the new `tat`, lies past the limit of the limiter's time.
    OutOfRange,
}

/// Decides a request for `n` permits at `now` that may wait up to `max_wait`
/// nanoseconds (`0` for a plain try). `n == 0` is granted and leaves `tat`
/// unchanged. (The limiter calls [`reserve_within`] with the whole burst.)
#[cfg(test)]
pub(crate) fn reserve(
    tat: u64,
    now: u64,
    n: u32,
    max_wait: u64,
    p: Params,
) -> Result<Grant, Refusal> {
    reserve_within(tat, now, n, max_wait, p, p.burst, MAX_SPAN)
}

/// As [`reserve`], for a caller that may use only `usable ≤ burst` permits of
/// the burst: the request conforms iff `max(tat, now) + n·t ≤ now + usable·t`,
/// leaving `burst − usable` permits of headroom for others (the priority
/// tiers). `n > usable` is never satisfiable. Times past `limit` are out of
/// range.
#[inline]
pub(crate) fn reserve_within(
    tat: u64,
    now: u64,
    n: u32,
    max_wait: u64,
    p: Params,
    usable: u32,
    limit: u64,
) -> Result<Grant, Refusal> {
    debug_assert!(usable <= p.burst && limit <= MAX_SPAN);
    if n > usable {
        return Err(Refusal::Insufficient);
    }
    if now > limit {
        return Err(Refusal::OutOfRange);
    }
    if n == 0 {
        return Ok(Grant { tat, wait: 0 });
    }
    // n ≤ usable ≤ burst, so n·t ≤ burst_span ≤ MAX_SPAN and every sum
    // stays below 2^62.
    let new_tat = tat.max(now) + u64::from(n) * p.t;
    let wait = new_tat.saturating_sub(now + u64::from(usable) * p.t);
    if wait > max_wait {
        return Err(Refusal::Wait(wait));
    }
    if new_tat > limit {
        return Err(Refusal::OutOfRange);
    }
    Ok(Grant { tat: new_tat, wait })
}

/// How many permits a plain try could take at `now`: exactly the largest
/// `n ≤ burst` that [`reserve_within`] with no wait would grant, that is
/// with `max(tat, now) + n·t ≤ min(now + burst_span, limit)`.
#[inline]
pub(crate) fn available(tat: u64, now: u64, p: Params, limit: u64) -> u32 {
    available_within(tat, now, p, p.burst, limit)
}

/// As [`available`] for a caller that may use `usable ≤ burst` permits of
/// the burst: the largest `n` with `max(tat, now) + n·t ≤ min(now +
/// usable·t, limit)`.
#[inline]
pub(crate) fn available_within(tat: u64, now: u64, p: Params, usable: u32, limit: u64) -> u32 {
    debug_assert!(usable <= p.burst);
    if now > limit {
        return 0;
    }
    // usable·t ≤ burst_span ≤ MAX_SPAN: the sum stays below 2^61.
    let room = (now + u64::from(usable) * p.t)
        .min(limit)
        .saturating_sub(tat.max(now));
    // room ≤ usable·t, so the quotient is at most usable and fits a u32.
    (room / p.t) as u32
}

/// What a decision that left `tat` at `now` leaves for the next caller that
/// may use `usable` permits of the burst: the permits it would be granted at
/// once ([`available_within`]), and the nanoseconds until one more is
/// (zero when `usable` are). One more comes when `now' + usable·t − tat`
/// reaches `(remaining + 1)·t`. Near `limit`, where no more may ever come,
/// the time saturates at zero past it.
#[inline]
pub(crate) fn headroom(tat: u64, now: u64, p: Params, usable: u32, limit: u64) -> (u32, u64) {
    let remaining = available_within(tat, now, p, usable, limit);
    if remaining >= usable {
        return (remaining, 0);
    }
    // remaining < usable ≤ burst: each product is at most burst_span ≤
    // MAX_SPAN, and tat ≤ MAX_SPAN, so the sum stays below 2^62.
    let next = (tat + u64::from(remaining + 1) * p.t).saturating_sub(u64::from(usable) * p.t);
    (remaining, next.saturating_sub(now))
}

/// The `tat` that keeps the fill level, in permits, when the quota changes
/// from `old` to `new` at `now`: the debt `tat − now` is scaled by
/// `t_new / t_old`, rounded up (towards more debt, so the change never
/// admits extra). An idle limiter (`tat ≤ now`) keeps its `tat` and so stays
/// full at the new burst. A debt scaled past `limit` is held at `limit`.
pub(crate) fn rescale(tat: u64, now: u64, old: Params, new: Params, limit: u64) -> u64 {
    if tat <= now {
        return tat;
    }
    let debt = u128::from(tat - now);
    let scaled = (debt * u128::from(new.t)).div_ceil(u128::from(old.t));
    let scaled_tat = u128::from(now) + scaled;
    u64::try_from(scaled_tat).map_or(limit, |v| v.min(limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Params = Params { t: 100, burst: 3 };

    #[test]
    fn headroom_counts_whole_permits_and_the_time_to_the_next() {
        // Full: three at once, nothing to wait for.
        assert_eq!(headroom(0, 1_000, P, 3, MAX_SPAN), (3, 0));
        // One taken from full at 1_000: two left, the third back in one t.
        assert_eq!(headroom(1_100, 1_000, P, 3, MAX_SPAN), (2, 100));
        // Half a permit of debt past two whole ones: one left, the second in 50.
        assert_eq!(headroom(1_150, 1_000, P, 3, MAX_SPAN), (1, 50));
        // A reservation that waits 70 left tat = 1_370: none now, one at 1_170.
        assert_eq!(headroom(1_370, 1_000, P, 3, MAX_SPAN), (0, 170));
        // A lower tier that may use one permit: none until the debt is paid.
        assert_eq!(headroom(1_100, 1_000, P, 1, MAX_SPAN), (0, 100));
        // The limit holds the count; the time saturates rather than wrap.
        assert_eq!(headroom(1_000, 1_000, P, 3, 1_150), (1, 0));
    }

    #[test]
    fn an_idle_limiter_grants_the_burst_then_paces() {
        let mut tat = 0;
        for _ in 0..3 {
            tat = reserve(tat, 1_000, 1, 0, P).unwrap().tat;
        }
        assert_eq!(tat, 1_300);
        assert_eq!(reserve(tat, 1_000, 1, 0, P), Err(Refusal::Wait(100)));
        assert_eq!(reserve(tat, 1_100, 1, 0, P).unwrap().tat, 1_400);
    }

    #[test]
    fn all_or_nothing_and_exact_waits() {
        assert_eq!(reserve(0, 0, 3, 0, P).unwrap().tat, 300);
        assert_eq!(reserve(100, 0, 3, 0, P), Err(Refusal::Wait(100)));
        assert_eq!(reserve(0, 0, 4, u64::MAX, P), Err(Refusal::Insufficient));
        assert_eq!(reserve(250, 0, 0, 0, P), Ok(Grant { tat: 250, wait: 0 }));
    }

    #[test]
    fn reservations_claim_future_slots() {
        let g = reserve(300, 0, 2, 1_000, P).unwrap();
        assert_eq!(
            g,
            Grant {
                tat: 500,
                wait: 200
            }
        );
        assert_eq!(reserve(500, 0, 2, 399, P), Err(Refusal::Wait(400)));
    }

    #[test]
    fn a_backwards_clock_never_admits_more() {
        // State reached at now = 1_000; the clock then reads 500.
        let tat = reserve(0, 1_000, 3, 0, P).unwrap().tat;
        assert_eq!(reserve(tat, 500, 1, 0, P), Err(Refusal::Wait(600)));
        assert_eq!(available(tat, 500, P, MAX_SPAN), 0);
    }

    #[test]
    fn headroom_is_left_for_others() {
        let p = Params { t: 100, burst: 10 };
        let within =
            |tat, n, max_wait, usable| reserve_within(tat, 0, n, max_wait, p, usable, MAX_SPAN);
        assert_eq!(within(0, 5, 0, 5).unwrap().tat, 500);
        assert_eq!(within(500, 1, 0, 5), Err(Refusal::Wait(100)));
        assert_eq!(within(500, 5, 0, 10).unwrap().tat, 1_000);
        assert_eq!(within(0, 6, u64::MAX, 5), Err(Refusal::Insufficient));
    }

    #[test]
    fn available_counts_whole_permits() {
        assert_eq!(available(0, 0, P, MAX_SPAN), 3);
        assert_eq!(available(150, 0, P, MAX_SPAN), 1);
        assert_eq!(available(1_000, 0, P, MAX_SPAN), 0);
        assert_eq!(available(0, MAX_SPAN + 1, P, MAX_SPAN), 0);
    }

    #[test]
    fn available_is_what_a_try_would_take_near_the_limit() {
        // 50 ns of range left: no permit of t = 100 fits, and a try agrees.
        let now = MAX_SPAN - 50;
        assert_eq!(available(0, now, P, MAX_SPAN), 0);
        assert_eq!(reserve(0, now, 1, 0, P), Err(Refusal::OutOfRange));
        // 250 ns left: two permits fit, the third would end past the limit.
        let now = MAX_SPAN - 250;
        assert_eq!(available(0, now, P, MAX_SPAN), 2);
        assert!(reserve(0, now, 2, 0, P).is_ok());
        assert_eq!(reserve(0, now, 3, 0, P), Err(Refusal::OutOfRange));
        // The same with a limiter whose own limit is lower.
        assert_eq!(available(0, 900, P, 1_000), 1);
        // A caller held to 2 of the 3: the limit, not the headroom, binds.
        assert_eq!(available_within(0, MAX_SPAN - 150, P, 2, MAX_SPAN), 1);
        assert_eq!(available_within(0, 0, P, 2, MAX_SPAN), 2);
        assert_eq!(
            reserve_within(0, 900, 2, 0, P, 3, 1_000),
            Err(Refusal::OutOfRange)
        );
    }

    #[test]
    fn out_of_range_times_are_refused() {
        assert_eq!(reserve(0, MAX_SPAN + 1, 1, 0, P), Err(Refusal::OutOfRange));
        assert_eq!(
            reserve(MAX_SPAN - 50, MAX_SPAN - 400, 1, u64::MAX, P),
            Err(Refusal::OutOfRange)
        );
    }

    #[test]
    fn rescale_keeps_the_fill_level_in_permits() {
        let slow = Params { t: 200, burst: 3 };
        let m = MAX_SPAN;
        assert_eq!(rescale(1_300, 1_000, P, slow, m), 1_600);
        assert_eq!(rescale(1_300, 1_000, slow, P, m), 1_150);
        assert_eq!(rescale(900, 1_000, P, slow, m), 900);
        // Rounded up: 1 ns of debt at t = 3 becomes ceil(2/3) = 1 ns at t = 2.
        let (t3, t2) = (Params { t: 3, burst: 1 }, Params { t: 2, burst: 1 });
        assert_eq!(rescale(11, 10, t3, t2, m), 11);
        let slowest = Params { t: 1_000, burst: 1 };
        assert_eq!(rescale(MAX_SPAN, 0, P, slowest, m), MAX_SPAN);
        assert_eq!(rescale(1_300, 1_000, P, slow, 1_500), 1_500);
    }
}
