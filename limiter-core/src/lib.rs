//! Lock-free rate limiting: GCRA (the leaky bucket as a meter) whose whole
//! state is one `AtomicU64`, updated by CAS loops. No mutex on any
//! acquisition path, no allocation per call.
//!
//! # Map of the crate
//!
//! | module | one job |
//! |---|---|
//! | `quota` | [`Quota`]: `t` and `burst` in nanoseconds, validated once |
//! | `clock` | [`Clock`], [`MonotonicClock`], [`ManualClock`] |
//! | `gcra` | the decision as pure functions of `(tat, now, n, quota)` |
//! | `state` | one `AtomicU64` on its cache line and the shared CAS loop |
//! | `quota_slots` | the state word's layout and hot quota changes |
//! | `limiter` | [`RateLimiter`], tying the above together |
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
//! * `std` (default): [`MonotonicClock`], `std::error::Error` impls. Without
//!   it the crate is `no_std` (it needs `alloc` for [`ManualClock`]) and
//!   builds on targets without native 64-bit atomics through
//!   portable-atomic.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

mod blocking;
mod clock;
mod error;
mod gcra;
mod limiter;
mod quota;
mod quota_slots;
mod reservation;
mod state;
mod sync;

#[cfg(feature = "std")]
pub use clock::MonotonicClock;
pub use clock::{BlockingClock, Clock, ManualClock};
pub use error::{AcquireError, QuotaError};
pub use limiter::RateLimiter;
pub use quota::{MAX_SPAN, Quota};
pub use reservation::Reservation;
