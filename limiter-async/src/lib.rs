//! Waiting for rate-limit permits on tokio: `limiter.take().await`.
//!
//! # Which type do I use
//!
//! | you want | use |
//! |---|---|
//! | one limit for the whole process, waited for in `async` code | [`AsyncLimiter::new`] (GCRA on a [`TokioClock`]) |
//! | a sliding window, warm-up, priority class or metered limiter (any `Decide` with `Key = ()`), waited for | [`AsyncLimiter::from_limiter`] on that limiter, built on a [`TokioClock`] |
//! | a stream whose items go out at the limited rate | [`AsyncLimiter::throttle`] ([`Throttled`]) |
//! | one limit per client key | `limiter_keyed::KeyedLimiter` (its `take(&key)` waits the same way) |
//! | one limit shared by many processes | `limiter_redis::RedisLimiter` |
//!
//! and, on any of them:
//!
//! | you want to | call |
//! |---|---|
//! | take a permit now or learn the wait | [`try_acquire`](AsyncLimiter::try_acquire) / [`try_acquire_n`](AsyncLimiter::try_acquire_n) |
//! | wait as long as it takes | [`take`](AsyncLimiter::take) / [`take_n`](AsyncLimiter::take_n) |
//! | wait only if the permit comes in time | [`take_timeout`](AsyncLimiter::take_timeout) / [`take_n_timeout`](AsyncLimiter::take_n_timeout) |
//! | wait only until a deadline you already have | [`take_until`](AsyncLimiter::take_until) / [`take_n_until`](AsyncLimiter::take_n_until) |
//!
//! # Guarantees
//!
//! * **FIFO.** Waiters are served in the order they reserved (their first
//!   poll), whatever number of permits each asks for. The one exception
//!   delays nobody: a slot given up by a cancelled waiter goes to the next
//!   waiter to arrive, which may then go before waiters holding later
//!   slots; theirs do not move.
//! * **No drift.** Each waiter sleeps until its slot's instant; the next
//!   slot is computed from `tat`, not from when the last waiter woke, so a
//!   late wake-up costs rate only when it is later than the quota's
//!   catch-up window (`burst · t`). Short waits are woken by a precise
//!   timer thread within tens of microseconds ([`WakeUp::Precise`], the
//!   default) rather than on tokio's next 1 ms tick, so even burst 1 keeps
//!   its rate up to about 10,000/s for one task (see `docs/async.md`).
//! * **Exact under paused time.** With the `test-util` feature (enable it
//!   in `[dev-dependencies]`, as tokio's), every [`TokioClock`] reads
//!   tokio's clock, whenever it was made, and every wait in paused time
//!   sleeps on tokio's timer: tests run in exact virtual time. Without it a
//!   `TokioClock` reads the CPU counter, so a free permit costs what the
//!   sync path costs.
//! * **Deadlines decided up front.** A timed acquisition computes its slot
//!   first and fails at once, consuming nothing, when the slot is too late.
//! * **Cancel safety.** Dropping a waiting future gives its permits back to
//!   the limiter, whether or not others reserved after it (the slot goes to
//!   the next waiter that would wait longer), and the limiter never admits
//!   more than its quota.
//!
//! Time is nanoseconds since the limiter's epoch, as in the core; `t`
//! (emission interval), `tau` (tolerance) and `tat` (theoretical arrival
//! time) are the GCRA names of `docs/design.md`. The modules: `clock`
//! ([`TokioClock`]), `real_time` (is tokio's clock real time; the fast
//! counter), `wait` (decide, then sleep until the slot; the guard that
//! cancels on drop), `wake` ([`WakeUp`]: which timer), `precise` (the timer
//! thread) and `alarm` (how it sleeps: a timerfd on Linux), `limiter`
//! ([`AsyncLimiter`]), `throttle` ([`Throttled`]).
//!
//! # Features
//!
//! * `test-util`: every [`TokioClock`] reads tokio's clock at each call and
//!   follows tokio's paused time (`start_paused`, `pause`, `advance`,
//!   `resume`) whenever time is paused. For tests; enables tokio's
//!   `test-util`. Without it a clock reads the CPU counter (a third of an
//!   `Instant` read), or tokio's clock if it was made while time was paused.
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
//! limiter.take().await?; // at once: the limiter starts full
//! assert_eq!(
//!     limiter.take_timeout(Duration::from_millis(50)).await,
//!     Err(AcquireError::RateLimited { wait: Duration::from_millis(100) })
//! );
//! limiter.take_timeout(Duration::from_millis(100)).await?; // sleeps 100 ms
//! # Ok(())
//! # }
//! ```

mod alarm;
mod clock;
mod decide;
mod limiter;
mod precise;
mod real_time;
mod slot_wait;
mod throttle;
mod timer;
mod wait;
mod wake;

pub use clock::{MAX_PERIOD, TokioClock, deadline_after, interval};
pub use decide::AsyncDecide;
pub use slot_wait::{CancelGrant, Refund, SlotWait};
pub use wake::{PRECISE_RANGE, WakeUp};

/// The workspace README's code, compiled and run as doc tests so it cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct WorkspaceReadmeDoctests;
pub use limiter::AsyncLimiter;
pub use throttle::{Refused, Throttled};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
