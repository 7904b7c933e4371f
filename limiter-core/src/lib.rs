//! Lock-free rate limiting: GCRA (the leaky bucket as a meter) whose whole
//! state is one `AtomicU64`, updated by CAS loops. No mutex on any
//! acquisition path, no allocation per call.
//!
//! # Map of the crate
//!
//! | module | one job |
//! |---|---|
//! | `quota` | [`Quota`]: `t` and `burst` in nanoseconds, validated once |
//! | `clock` | [`Clock`], [`DefaultClock`] (`TscClock`), [`MonotonicClock`], [`ManualClock`], `CoarseClock` |
//! | `gcra` | the decision as pure functions of `(tat, now, n, quota)` |
//! | `state` | one atomic word (64 or 128 bits) on its cache line and the shared CAS loop |
//! | `quota_slots` | the state word's layout and hot quota changes |
//! | `limiter` | [`RateLimiter`], tying the above together |
//! | `sliding_window` | [`SlidingWindow`]: the two-counter window estimate |
//! | `warm_up` | [`WarmUpLimiter`]: Guava's smooth warm-up |
//! | `priority` | [`PriorityLimiter`]: classes sharing one GCRA state |
//! | `limiter_trait` | [`Limiter`]: the interface every algorithm offers |
//! | `adaptive` | [`AdaptiveLimiter`]: the rate moved by latency or load ([`PercentileWindow`], [`EwmaAimd`], [`LoadBased`]) |
//! | `cell` | [`GcraCell`]: one subject's GCRA state in 8 bytes, quota passed in (keyed limiters) |
//! | `metered` | [`Metered`]: striped counters of allowed, rejected, delayed |
//! | `blocking` | `take*`: reserve, then sleep through the clock |
//! | `error` | [`QuotaError`], [`AcquireError`] |
//!
//! Time is nanoseconds since the clock's origin throughout. The GCRA names
//! are `t` (emission interval), `tau = t · (burst − 1)` (tolerance) and `tat`
//! (theoretical arrival time); `docs/design.md` derives the math and argues
//! the memory orderings.
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
//! * `std` (default): [`MonotonicClock`], [`CoarseClock`] (a cached
//!   millisecond clock), the blocking `take*` on real clocks,
//!   `std::error::Error` impls. Without it the crate is `no_std` (it needs
//!   `alloc` for [`ManualClock`]) and builds on targets without native 64-bit
//!   atomics through portable-atomic.
//! * `tsc` (default, implies `std`): `TscClock`, the CPU time-stamp counter
//!   read through `quanta`, and the [`DefaultClock`] when enabled.
//! * `metrics`: `Metered::publish`, reporting the counters through the
//!   `metrics` facade.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

mod adaptive;
mod blocking;
mod cell;
mod change_lock;
mod clock;
mod error;
mod gcra;
mod identity;
mod limiter;
mod limiter_trait;
mod metered;
mod priority;
mod quota;
mod quota_slots;
#[cfg(feature = "std")]
mod refunds;
mod reservation;
mod sliding_window;
mod state;
mod sync;
mod warm_up;

pub use adaptive::{
    AdaptiveBuilder, AdaptiveLimiter, AdaptivePolicy, Decision, EwmaAimd, LoadBased, Outcome,
    PercentileWindow, Proposal, Reason,
};
#[cfg(feature = "std")]
pub use cell::CellRefunds;
pub use cell::GcraCell;
#[cfg(feature = "tsc")]
pub use clock::TscClock;
pub use clock::{BlockingClock, Clock, DefaultClock, ManualClock};
#[cfg(feature = "std")]
pub use clock::{CoarseClock, MonotonicClock};
pub use error::{AcquireError, QuotaError};
pub use limiter::RateLimiter;
pub use limiter_trait::Limiter;
pub use metered::{Metered, Stats};
pub use priority::{PriorityClass, PriorityLimiter};
pub use quota::{MAX_SPAN, Quota};
pub use reservation::Reservation;
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
        gcra::reserve_within(tat, now, n, max_wait, p, p.burst, crate::MAX_SPAN)
            .map(|grant| (grant.tat, grant.wait))
            .map_err(|refusal| crate::limiter::acquire_error(refusal, n, now, p.burst))
    }

    /// The `tat` that [`RateLimiter::set_quota`](crate::RateLimiter::set_quota)
    /// installs when the quota changes from `old` to `new` at `now`.
    pub fn rescale(tat: u64, now: u64, old: Quota, new: Quota) -> u64 {
        gcra::rescale(tat, now, old.into(), new.into(), crate::MAX_SPAN)
    }
}
