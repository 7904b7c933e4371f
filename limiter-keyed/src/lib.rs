//! Per-key rate limiting with bounded memory: one GCRA state per key (per
//! client, per IP, per `user:path`) under one shared [`Quota`](limiter_core::Quota),
//! optionally overridden per key.
//!
//! Each key's state is a [`GcraCell`](limiter_core::GcraCell) (one
//! `AtomicU64` and the cell's identity) in an [`scc::HashIndex`](https://docs.rs/scc): the path for
//! a key that exists takes no lock (an epoch-protected lookup that writes no
//! shared word) and then the cell's CAS, and allocates nothing; a new key
//! allocates once and locks one bucket to publish itself. Memory is bounded
//! without the caller's help: at most `max_keys` keys ([`DEFAULT_MAX_KEYS`]
//! by default), idle keys (whose state is full again, so they carry no
//! information) are swept a few entries per call, and a full limiter either
//! refuses new keys ([`WhenFull::RejectNewKeys`], the default) or evicts the
//! least recent ones ([`WhenFull::EvictLeastRecent`]). Never unbounded
//! growth, never a panic. `docs/keyed.md` gives the measured memory per key
//! and why `HashIndex` rather than dashmap (whose lookups take a shard's
//! read lock) or papaya; `benches/keyed.rs` measures it beside dashmap.
//!
//! # Map of the crate
//!
//! | module | one job |
//! |---|---|
//! | `limiter` | [`KeyedLimiter`], its builder, the lookup and insert paths |
//! | `eviction` | the key count, sweeps of idle keys, [`WhenFull`] |
//! | `error` | [`KeyedError`] |
//! | `take` (feature `tokio`) | `take(&key).await`: reserve, sleep until the slot, refund on drop |
//!
//! Time is nanoseconds on the limiter's clock, as in `limiter-core`.
//!
//! # Features
//!
//! * `tokio`: asynchronous waiting on a `limiter_async::TokioClock`
//!   limiter, with the FIFO and timeout semantics of `limiter-async`'s
//!   `AsyncLimiter`.

mod error;
mod eviction;
mod limiter;
#[cfg(feature = "tokio")]
mod take;

pub use error::KeyedError;
pub use limiter::{DEFAULT_MAX_KEYS, KeyedBuilder, KeyedLimiter, WhenFull};
