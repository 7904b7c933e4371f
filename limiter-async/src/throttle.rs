//! [`Throttled`]: a stream whose items each wait for a permit.
//!
//! A poll-based version of [`crate::wait`]: pull an item from the source,
//! decide one permit for it, and hold the item until the slot's absolute
//! instant on a timer the stream reuses from item to item. The item and its
//! grant live in the stream itself, so dropping a `next()` future loses
//! nothing, and dropping the stream cancels the grant through its
//! [`TicketGuard`].
//!
//! Invariant: `waiting` is `Some` exactly while an item has been pulled from
//! the source and not yet yielded; its guard owns that item's grant.
//! Every item pulled from the source is yielded exactly once: as `Ok(item)`
//! after its permit, or as `Err(Refused { item, .. })` when the limiter
//! refuses it for a reason that waiting cannot cure. Every `Pending` is
//! returned with a waker registered (by the source or by the timer).

use core::fmt;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::error::Error;
use std::sync::Arc;

use futures::Stream;
use futures::stream::FusedStream;
use limiter_core::{AcquireError, Decide, Denial, RateLimiter};
use tokio::time::Instant;

use crate::clock::{TokioClock, saturating_add};
use crate::timer::SlotTimer;
use crate::wait::TicketGuard;
use crate::wake::{WakeUp, Waking};

/// An item pulled from the source and not yet yielded.
enum Held<T, L: Decide<Key = ()>> {
    /// Its permit is granted; yield it when the timer fires.
    Reserved(T, TicketGuard<L>),
    /// The limiter cannot hold a future slot: ask again when the timer fires.
    Retry(T),
}

/// An item that the limiter refused for a reason waiting cannot cure,
/// handed back with that reason.
///
/// Yielded by [`Throttled`] in place of the item when the limiter answers
/// neither a slot nor a wait: [`AcquireError::InsufficientCapacity`] (the
/// limiter cannot grant even one permit, e.g. a limit lowered to zero) or
/// [`AcquireError::TimeOutOfRange`] (the clock is past the limiter's span).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused<T> {
    /// The item, untouched: send it elsewhere, retry it, or drop it.
    pub item: T,
    /// Why no permit could be granted.
    pub error: AcquireError,
}

impl<T> Refused<T> {
    /// The item, discarding the reason.
    ///
    /// # Examples
    ///
    /// ```
    /// use futures::StreamExt;
    /// use limiter_async::AsyncLimiter;
    /// use limiter_core::Quota;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // A clock past the limiter's span: no permit can ever be granted.
    /// let clock = limiter_async::TokioClock::with_origin(tokio::time::Instant::now());
    /// let limiter = AsyncLimiter::with_clock(Quota::per_second(10)?, clock);
    /// tokio::time::advance(std::time::Duration::from_nanos(limiter_core::clock::MAX_SPAN + 1)).await;
    /// let mut throttled = limiter.throttle(futures::stream::iter(["job"]));
    /// let refused = throttled.next().await.unwrap().unwrap_err();
    /// assert_eq!(refused.into_item(), "job");
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_item(self) -> T {
        self.item
    }
}

impl<T> fmt::Display for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a throttled item was refused a permit")
    }
}

impl<T: fmt::Debug> Error for Refused<T> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.error)
    }
}

/// A stream that yields the items of `S`, each after a permit; made by
/// [`AsyncLimiter::throttle`](crate::AsyncLimiter::throttle).
///
/// # Errors
///
/// The stream never loses an item and never stops early on its own. Each
/// item is yielded as `Ok(item)` once its permit is due. If the limiter
/// refuses an item with anything but a wait
/// ([`AcquireError::InsufficientCapacity`] or
/// [`AcquireError::TimeOutOfRange`]: no permit will come by waiting), the
/// item is yielded at once as `Err(Refused { item, error })`, and the
/// stream goes on with the next item on the next poll; the consumer decides
/// whether to stop (`try_next`, `take_while`) or carry on. A limiter that
/// answers with a wait but cannot hold a future slot is asked again after
/// exactly that wait.
///
/// The source is pinned in a box once, so any stream may be throttled; no
/// allocation happens per item (the timer is allocated on the first wait and
/// then re-armed).
///
/// # Cancel safety
///
/// `next()` is cancel safe: a waiting item stays in the stream. Dropping the
/// stream drops a waiting item and gives its permit back if no later
/// reservation depends on it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use futures::TryStreamExt;
/// use limiter_async::AsyncLimiter;
/// use limiter_core::Quota;
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = AsyncLimiter::new(Quota::per_second(10)?);
/// let start = Instant::now();
/// let items: Vec<_> = limiter
///     .throttle(futures::stream::iter(1..=3))
///     .try_collect()
///     .await?;
/// assert_eq!(items, [1, 2, 3]);
/// assert_eq!(start.elapsed(), Duration::from_millis(200)); // at 0, 100, 200 ms
/// # Ok(())
/// # }
/// ```
#[must_use = "streams do nothing unless polled"]
pub struct Throttled<S: Stream, L: Decide<Key = ()> = RateLimiter<TokioClock>> {
    limiter: Arc<L>,
    wake: WakeUp,
    source: Pin<Box<S>>,
    waiting: Option<Held<S::Item, L>>,
    timer: SlotTimer,
}

impl<S: Stream, L: Decide<Key = ()>> Throttled<S, L> {
    pub(crate) fn new(limiter: Arc<L>, wake: WakeUp, source: S) -> Throttled<S, L> {
        Throttled {
            limiter,
            wake,
            source: Box::pin(source),
            waiting: None,
            timer: SlotTimer::default(),
        }
    }

    /// The source stream.
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
    /// let throttled = limiter.throttle(futures::stream::iter([1, 2]));
    /// assert_eq!(futures::Stream::size_hint(throttled.get_ref()), (2, Some(2)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.source
    }
}

// The source is boxed and the held item is never pinned (it is only moved
// out when yielded), so the stream may move freely whatever `S` and its items
// are.
impl<S: Stream, L: Decide<Key = ()>> Unpin for Throttled<S, L> {}

impl<S: Stream, L: Decide<Key = ()>> Stream for Throttled<S, L> {
    type Item = Result<S::Item, Refused<S::Item>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let item = match this.waiting.take() {
                Some(held) => {
                    if this.timer.poll_elapsed(cx).is_pending() {
                        this.waiting = Some(held);
                        return Poll::Pending;
                    }
                    match held {
                        Held::Reserved(item, guard) => {
                            guard.keep();
                            return Poll::Ready(Some(Ok(item)));
                        }
                        Held::Retry(item) => item,
                    }
                }
                None => match futures::ready!(this.source.as_mut().poll_next(cx)) {
                    Some(item) => item,
                    None => return Poll::Ready(None),
                },
            };
            match this.limiter.decide(&(), 1, Duration::MAX) {
                Ok(grant) if grant.wait.is_zero() => {
                    return Poll::Ready(Some(Ok(item)));
                }
                Ok(grant) => {
                    let waking = Waking {
                        mode: this.wake,
                        window: grant.policy.window(),
                    };
                    let deadline = saturating_add(Instant::now(), grant.wait);
                    this.timer.arm(waking, deadline, grant.wait);
                    let guard = TicketGuard::new(Arc::clone(&this.limiter), grant.ticket);
                    this.waiting = Some(Held::Reserved(item, guard));
                }
                // A limiter that cannot hold a future slot: ask again after
                // the exact wait (at least 1 ns, so a zero could never spin).
                Err(Denial::RateLimited { retry_after, .. }) => {
                    let wait = retry_after.max(Duration::from_nanos(1));
                    let waking = Waking {
                        mode: this.wake,
                        window: Duration::ZERO,
                    };
                    this.timer.arm(waking, Instant::now() + wait, wait);
                    this.waiting = Some(Held::Retry(item));
                }
                // OverBurst (a limit lowered below one permit) or a decider
                // that cannot decide (a clock past the span): waiting cannot
                // help, so the item goes back to the consumer with the reason.
                Err(denial) => {
                    let error = AcquireError::from(denial);
                    return Poll::Ready(Some(Err(Refused { item, error })));
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let held = usize::from(self.waiting.is_some());
        let (low, high) = self.source.size_hint();
        (
            low.saturating_add(held),
            high.and_then(|h| h.checked_add(held)),
        )
    }
}

impl<S: FusedStream, L: Decide<Key = ()>> FusedStream for Throttled<S, L> {
    fn is_terminated(&self) -> bool {
        self.waiting.is_none() && self.source.is_terminated()
    }
}

impl<S: Stream, L: Decide<Key = ()>> fmt::Debug for Throttled<S, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttled")
            .field("waiting", &self.waiting.is_some())
            .finish_non_exhaustive()
    }
}
