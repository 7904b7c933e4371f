//! The one place that says where the atomics come from: loom's under
//! `cfg(loom)` (so `loom-tests` explores every interleaving of the CAS loop),
//! the standard library's otherwise (this crate needs `std` for the time-zone
//! database, and every target with `std` and 64-bit CAS has them natively).

// `AtomicUsize` is the per-key table's key count; that table is not built
// under loom (its map is not loom-aware), so loom's atomics need no usize.
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
