//! Identities: which limiter (or per-key cell) issued a reservation.
//!
//! Every object that can hand out cancellable reservations takes an
//! [`Owner`] when it is made, and stamps it on each [`Reservation`] it
//! issues. `cancel` refuses a reservation whose owner is not its own, so a
//! reservation can never refund permits to a limiter that did not grant them
//! (two limiters with equal state words would otherwise accept each other's
//! undo).
//!
//! An owner is a number drawn from one process-wide 64-bit counter: unique
//! for the life of the process (2^64 limiters cannot be made), so an owner is
//! never reused, not even after its limiter is dropped. Owner 0 is
//! [`Owner::NONE`]: reservations that nothing can cancel carry it.
//!
//! [`Reservation`]: crate::Reservation

use crate::sync::{AtomicU64, Ordering};

/// The identity of a reservation's issuer. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Owner(u64);

#[cfg(not(loom))]
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

impl Owner {
    /// The owner of reservations that no limiter can cancel.
    pub(crate) const NONE: Owner = Owner(0);

    /// A fresh identity, never handed out before in this process.
    pub(crate) fn new() -> Owner {
        // Relaxed: only uniqueness matters, which the RMW alone guarantees.
        Owner(next_owner().fetch_add(1, Ordering::Relaxed))
    }

    /// The identity as a number, which tags refunds (tables exist only with
    /// `std`).
    #[cfg(feature = "std")]
    #[inline]
    pub(crate) fn get(self) -> u64 {
        self.0
    }
}

#[cfg(not(loom))]
fn next_owner() -> &'static AtomicU64 {
    &NEXT_OWNER
}

/// loom's atomics cannot live in a `static` (they belong to one model
/// execution), so under loom each execution gets its own counter.
#[cfg(loom)]
fn next_owner() -> &'static AtomicU64 {
    loom::lazy_static! {
        static ref NEXT_OWNER: AtomicU64 = AtomicU64::new(1);
    }
    &NEXT_OWNER
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn owners_are_unique_and_never_none() {
        let a = Owner::new();
        let b = Owner::new();
        assert_ne!(a, b);
        assert_ne!(a, Owner::NONE);
        assert_ne!(b, Owner::NONE);
    }
}
