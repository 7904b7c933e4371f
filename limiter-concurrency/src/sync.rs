//! The one place that says where atomics and the mutex come from.
//!
//! Under `cfg(loom)` they are loom's, so `loom-tests` can explore every
//! interleaving of the state-word protocol and the wait queue. Otherwise the
//! atomics are portable-atomic's (native where the target has them) and the
//! mutex is std's. No other module names an atomic type's origin.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicU64, AtomicU128, Ordering};

#[cfg(loom)]
pub(crate) use loom_u128::AtomicU128;

#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning: every critical section in this crate
/// leaves the protected state consistent before anything that can panic
/// (a waker's `wake`), so a poisoned lock still guards valid state.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// loom models no 128-bit atomics: under loom the partition word uses this
/// stand-in, a loom mutex around a `u128` whose operations are atomic by
/// construction, so the model checks the CAS protocol (every interleaving
/// of loads and CASes), which is what this crate owns.
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
        pub(crate) fn compare_exchange_weak(
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
    }
}
