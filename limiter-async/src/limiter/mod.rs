//! [`AsyncLimiter`]: the core limiter on a [`TokioClock`], with `async`
//! methods that wait for permits.
//!
//! Every waiting method is "reserve, then sleep until the slot" (see
//! [`crate::wait`]): the place in line is taken, as one CAS, on the future's
//! first poll, and the future then sleeps until the slot's absolute instant.
//! Deadlines are checked against the slot before anything is consumed.
//! Units are those of the core: nanoseconds since the clock's origin, shown
//! to callers as [`Duration`](core::time::Duration)s and tokio
//! [`Instant`](tokio::time::Instant)s.
//!
//! Files: this one (the type, its construction and the calls that do not
//! wait), `take` (the waiting methods).

use std::sync::Arc;

use futures::Stream;
use limiter_core::{AcquireError, Decide, Quota, RateLimiter};

use crate::clock::TokioClock;
use crate::throttle::Throttled;
use crate::wake::WakeUp;

mod take;

/// A rate limiter whose callers wait asynchronously for their permits, woken
/// at their slot by the precise timer thread (short waits) or tokio's timer
/// (see [`WakeUp`]). Clones share one limiter.
///
/// By default it waits on the core GCRA [`RateLimiter`]; [`from_limiter`]
/// wraps any [`Decide`] with `Key = ()` instead (a sliding window, a warm-up limiter, a
/// priority class, a metered limiter...). Build such a limiter on a
/// [`TokioClock`] so that tokio's paused time drives it. Algorithms that
/// cannot hold a future slot are waited for by sleeping each exact computed
/// wait and asking again (see `docs/async.md`): no busy loop, but not FIFO.
///
/// [`from_limiter`]: AsyncLimiter::from_limiter
///
/// Waiters are served in the order they reserved (first poll), whatever
/// number of permits each asks for (a slot given up by a cancelled waiter
/// goes to the next arrival, which delays nobody), and each sleeps until its
/// own slot's instant, so pacing does not drift with a late wake-up. See
/// `docs/async.md` for the model, the lateness rule and choosing the burst.
///
/// # Cancel safety
///
/// Every waiting method is cancel safe: dropping its future (in `select!`,
/// under `tokio::time::timeout`, by aborting the task) gives its permits
/// back to the limiter, whether or not others reserved after it: the state
/// is restored when no later reservation depends on the permits, and
/// otherwise the slot is handed to the next waiter that would wait longer
/// (see [`RateLimiter::cancel`]). Either way the limiter never admits more
/// than its quota. The place in line is lost.
///
/// # Panics
///
/// A future that has to wait may use tokio's timer (always for waits of
/// [`PRECISE_RANGE`](crate::PRECISE_RANGE) or more, and under paused time),
/// so it panics if polled outside a runtime with time enabled
/// (`enable_time`/`enable_all`), as any `tokio::time::sleep` does. A permit
/// available now needs no timer.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_async::AsyncLimiter;
/// use limiter_core::Quota;
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = AsyncLimiter::new(Quota::per_second(100)?.with_burst(5)?);
/// let start = Instant::now();
/// for _ in 0..25 {
///     limiter.take().await?;
/// }
/// // 5 at once, then one every 10 ms.
/// assert_eq!(start.elapsed(), Duration::from_millis(200));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AsyncLimiter<L = RateLimiter<TokioClock>> {
    core: Arc<L>,
    wake: WakeUp,
}

impl<L> Clone for AsyncLimiter<L> {
    fn clone(&self) -> AsyncLimiter<L> {
        AsyncLimiter {
            core: Arc::clone(&self.core),
            wake: self.wake,
        }
    }
}

impl AsyncLimiter {
    /// A full limiter for `quota` on a new [`TokioClock`] whose origin is
    /// tokio's "now".
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?.with_burst(2)?);
    /// assert_eq!(limiter.limiter().available(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(quota: Quota) -> AsyncLimiter {
        AsyncLimiter::with_clock(quota, TokioClock::new())
    }

    /// A full limiter for `quota` reading `clock`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::{AsyncLimiter, TokioClock};
    /// use limiter_core::{Clock, Quota};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let clock = TokioClock::new();
    /// let limiter = AsyncLimiter::with_clock(Quota::per_second(10)?, clock);
    /// assert_eq!(limiter.limiter().clock().now(), clock.now());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_clock(quota: Quota, clock: TokioClock) -> AsyncLimiter {
        AsyncLimiter::from_limiter(RateLimiter::with_clock(quota, clock))
    }
}

impl<L> AsyncLimiter<L>
where
    L: Decide<Key = ()>,
    L::Ticket: Send,
{
    /// Waits on `limiter`, any [`Decide`] with `Key = ()`. A grant's wait is
    /// slept on tokio's clock, so build it on a [`TokioClock`] (then paused
    /// time drives both).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::{AsyncLimiter, TokioClock};
    /// use limiter_core::SlidingWindow;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let window = SlidingWindow::with_clock(2, Duration::from_secs(1), TokioClock::new())?;
    /// let limiter = AsyncLimiter::from_limiter(window);
    /// let start = Instant::now();
    /// for _ in 0..3 {
    ///     limiter.take().await?;
    /// }
    /// // Two in window 0; the third when window 1's estimate lets it through:
    /// // 2·(1 s − x) + 1·1 s ≤ 2·1 s ⇔ x ≥ 0.5 s.
    /// assert_eq!(start.elapsed(), Duration::from_millis(1_500));
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_limiter(limiter: L) -> AsyncLimiter<L> {
        AsyncLimiter {
            core: Arc::new(limiter),
            wake: WakeUp::default(),
        }
    }

    /// This limiter (sharing its state with every clone) waking its waiters
    /// with `wake`: [`WakeUp::Precise`] (the default) or [`WakeUp::Timer`].
    /// Under paused time both wake on tokio's timer, exactly.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::{AsyncLimiter, WakeUp};
    /// use limiter_core::Quota;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
    /// let on_tokio = limiter.clone().with_wake_up(WakeUp::Timer);
    /// on_tokio.take().await?;
    /// assert_eq!(limiter.limiter().available(), 0); // one shared state
    /// assert_eq!(limiter.wake_up(), WakeUp::Precise);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_wake_up(self, wake: WakeUp) -> AsyncLimiter<L> {
        AsyncLimiter { wake, ..self }
    }

    /// How this limiter wakes its waiters (see [`WakeUp`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::{AsyncLimiter, WakeUp};
    /// use limiter_core::Quota;
    ///
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
    /// assert_eq!(limiter.wake_up(), WakeUp::Precise);
    /// # Ok::<(), limiter_core::QuotaError>(())
    /// ```
    pub fn wake_up(&self) -> WakeUp {
        self.wake
    }

    /// The shared limiter, for its own methods
    /// ([`try_acquire_n`](RateLimiter::try_acquire_n),
    /// [`available`](RateLimiter::available),
    /// [`set_quota`](RateLimiter::set_quota) and the rest for the default
    /// GCRA limiter).
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
    /// limiter.limiter().set_quota(Quota::per_second(100)?); // hot, for every clone
    /// assert_eq!(limiter.clone().limiter().quota(), Quota::per_second(100)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn limiter(&self) -> &L {
        &self.core
    }

    /// Takes one permit if it is available now; takes nothing otherwise.
    ///
    /// # Errors
    ///
    /// [`AcquireError::RateLimited`] with the exact wait until a permit would
    /// be available; [`AcquireError::TimeOutOfRange`] as for
    /// [`take`](AsyncLimiter::take).
    ///
    /// # Cancel safety
    ///
    /// Not a future: it decides in one call and there is nothing to cancel.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
    /// limiter.try_acquire()?;
    /// let denied = limiter.try_acquire().unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.core.acquire_now(&(), 1)
    }

    /// Takes `n` permits if all are available now; takes none otherwise.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](AsyncLimiter::try_acquire), plus
    /// [`AcquireError::InsufficientCapacity`] if `n > burst`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?.with_burst(3)?);
    /// limiter.try_acquire_n(2)?;
    /// assert!(limiter.try_acquire_n(2).is_err()); // all or nothing
    /// limiter.try_acquire_n(1)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.core.acquire_now(&(), n)
    }

    /// A stream yielding `stream`'s items, each as `Ok(item)` once a permit
    /// for it has been waited for (FIFO with every other user of this
    /// limiter), or as `Err(`[`Refused`](crate::Refused)`)` with the item
    /// and the reason when no wait can ever grant it (more permits than the
    /// burst, a clock past the span). No item is ever dropped.
    ///
    /// The next item is pulled from `stream` before its permit is reserved,
    /// so an idle source holds no permits.
    ///
    /// # Cancel safety
    ///
    /// Dropping the [`Throttled`] stream while an item waits drops the item
    /// and gives its permit back to the limiter (as a dropped
    /// [`take`](AsyncLimiter::take) does). `next()` on it is cancel safe: a
    /// dropped `next()` loses nothing, since the waiting item and its
    /// reservation live in the stream.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
    /// let start = Instant::now();
    /// let items: Vec<_> = limiter.throttle(futures::stream::iter(1..=3)).collect().await;
    /// assert_eq!(items.into_iter().map(Result::unwrap).collect::<Vec<_>>(), [1, 2, 3]);
    /// assert_eq!(start.elapsed(), Duration::from_millis(200));
    /// # Ok(())
    /// # }
    /// ```
    pub fn throttle<S: Stream>(&self, stream: S) -> Throttled<S, L> {
        Throttled::new(Arc::clone(&self.core), self.wake, stream)
    }
}
