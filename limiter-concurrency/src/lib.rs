//! Concurrency limits, fixed and adaptive: how many at once, not how often.
//!
//! A rate limit bounds how often work starts; a concurrency limit bounds how
//! much is in progress, which is what protects a downstream whose capacity
//! moves: at one rate, a dependency that slows from 10 ms to 100 ms holds ten
//! times as many requests. This crate gives:
//!
//! * [`ConcurrencyLimiter`]: the limit and the in-flight count in one atomic
//!   word (layout in `docs/concurrency.md`), a permit taken by one CAS that checks
//!   `in_flight < limit`, released by dropping it ([`Permit`],
//!   [`OwnedPermit`]); `try_acquire`, and `acquire().await` /
//!   `acquire_until(deadline)` in a bounded FIFO or LIFO queue
//!   ([`QueueOrder`]); limit changes that revoke nothing and wake exactly
//!   the waiters they admit.
//! * [`PartitionedLimiter`]: guaranteed shares (live 90 % / batch 10 %) that
//!   never sum above the global limit, with borrowing of idle share, all in
//!   one atomic word.
//! * [`estimator`]s behind one trait, fed by the permits themselves
//!   ([`Permit::finish`] with an [`Outcome`]): [`Aimd`], [`Vegas`],
//!   [`Gradient2`], each behind a [`DriftGuard`].
//!
//! * [`http`] (feature `tower`): a tower layer for HTTP and gRPC services
//!   that sheds with 503 + `Retry-After` (or gRPC `RESOURCE_EXHAUSTED`) or
//!   waits up to a bound, and feeds the estimator from latency and status.
//!
//! The modules: `word` (the state word's layout and its decisions as pure
//! functions), `shared` (the CAS protocol and the wait queue's lock),
//! `queue` (the waiters), `limiter` and `permit` (the public types),
//! `partition`, `estimator`, `error`, `sync` (where atomics come from).
//! The design, the estimators' signals and failure modes, and the
//! simulator's results are in `docs/concurrency.md`.

mod error;
pub mod estimator;
#[cfg(all(feature = "tower", not(loom)))]
pub mod http;
mod limiter;
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_hooks;
pub mod partition;
mod partition_word;
mod permit;
mod queue;
mod shared;
mod sync;
mod word;

pub use error::{AcquireError, ConfigError, NoPermit};
pub use estimator::{Aimd, Bounds, DriftGuard, Estimator, Gradient2, Outcome, Sample, Vegas};
pub use limiter::{Acquire, Builder, ConcurrencyLimiter};
pub use partition::{MAX_PARTITIONED_LIMIT, MAX_PARTITIONS, PartitionPermit, PartitionedLimiter};
pub use permit::{OwnedPermit, Permit};
pub use queue::QueueOrder;
pub use word::MAX_LIMIT;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
