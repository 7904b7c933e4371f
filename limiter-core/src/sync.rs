//! The one place that says where atomics come from.
//!
//! Under `cfg(loom)` the atomic types are loom's, so the model checker in
//! `loom-tests` can explore every interleaving of the CAS protocols. Otherwise
//! they are portable-atomic's, which are the native atomics where the target
//! has them and a lock-free-for-readers fallback where it lacks 64-bit CAS
//! (for example `thumbv7m-none-eabi`). No other module names an atomic type's
//! origin.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicU32, AtomicU64, Ordering};

/// Backs off inside a spin loop: a CPU hint normally, a yield to the model
/// checker under loom (which otherwise would explore the spin forever).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
