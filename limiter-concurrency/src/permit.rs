//! Permits: one unit of concurrency, given back when dropped.
//!
//! A [`Permit`] borrows its limiter (no reference count to touch, the
//! fastest path); an [`OwnedPermit`] holds a handle (`'static`, for spawned
//! tasks and response futures). Either releases on drop, feeding the
//! limiter's estimator first when finished with an [`Outcome`].

use std::sync::Arc;

use crate::estimator::Outcome;
use crate::shared::Inner;

/// A permit of a [`ConcurrencyLimiter`](crate::ConcurrencyLimiter),
/// borrowed from it.
///
/// Dropping it releases the permit: to the next waiter if one waits (the
/// permit changes hands without the count moving), to the count otherwise.
/// [`finish`](Permit::finish) releases it too and first reports how the
/// work went to the limiter's estimator. [`forget`](Permit::forget) keeps
/// it held for good: the limiter admits one fewer from then on.
#[derive(Debug)]
#[must_use = "dropping a permit releases it at once"]
pub struct Permit<'a> {
    pub(crate) inner: &'a Inner,
    pub(crate) in_flight: u32,
}

impl Permit<'_> {
    /// Permits in flight when this one was admitted (itself included).
    pub fn in_flight_at_admission(&self) -> u32 {
        self.in_flight
    }

    /// Releases the permit after reporting `outcome` to the estimator (if
    /// the limiter has one).
    pub fn finish(self, outcome: Outcome) {
        self.inner.record(outcome, self.in_flight);
        // Drop releases.
    }

    /// Keeps the permit held forever: the limiter admits one fewer from
    /// now on. For permits handed to work that outlives any scope (and
    /// whose end is reported by nobody); prefer an [`OwnedPermit`].
    pub fn forget(self) {
        core::mem::forget(self);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.inner.shared.release();
    }
}

/// A permit that holds a handle to its limiter (`'static`).
///
/// The same as a [`Permit`] (drop releases; [`finish`](OwnedPermit::finish)
/// reports first) for work that outlives the borrow: a spawned task, a
/// response future.
#[derive(Debug)]
#[must_use = "dropping a permit releases it at once"]
pub struct OwnedPermit {
    pub(crate) inner: Arc<Inner>,
    pub(crate) in_flight: u32,
    /// Cleared by `forget`: the drop then releases nothing.
    pub(crate) armed: bool,
}

impl OwnedPermit {
    /// Permits in flight when this one was admitted (itself included).
    pub fn in_flight_at_admission(&self) -> u32 {
        self.in_flight
    }

    /// Releases the permit after reporting `outcome` to the estimator.
    pub fn finish(self, outcome: Outcome) {
        self.inner.record(outcome, self.in_flight);
    }

    /// Keeps the permit held forever (see [`Permit::forget`]).
    pub fn forget(mut self) {
        self.armed = false;
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if self.armed {
            self.inner.shared.release();
        }
    }
}
