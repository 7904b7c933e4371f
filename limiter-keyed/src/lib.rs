//! Per-key rate limiting with bounded memory: one GCRA state per key (per
//! client, per IP, per `user:path`) under one shared [`Quota`](limiter_core::Quota),
//! optionally overridden per key.
//!
//! # Which type do I use
//!
//! | you want | use |
//! |---|---|
//! | a limit per key, deciding now (`429` or proceed) | [`KeyedLimiter::new`], then [`try_acquire`](KeyedLimiter::try_acquire) |
//! | a cap on keys, a policy when full, per-key quotas, another clock | [`KeyedLimiter::builder`] ([`KeyedBuilder`], [`WhenFull`]) |
//! | to wait for a key's permit on tokio (feature `tokio`) | a `KeyedLimiter<K, TokioClock>` and its `take`, `take_timeout`, `take_until` (and `take_n*`) |
//! | a slot to wait for yourself, or give back | [`reserve_n`](KeyedLimiter::reserve_n) and [`cancel`](KeyedLimiter::cancel) |
//! | why a call was refused, and when to retry | [`KeyedError`] and [`retry_after`](KeyedError::retry_after) |
//! | a key's limit together with others, all or nothing (per user *and* global) | [`KeyedLimiter::limit`] ([`KeyLimit`]) in `limiter_core::composite::try_acquire_all` / `reserve_all` |
//! | one limit for everyone | not this crate: `limiter_core::RateLimiter` |
//!
//! ```
//! use std::time::Duration;
//! use limiter_core::{ManualClock, Quota};
//! use limiter_keyed::KeyedLimiter;
//!
//! let clock = ManualClock::new();
//! let limiter = KeyedLimiter::builder(Quota::per_second(1)?)
//!     .max_keys(10_000)
//!     .clock(clock.clone())
//!     .build()?;
//! assert!(limiter.try_acquire(&"10.0.0.1").is_ok());
//! let refused = limiter.try_acquire(&"10.0.0.1").unwrap_err();
//! assert_eq!(refused.retry_after(), Some(Duration::from_secs(1))); // a `Retry-After`
//! assert!(limiter.try_acquire(&"10.0.0.2").is_ok()); // keys are independent
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Guarantees
//!
//! Each key's state is a [`GcraCell`](limiter_core::cell::GcraCell) (one
//! `AtomicU64` and the cell's identity) in an [`scc::HashIndex`](https://docs.rs/scc): the path for
//! a key that exists takes no lock (an epoch-protected lookup that writes no
//! shared word) and then the cell's CAS, and allocates nothing; a new key
//! allocates once and locks one bucket to publish itself. Memory is bounded
//! without the caller's help: at most `max_keys` keys
//! ([`KeyedLimiter::DEFAULT_MAX_KEYS`] by default), idle keys (whose state
//! is full again, so they carry no information) are swept a few entries per
//! call, and a full limiter either refuses new keys
//! ([`WhenFull::RejectNewKeys`], the default) or evicts the least recent
//! ones ([`WhenFull::EvictLeastRecent`]). Never unbounded growth, never a
//! panic. `docs/keyed.md` gives the measured memory per key and why
//! `HashIndex` rather than dashmap (whose lookups take a shard's read lock)
//! or papaya; `benches/keyed.rs` measures it beside dashmap.
//!
//! Time is nanoseconds on the limiter's clock, counted from the limiter's
//! construction, as in `limiter-core`.
//!
//! # Features
//!
//! * `tokio`: asynchronous waiting on a `limiter_async::TokioClock`
//!   limiter, with the FIFO, timeout and deadline semantics of
//!   `limiter-async`'s `AsyncLimiter`.

mod charge;
mod composite;
mod decision;
mod entry;
mod error;
mod eviction;
mod limiter;
mod overrides;
mod penalty;
#[cfg(feature = "tokio")]
mod take;
mod top_keys;

pub use charge::ChargeKeyAfter;
pub use composite::KeyLimit;
pub use entry::WhenFull;
pub use error::KeyedError;
pub use limiter::{DEFAULT_MAX_OVERRIDES, KeyedBuilder, KeyedLimiter};
pub use overrides::OverrideError;
pub use penalty::{MAX_STRIKES, Penalty, PenaltyBox, PenaltyError, Strike};
pub use top_keys::{TopKey, TopKeys};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
