//! Several limits in one decision, all or nothing: [`try_acquire_all`] and
//! [`reserve_all`] take permits from every [`Limit`] of a list (per user
//! *and* per route *and* global), or from none of them.
//!
//! # How
//!
//! Each part is reserved in list order with the request's wait allowance
//! ([`Limit::reserve_part`], the limiter's own `reserve_n`). When one
//! refuses, the reservations already taken are cancelled in reverse order
//! ([`Limit::cancel_part`], the limiter's own `cancel`), so a refused request
//! is charged nothing, and the refusal ([`AllOfError`]) names the part that
//! refused with its own error (its `retry_after` is that part's exact wait).
//! A grant ([`AllReservation`]) waits for the longest of the parts' slots.
//!
//! # Invariants
//!
//! * Never more than any part's quota: every permit the composite grants was
//!   granted by each part's own decision.
//! * A refused request is charged nothing when no other decision touches a
//!   part between this request's reservation on it and its cancellation
//!   (always so single-threaded, and exact: the part's state is restored
//!   bit for bit). If another thread's decision lands on that part in those
//!   few nanoseconds, `cancel` can no longer restore the state; a slot still
//!   ahead becomes a refund for the next waiter, and a slot already passed
//!   (a try's) stays spent: stricter, never looser.
//!   [`AllOfError::unrefunded`] counts those permits. Order the parts from
//!   the narrowest (per key) to the widest (global): a refusal then mostly
//!   comes before the busy global part is touched, and the parts that must
//!   be given back are the ones nobody else is using.
//! * Parts may be any mix of limiters that return the same error type `E`:
//!   every [`Decide`] with `Key = ()` and [`Reservation`] tickets is a
//!   `Limit<E>` for any `E: From<AcquireError>`
//!   (`AcquireError` itself, or `limiter_keyed::KeyedError`, whose keyed
//!   parts come from `KeyedLimiter::limit`).

use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::decision::Decide;
use crate::error::AcquireError;
use crate::reservation::Reservation;

/// One limit of a composite decision: something that can reserve permits
/// and take them back. Every [`Decide`] of one limit is one, for any error
/// type its [`AcquireError`] converts into; keyed limiters offer one per
/// key.
///
/// The methods are named apart from the limiters' own so that both can be
/// in scope at once.
pub trait Limit<E = AcquireError> {
    /// Reserves `n` permits at a slot at most `max_wait` away, or refuses
    /// and changes nothing (the part's `reserve_n`).
    ///
    /// # Errors
    ///
    /// The part's own refusal.
    fn reserve_part(&self, n: u32, max_wait: Duration) -> Result<Reservation, E>;

    /// Gives back a reservation this part made; whether its permits are back
    /// (the part's `cancel`).
    fn cancel_part(&self, reservation: Reservation) -> bool;
}

impl<L, E> Limit<E> for L
where
    L: Decide<Key = (), Ticket = Reservation> + ?Sized,
    E: From<AcquireError>,
{
    fn reserve_part(&self, n: u32, max_wait: Duration) -> Result<Reservation, E> {
        self.decide(&(), n, max_wait)
            .map(|grant| grant.ticket)
            .map_err(|denial| E::from(AcquireError::from(denial)))
    }

    fn cancel_part(&self, reservation: Reservation) -> bool {
        self.cancel(&(), reservation)
    }
}

/// Why a composite decision granted nothing: the first part that refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllOfError<E = AcquireError> {
    /// The position, in the list given, of the part that refused.
    pub index: usize,
    /// That part's refusal (its `retry_after` is that part's wait, a lower
    /// bound of when the whole request conforms: the parts after it were not
    /// asked).
    pub error: E,
    /// Permits taken from earlier parts that could not be given back (0
    /// unless another thread decided on one of them meanwhile; see the
    /// module docs). They stay spent: stricter, never looser.
    pub unrefunded: u32,
}

impl<E: fmt::Display> fmt::Display for AllOfError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "limit {} of the composite refused: {}",
            self.index, self.error
        )
    }
}

#[cfg(feature = "std")]
impl<E: std::error::Error + 'static> std::error::Error for AllOfError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Permits granted by every part of a composite decision, usable after
/// [`wait`](AllReservation::wait), the longest of the parts' waits. Give
/// them back with [`cancel_all`] if they will not be used; dropping it keeps
/// them spent.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "the permits are already counted on every part; use them, or cancel_all"]
pub struct AllReservation {
    parts: Vec<Reservation>,
    wait: Duration,
}

impl AllReservation {
    /// How long after the decision every part's permits may be used.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The parts' own reservations, in the order of the list.
    pub fn parts(&self) -> &[Reservation] {
        &self.parts
    }
}

/// Takes `n` permits from every part now, or from none.
///
/// # Errors
///
/// [`AllOfError`] with the first part that refused; every reservation taken
/// before it was cancelled.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{composite::Limit, ManualClock, Quota, RateLimiter, composite::try_acquire_all};
///
/// let clock = ManualClock::new();
/// let per_user = RateLimiter::with_clock(Quota::per_second(1)?.with_burst(2)?, clock.clone());
/// let global = RateLimiter::with_clock(Quota::per_second(10)?.with_burst(3)?, clock.clone());
/// let parts: [(&dyn Limit, u32); 2] = [(&per_user, 1), (&global, 1)];
/// try_acquire_all(&parts)?;
/// try_acquire_all(&parts)?;
/// let refused = try_acquire_all(&parts).unwrap_err();
/// assert_eq!(refused.index, 0); // the user's limit
/// assert_eq!(refused.error.retry_after(), Some(Duration::from_secs(1)));
/// assert_eq!(global.available(), 1); // the global permit was not charged
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn try_acquire_all<E>(parts: &[(&dyn Limit<E>, u32)]) -> Result<(), AllOfError<E>> {
    // A try is a reservation allowed no wait; only reservations can be
    // cancelled, and the grant is then simply kept.
    reserve_all(parts, Duration::ZERO).map(|_kept| ())
}

/// Reserves `n` permits on every part at slots at most `max_wait` away, or on
/// none; the grant waits for the longest slot.
///
/// A part whose slot comes earlier than the longest is charged from its own
/// slot: its permits count from then although they are used later (the
/// strict side).
///
/// # Errors
///
/// [`AllOfError`] with the first part that refused (its slot lies past
/// `max_wait`, or its own error); every reservation taken before it was
/// cancelled.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{composite::Limit, ManualClock, Quota, RateLimiter, composite::cancel_all, composite::reserve_all};
///
/// let clock = ManualClock::new();
/// let a = RateLimiter::with_clock(Quota::per_second(10)?, clock.clone());
/// let b = RateLimiter::with_clock(Quota::per_second(4)?, clock.clone());
/// let parts: [(&dyn Limit, u32); 2] = [(&a, 1), (&b, 1)];
/// let now = reserve_all(&parts, Duration::from_secs(1))?;
/// let next = reserve_all(&parts, Duration::from_secs(1))?;
/// assert_eq!(now.wait(), Duration::ZERO);
/// assert_eq!(next.wait(), Duration::from_millis(250)); // b's slot, the longer
/// assert!(cancel_all(&parts, next)); // the last ones: given back exactly
/// # let _ = now;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn reserve_all<E>(
    parts: &[(&dyn Limit<E>, u32)],
    max_wait: Duration,
) -> Result<AllReservation, AllOfError<E>> {
    let mut taken = Vec::with_capacity(parts.len());
    let mut wait = Duration::ZERO;
    for (index, &(part, n)) in parts.iter().enumerate() {
        match part.reserve_part(n, max_wait) {
            Ok(reservation) => {
                wait = wait.max(reservation.wait());
                taken.push(reservation);
            }
            Err(error) => {
                let unrefunded = give_back(&parts[..index], taken);
                return Err(AllOfError {
                    index,
                    error,
                    unrefunded,
                });
            }
        }
    }
    Ok(AllReservation { parts: taken, wait })
}

/// Gives back every part of `reservation`, made by [`reserve_all`] on the
/// same `parts`; whether all of its permits are back.
///
/// # Examples
///
/// See [`reserve_all`].
pub fn cancel_all<E>(parts: &[(&dyn Limit<E>, u32)], reservation: AllReservation) -> bool {
    let count = reservation.parts.len().min(parts.len());
    give_back(&parts[..count], reservation.parts) == 0
}

/// Cancels `taken[i]` on `parts[i]`, the last first (so that two parts on
/// one limiter restore it in order); the permits that could not be given
/// back.
fn give_back<E>(parts: &[(&dyn Limit<E>, u32)], taken: Vec<Reservation>) -> u32 {
    let mut unrefunded = 0u32;
    for (&(part, _), reservation) in parts.iter().zip(taken).rev() {
        let permits = reservation.permits();
        if permits > 0 && !part.cancel_part(reservation) {
            unrefunded = unrefunded.saturating_add(permits);
        }
    }
    unrefunded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ManualClock, Quota, RateLimiter};

    fn limiter(per_second: u32, burst: u32, clock: &ManualClock) -> RateLimiter<ManualClock> {
        let quota = Quota::per_second(per_second)
            .unwrap()
            .with_burst(burst)
            .unwrap();
        RateLimiter::with_clock(quota, clock.clone())
    }

    #[test]
    fn a_refusal_charges_nothing_and_names_the_part() {
        let clock = ManualClock::new();
        let (a, b, c) = (
            limiter(10, 5, &clock),
            limiter(10, 2, &clock),
            limiter(1, 5, &clock),
        );
        let parts: [(&dyn Limit, u32); 3] = [(&a, 2), (&b, 2), (&c, 1)];
        try_acquire_all(&parts).unwrap();
        let refused = try_acquire_all(&parts).unwrap_err();
        assert_eq!(refused.index, 1);
        assert_eq!(
            refused.error,
            AcquireError::RateLimited {
                wait: Duration::from_millis(200)
            }
        );
        assert_eq!(refused.unrefunded, 0);
        assert_eq!((a.available(), b.available(), c.available()), (3, 0, 4));
    }

    #[test]
    fn the_grant_waits_for_the_longest_slot() {
        let clock = ManualClock::new();
        let (a, b) = (limiter(10, 1, &clock), limiter(2, 1, &clock));
        let parts: [(&dyn Limit, u32); 2] = [(&a, 1), (&b, 1)];
        try_acquire_all(&parts).unwrap();
        // b's slot is 500 ms away, a's 100 ms: refused at 400 ms allowed.
        let refused = reserve_all(&parts, Duration::from_millis(400)).unwrap_err();
        assert_eq!(refused.index, 1);
        assert_eq!(a.available(), 0);
        clock.advance(Duration::from_millis(100));
        assert_eq!(a.available(), 1); // a's reservation was given back
        let granted = reserve_all(&parts, Duration::from_millis(400)).unwrap();
        assert_eq!(granted.wait(), Duration::from_millis(400));
        assert_eq!(granted.parts().len(), 2);
        assert!(cancel_all(&parts, granted));
        assert_eq!((a.available(), b.available()), (1, 0));
    }

    #[test]
    fn one_limiter_twice_is_restored_in_order() {
        let clock = ManualClock::new();
        let (a, b) = (limiter(10, 4, &clock), limiter(10, 1, &clock));
        let parts: [(&dyn Limit, u32); 3] = [(&a, 1), (&a, 2), (&b, 2)];
        let refused = try_acquire_all(&parts).unwrap_err();
        assert!(matches!(
            refused.error,
            AcquireError::InsufficientCapacity {
                requested: 2,
                burst: 1
            }
        ));
        assert_eq!((refused.index, refused.unrefunded), (2, 0));
        assert_eq!(a.available(), 4);
    }

    #[test]
    fn an_empty_list_grants_at_once() {
        let parts: [(&dyn Limit, u32); 0] = [];
        assert_eq!(
            reserve_all(&parts, Duration::ZERO).unwrap().wait(),
            Duration::ZERO
        );
    }
}
