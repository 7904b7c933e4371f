//! The one place that says where atomics come from.
//!
//! Under `cfg(loom)` the atomic types are loom's, so the model checker in
//! `loom-tests` can explore every interleaving of the CAS protocols. Otherwise
//! they are portable-atomic's, which are the native atomics where the target
//! has them and a lock-free-for-readers fallback where it lacks 64-bit CAS
//! (for example `thumbv7m-none-eabi`). No other module names an atomic type's
//! origin. The same holds for the one mutex (the change lock's, with `std`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
/// The refund table's length hint, which exists only with `std`.
#[cfg(all(feature = "std", not(loom)))]
pub(crate) use portable_atomic::AtomicUsize;
#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicU32, AtomicU64, AtomicU128, Ordering, fence};

#[cfg(loom)]
pub(crate) use loom_u128::AtomicU128;

#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(all(feature = "std", not(loom)))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// loom models no 128-bit atomics. Under loom the 128-bit state words
/// (sliding window, warm-up) use this stand-in: a loom mutex around a `u128`, whose
/// operations are atomic by construction. The model then checks the CAS
/// *protocol* (every interleaving of loads and CASes), which is what the
/// algorithms own; the hardware CAS itself is portable-atomic's.
#[cfg(loom)]
mod loom_u128 {
    use super::Ordering;

    #[derive(Debug)]
    pub(crate) struct AtomicU128(loom::sync::Mutex<u128>);

    impl AtomicU128 {
        pub(crate) fn new(v: u128) -> AtomicU128 {
            AtomicU128(loom::sync::Mutex::new(v))
        }
        pub(crate) fn load(&self, _: Ordering) -> u128 {
            *self.0.lock().unwrap()
        }
        pub(crate) fn compare_exchange(
            &self,
            current: u128,
            new: u128,
            _: Ordering,
            _: Ordering,
        ) -> Result<u128, u128> {
            let mut v = self.0.lock().unwrap();
            if *v == current {
                *v = new;
                Ok(current)
            } else {
                Err(*v)
            }
        }
        pub(crate) fn compare_exchange_weak(
            &self,
            current: u128,
            new: u128,
            s: Ordering,
            f: Ordering,
        ) -> Result<u128, u128> {
            self.compare_exchange(current, new, s, f)
        }
    }
}

/// Backs off inside a spin loop: a CPU hint normally, a yield to the model
/// checker under loom (which otherwise would explore the spin forever).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
