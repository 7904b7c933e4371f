//! Lock-free rate limiting: GCRA (the leaky bucket as a meter) whose whole
//! state is one `AtomicU64`, updated by CAS loops. No mutex on any
//! acquisition path, no allocation per call.
//!
//! # Which type do I use
//!
//! | you want | use |
//! |---|---|
//! | one limit: `n` per period with a burst, decided in a few nanoseconds | [`RateLimiter`] (GCRA) |
//! | a fixed-window-like count that forgets smoothly | [`SlidingWindow`] |
//! | a rate that ramps up after idle time (cold start of a downstream) | [`WarmUpLimiter`] |
//! | one limit shared by classes, the higher ones never starved | [`PriorityLimiter`] |
//! | a rate moved by the downstream's latency or load | [`AdaptiveLimiter`] |
//! | counts of allowed, rejected and delayed decisions | [`Metered`] around any of them |
//! | one limit per key, in your own map | the `limiter-keyed` crate (built on [`cell`]) |
//! | several limits at once, all or nothing (per user *and* global) | a pair `(A, B)` through [`Decide`], or [`composite`] |
//! | waiting with `.await` | the `limiter-async` crate, on any [`Decide`] |
//!
//! and, on each of them: [`try_acquire`](RateLimiter::try_acquire) /
//! [`try_acquire_n`](RateLimiter::try_acquire_n) to take permits now or
//! learn the exact wait ([`AcquireError::retry_after`]);
//! [`take`](RateLimiter::take) / [`take_n`](RateLimiter::take_n) /
//! [`take_timeout`](RateLimiter::take_timeout) /
//! [`take_n_timeout`](RateLimiter::take_n_timeout) to block until they come;
//! [`reserve_n`](RateLimiter::reserve_n) and
//! [`cancel`](RateLimiter::cancel) to claim a future slot and give it back.
//! Clocks: [`DefaultClock`] (the TSC), [`MonotonicClock`], [`ManualClock`]
//! for exact tests, and more in [`clock`].
//!
//! The root holds what a user of one limiter needs. The modules hold the
//! rest: [`adaptive`] (the rate controllers), [`cell`] (the building
//! blocks of per-key limiters), [`clock`], [`composite`] (several limits
//! all or nothing) and [`debt`] (charging after the fact).
//!
//! # How it works
//!
//! [`RateLimiter`]'s whole state is one `AtomicU64` (`[generation:4 |
//! tat:60]`) updated by one CAS loop; a denial writes nothing. The limiter
//! is one 128-byte block holding its first quota (generation 0); the first
//! `set_quota` or `cancel` allocates versioned slots for later generations,
//! so `set_quota` is hot and no decision ever uses a stale quota. Time is nanoseconds since the
//! limiter's epoch (the clock's reading when it was made), so any clock
//! origin works. The GCRA names are `t` (emission interval),
//! `tau = t · (burst − 1)` (tolerance) and `tat` (theoretical arrival time);
//! `docs/design.md` derives the math and argues the memory orderings, and
//! each module opens with the invariants it keeps: the math is in `gcra`,
//! the CAS loop in `state`, the word layout and quota slots in
//! `quota_versions`, cancellations in `refunds` and `change_lock`.
//!
//! # Example
//!
//! ```
//! use core::time::Duration;
//! use limiter_core::{ManualClock, Quota, RateLimiter};
//!
//! let clock = ManualClock::new();
//! let limiter = RateLimiter::with_clock(Quota::per_second(2)?.with_burst(3)?, clock.clone());
//! let admitted = (0..10).filter(|_| limiter.try_acquire().is_ok()).count();
//! assert_eq!(admitted, 3); // the burst, at one instant
//!
//! clock.advance(Duration::from_secs(1));
//! assert_eq!(limiter.available(), 2); // then 2 per second
//! # Ok::<(), limiter_core::QuotaError>(())
//! ```
//!
//! # Features
//!
//! * `std` (default): [`MonotonicClock`], [`clock::CoarseClock`] (a cached
//!   millisecond clock), the blocking `take*` on real clocks, refunds of
//!   reservations cancelled out of order ([`cell::CellRefunds`] for cells),
//!   `std::error::Error` impls. Without it the crate is `no_std` (it needs
//!   `alloc` for [`ManualClock`]) and builds on targets without native 64-bit
//!   atomics through portable-atomic.
//! * `tsc` (default, implies `std`): `TscClock`, the CPU time-stamp counter
//!   read through `quanta`, and the [`DefaultClock`] when enabled.
//! * `metrics`: `Metered::publish`, reporting the counters through the
//!   `metrics` facade.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod adaptive;
mod blocking;
pub mod cell;
mod change_lock;
pub mod clock;
pub mod composite;
pub mod debt;
mod decision;
mod error;
mod follow;
mod gcra;
mod identity;
mod limiter;
mod metered;
mod priority;
mod quota;
mod quota_versions;
#[cfg(feature = "std")]
mod refunds;
mod reservation;
mod sliding_window;
mod state;
mod sync;
mod warm_up;

// The root holds what a user of one limiter needs (at most 30 names,
// counted by tests/public_api.rs); the rest lives in the modules above.
pub use adaptive::AdaptiveLimiter;
#[cfg(feature = "std")]
pub use clock::MonotonicClock;
pub use clock::{Clock, DefaultClock, ManualClock};
pub use decision::{Decide, Denial, Grant, Policy, Unavailable};
pub use error::{AcquireError, QuotaError};
pub use limiter::RateLimiter;
pub use metered::{Metered, Stats};
pub use priority::{PriorityClass, PriorityLimiter};
pub use quota::Quota;
pub use reservation::{Headroom, Reservation};
pub use sliding_window::SlidingWindow;
pub use warm_up::{WarmUpBuilder, WarmUpLimiter};

/// Internals for the deliberately broken variants in `loom-tests`, which
/// must make the same decisions as [`RateLimiter`] and differ only in their
/// atomic protocol. Exists only under `cfg(loom)`; not API.
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom {
    use crate::gcra::{self, Params};
    use crate::{AcquireError, Quota};

    /// The GCRA decision of [`RateLimiter`](crate::RateLimiter) for `n`
    /// permits at `now` on `tat`: the new `tat` and the wait, or the error.
    pub fn decide(
        tat: u64,
        now: u64,
        n: u32,
        max_wait: u64,
        quota: Quota,
    ) -> Result<(u64, u64), AcquireError> {
        let p = Params::from(quota);
        gcra::reserve_within(tat, now, n, max_wait, p, p.burst, crate::clock::MAX_SPAN)
            .map(|grant| (grant.tat, grant.wait))
            .map_err(|refusal| crate::limiter::acquire_error(refusal, n, now, p.burst))
    }

    /// Makes a following cell's move skip its `LOCKED` step (the broken
    /// variant of the keyed quota-change model). Set before a model runs.
    pub static BROKEN_MOVE: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);

    /// The `tat` that [`RateLimiter::set_quota`](crate::RateLimiter::set_quota)
    /// installs when the quota changes from `old` to `new` at `now`.
    pub fn rescale(tat: u64, now: u64, old: Quota, new: Quota) -> u64 {
        gcra::rescale(tat, now, old.into(), new.into(), crate::clock::MAX_SPAN)
    }
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
