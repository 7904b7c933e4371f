//! Waiting for rate-limit permits on tokio: the lock-free GCRA limiter of
//! `limiter-core`, read through tokio's clock, with `async` methods that
//! reserve a slot and then sleep until its absolute instant.
//!
//! # Map of the crate
//!
//! | module | one job |
//! |---|---|
//! | `clock` | [`TokioClock`]: the core's nanoseconds read from tokio's (pausable) clock |
//! | `wait` | the waiting model: reservation guard (cancel on drop) + `sleep_until` the slot |
//! | `limiter` | [`AsyncLimiter`]: `take`, `take_n`, `take_with_timeout`, `take_until`, `try_take`, `throttle` |
//! | `throttle` | [`Throttled`]: a stream whose items each wait for a permit |
//!
//! Time is nanoseconds since the [`TokioClock`]'s origin throughout, as in
//! the core; `t` (emission interval), `tau` (tolerance) and `tat`
//! (theoretical arrival time) are the GCRA names of `docs/design.md`.
//!
//! # Guarantees
//!
//! * **FIFO.** Waiters are served in the order they reserved (their first
//!   poll), whatever number of permits each asks for.
//! * **No drift.** Each waiter sleeps until its slot's absolute instant; the
//!   next slot is computed from `tat`, not from when the last waiter woke, so
//!   tokio's 1 ms timer granularity delays individual wake-ups but does not
//!   lower the rate when the burst covers it (see `docs/async.md`).
//! * **Deadlines decided up front.** A timed acquisition computes its slot
//!   first and fails at once, consuming nothing, when the slot is too late.
//! * **Cancel safety.** Dropping a waiting future gives its permits back
//!   when no later reservation depends on them.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use limiter_async::AsyncLimiter;
//! use limiter_core::{AcquireError, Quota};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limiter = AsyncLimiter::new(Quota::per_second(10)?);
//! limiter.take().await; // at once: the limiter starts full
//! assert_eq!(
//!     limiter.take_with_timeout(Duration::from_millis(50)).await,
//!     Err(AcquireError::RateLimited { wait: Duration::from_millis(100) })
//! );
//! limiter.take_with_timeout(Duration::from_millis(100)).await?; // sleeps 100 ms
//! # Ok(())
//! # }
//! ```

mod clock;
mod limiter;
mod throttle;
mod wait;

pub use clock::TokioClock;

/// The README's code, compiled and run as doc tests so it cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
pub use limiter::AsyncLimiter;
pub use throttle::Throttled;
