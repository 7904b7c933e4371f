//! [`ChangeLock`]: the lock that serialises everything that rewrites a
//! limiter's state other than an acquisition: quota changes, cancellations,
//! and (with `std`) the refund table of cancelled reservations.
//!
//! Acquisitions never take it: `try_acquire*` and a `reserve_n` whose slot
//! is free now are one CAS loop on the state word. The lock is taken by
//! `set_quota`, by `cancel`, and by a reservation that would wait while the
//! refund table holds refunds (see [`crate::refunds`]), so it is held for a
//! few dozen instructions (or a scan of the refund table) at a time.
//!
//! With `std` it is a `std::sync::Mutex` (loom's under `cfg(loom)`) around
//! the [`Refunds`] table, so a contended caller sleeps rather than spins.
//! Without `std` there is no table and it is a spin lock: an acquire CAS from
//! 0 to 1 and a release store of 0.

#[cfg(feature = "std")]
use crate::refunds::Refunds;
#[cfg(not(feature = "std"))]
use crate::sync::{AtomicU32, Ordering, spin_hint};
#[cfg(feature = "std")]
use crate::sync::{Mutex, MutexGuard};

/// The lock of the module docs.
#[derive(Debug)]
pub(crate) struct ChangeLock {
    #[cfg(feature = "std")]
    refunds: Mutex<Refunds>,
    #[cfg(not(feature = "std"))]
    held: AtomicU32,
}

/// Proof that the [`ChangeLock`] is held; it is released on drop.
#[derive(Debug)]
pub(crate) struct ChangeGuard<'a> {
    #[cfg(feature = "std")]
    refunds: MutexGuard<'a, Refunds>,
    #[cfg(not(feature = "std"))]
    lock: &'a ChangeLock,
}

impl ChangeLock {
    /// An unlocked lock (with an empty refund table).
    pub(crate) fn new() -> ChangeLock {
        ChangeLock {
            #[cfg(feature = "std")]
            refunds: Mutex::new(Refunds::new()),
            #[cfg(not(feature = "std"))]
            held: AtomicU32::new(0),
        }
    }

    /// Takes the lock.
    pub(crate) fn lock(&self) -> ChangeGuard<'_> {
        #[cfg(feature = "std")]
        {
            // A panic while the lock was held cannot leave the table
            // inconsistent (every update is a single push, remove or field
            // write), so a poisoned lock is used as it is.
            let refunds = self.refunds.lock().unwrap_or_else(|p| p.into_inner());
            ChangeGuard { refunds }
        }
        #[cfg(not(feature = "std"))]
        {
            // Acquire: the previous holder's writes happen before ours.
            // Weak CAS in a spin loop; the lock is rarely contended.
            while self
                .held
                .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                spin_hint();
            }
            ChangeGuard { lock: self }
        }
    }
}

#[cfg(feature = "std")]
impl ChangeGuard<'_> {
    /// The refund table, which only the lock's holder may touch.
    pub(crate) fn refunds(&mut self) -> &mut Refunds {
        &mut self.refunds
    }
}

#[cfg(not(feature = "std"))]
impl Drop for ChangeGuard<'_> {
    fn drop(&mut self) {
        // Release: the next holder sees our writes.
        self.lock.held.store(0, Ordering::Release);
    }
}
