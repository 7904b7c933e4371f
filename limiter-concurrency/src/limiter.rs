//! [`ConcurrencyLimiter`]: the public type. A cheap-to-clone handle; every
//! clone shares one state word, one wait queue and one estimator.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

#[cfg(all(feature = "time", not(loom)))]
use tokio::time::Instant;

use crate::error::{AcquireError, ConfigError, NoPermit, check_limit};
use crate::estimator::Estimator;
use crate::permit::{OwnedPermit, Permit};
use crate::queue::QueueOrder;
use crate::shared::{Enqueued, Inner, Shared};
use crate::word;

/// A concurrency limiter: at most `limit` permits held at once.
///
/// The limit and the in-flight count live in one atomic word; taking a
/// permit is one CAS that checks `in_flight < limit`, so no interleaving
/// admits more than the limit (no check-then-act gap). Clones share
/// everything: clone it into every route, task and service.
///
/// # Waiting
///
/// [`acquire`](Self::acquire) waits in a bounded queue (FIFO or LIFO, see
/// [`Builder::queue`]); a full queue fails at once. A released permit goes
/// straight to the next waiter; a raised limit wakes exactly the waiters it
/// admits; a lowered one revokes nothing.
///
/// # Memory ordering
///
/// Taking a permit (an Acquire CAS) happens-after the release (a Release
/// CAS, or the queue lock for a hand-off) of the permit it reuses, as with a
/// semaphore.
///
/// # Examples
///
/// ```
/// use limiter_concurrency::ConcurrencyLimiter;
///
/// let limiter = ConcurrencyLimiter::new(2)?;
/// let a = limiter.try_acquire()?;
/// let _b = limiter.try_acquire()?;
/// assert!(limiter.try_acquire().is_err());
/// drop(a);
/// assert_eq!(limiter.in_flight(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ConcurrencyLimiter {
    inner: Arc<Inner>,
}

/// Configures a [`ConcurrencyLimiter`].
#[derive(Debug)]
pub struct Builder {
    limit: u32,
    capacity: usize,
    order: QueueOrder,
    estimator: Option<Box<dyn Estimator>>,
}

impl Builder {
    /// A wait queue holding up to `capacity` waiters, served in `order`.
    /// The default is no queue (`capacity` 0): `acquire` fails at once when
    /// no permit is free.
    pub fn queue(mut self, capacity: usize, order: QueueOrder) -> Builder {
        self.capacity = capacity;
        self.order = order;
        self
    }

    /// Builds the limiter.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`] or [`ConfigError::LimitTooLarge`] for a
    /// fixed limit outside `1..=MAX_LIMIT`.
    pub fn build(self) -> Result<ConcurrencyLimiter, ConfigError> {
        let limit = check_limit("limit", self.limit)?;
        Ok(ConcurrencyLimiter {
            inner: Arc::new(Inner {
                shared: Shared::new(limit, self.capacity, self.order),
                estimator: self.estimator.map(std::sync::Mutex::new),
            }),
        })
    }
}

impl ConcurrencyLimiter {
    /// A fixed limit of `limit` permits, no wait queue.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`] or [`ConfigError::LimitTooLarge`].
    pub fn new(limit: u32) -> Result<ConcurrencyLimiter, ConfigError> {
        ConcurrencyLimiter::builder(limit).build()
    }

    /// Configures a fixed limit of `limit` permits.
    pub fn builder(limit: u32) -> Builder {
        Builder {
            limit,
            capacity: 0,
            order: QueueOrder::Fifo,
            estimator: None,
        }
    }

    /// Configures a limit that `estimator` moves, starting at its limit.
    ///
    /// ```
    /// use limiter_concurrency::{Bounds, ConcurrencyLimiter, Gradient2, QueueOrder};
    ///
    /// let estimator = Gradient2::new(Bounds::new(20, 4, 200)?);
    /// let limiter = ConcurrencyLimiter::adaptive(estimator)
    ///     .queue(64, QueueOrder::Lifo)
    ///     .build()?;
    /// assert_eq!(limiter.limit(), 20);
    /// # Ok::<(), limiter_concurrency::ConfigError>(())
    /// ```
    pub fn adaptive(estimator: impl Estimator + 'static) -> Builder {
        Builder {
            limit: estimator.limit(),
            capacity: 0,
            order: QueueOrder::Fifo,
            estimator: Some(Box::new(estimator)),
        }
    }

    /// A permit now, or the counts that refused it. One CAS.
    ///
    /// # Errors
    ///
    /// [`NoPermit`] when `in_flight >= limit`, or when waiters are queued
    /// (they go first).
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, NoPermit> {
        match self.inner.shared.try_admit() {
            Some(in_flight) => Ok(Permit {
                inner: &self.inner,
                in_flight,
            }),
            None => Err(self.no_permit()),
        }
    }

    /// [`try_acquire`](Self::try_acquire), as an [`OwnedPermit`].
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    #[inline]
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, NoPermit> {
        match self.inner.shared.try_admit() {
            Some(in_flight) => Ok(self.owned(in_flight)),
            None => Err(self.no_permit()),
        }
    }

    /// Waits for a permit in the queue.
    ///
    /// # Errors
    ///
    /// [`AcquireError::QueueFull`] at once when no permit is free and the
    /// queue is full.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future loses nothing: a waiting ticket is removed, and a
    /// permit already handed to it goes to the next waiter or the count.
    pub fn acquire(&self) -> Acquire<'_> {
        Acquire {
            inner: &self.inner,
            state: State::Start,
        }
    }

    #[cfg(all(feature = "time", not(loom)))]
    /// Waits for a permit until `deadline` (a tokio instant, so paused time
    /// applies).
    ///
    /// # Errors
    ///
    /// [`AcquireError::Timeout`] at once when no permit is free and
    /// `deadline` has passed, or when it passes while waiting;
    /// [`AcquireError::QueueFull`] at once when the queue is full.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_until(&self, deadline: Instant) -> Result<Permit<'_>, AcquireError> {
        if let Some(in_flight) = self.inner.shared.try_admit() {
            return Ok(Permit {
                inner: &self.inner,
                in_flight,
            });
        }
        if deadline <= Instant::now() {
            return Err(AcquireError::Timeout);
        }
        match tokio::time::timeout_at(deadline, self.acquire()).await {
            Ok(result) => result,
            Err(_) => Err(AcquireError::Timeout),
        }
    }

    #[cfg(all(feature = "time", not(loom)))]
    /// [`acquire_until`](Self::acquire_until) `Instant::now() + timeout`; a
    /// timeout no instant can hold (`Duration::MAX`) is none:
    /// [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire_until`](Self::acquire_until).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Permit<'_>, AcquireError> {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.acquire_until(deadline).await,
            None => self.acquire().await,
        }
    }

    #[cfg(all(feature = "time", not(loom)))]
    /// [`acquire_until`](Self::acquire_until), as an [`OwnedPermit`].
    ///
    /// # Errors
    ///
    /// As [`acquire_until`](Self::acquire_until).
    pub async fn acquire_owned_until(
        &self,
        deadline: Instant,
    ) -> Result<OwnedPermit, AcquireError> {
        let permit = self.acquire_until(deadline).await?;
        let in_flight = permit.in_flight;
        permit.forget();
        Ok(self.owned(in_flight))
    }

    /// [`acquire`](Self::acquire), as an [`OwnedPermit`].
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_owned(&self) -> Result<OwnedPermit, AcquireError> {
        let permit = self.acquire().await?;
        let in_flight = permit.in_flight;
        permit.forget();
        Ok(self.owned(in_flight))
    }

    /// Sets the limit; returns the previous one. Lowering it revokes no
    /// permit (holders finish; new ones wait until `in_flight < limit`);
    /// raising it hands the freed permits to exactly as many waiters. With
    /// an estimator, its next sample sets the limit again.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`] or [`ConfigError::LimitTooLarge`].
    pub fn set_limit(&self, limit: u32) -> Result<u32, ConfigError> {
        let limit = check_limit("limit", limit)?;
        Ok(self.inner.shared.set_limit(limit))
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        word::limit(self.inner.shared.load())
    }

    /// Permits held now.
    pub fn in_flight(&self) -> u32 {
        word::in_flight(self.inner.shared.load())
    }

    /// Waiters in the queue now.
    pub fn waiting(&self) -> usize {
        self.inner.shared.queue_len()
    }

    /// The wait queue's capacity.
    pub fn queue_capacity(&self) -> usize {
        self.inner.shared.queue_capacity()
    }

    /// The wait queue's order.
    pub fn queue_order(&self) -> QueueOrder {
        self.inner.shared.queue_order()
    }

    /// A new wait-queue capacity and order, keeping every waiter: a smaller
    /// capacity refuses newcomers until the queue is below it, and the
    /// order applies from the next hand-off.
    pub fn set_queue(&self, capacity: usize, order: QueueOrder) {
        self.inner.shared.set_queue(capacity, order);
    }

    /// Replaces the estimator of an adaptive limiter (new bounds or
    /// parameters, or another estimator), keeping the permits held, the
    /// waiters and the limit: the new estimator starts from the limit in
    /// force, clamped into its bounds (through
    /// [`Estimator::override_limit`]), which is installed at once. What the
    /// old one had learned of the RTTs is not carried over.
    ///
    /// Returns `false`, changing nothing, for a fixed limiter (one built
    /// without an estimator).
    #[must_use = "a fixed limiter takes no estimator"]
    pub fn replace_estimator(&self, estimator: impl Estimator + 'static) -> bool {
        let Some(slot) = &self.inner.estimator else {
            return false;
        };
        let mut estimator: Box<dyn Estimator> = Box::new(estimator);
        let mut e = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        estimator.override_limit(self.limit());
        let limit = estimator.limit();
        *e = estimator;
        // Under the estimator's lock, so samples wait for the new one. (A
        // sample the old estimator took just before may still install its
        // limit after this; the new estimator's next window sets it again.)
        if limit != self.limit() {
            self.inner.shared.set_limit(limit);
        }
        true
    }

    /// Whether an estimator moves the limit.
    pub fn is_adaptive(&self) -> bool {
        self.inner.estimator.is_some()
    }

    /// The estimator's no-load RTT, if it keeps one.
    pub fn min_rtt(&self) -> Option<Duration> {
        let e = self.inner.estimator.as_ref()?;
        e.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .min_rtt()
    }

    /// Whether `self` and `other` are handles of the same limiter.
    pub fn same_limiter(&self, other: &ConcurrencyLimiter) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn no_permit(&self) -> NoPermit {
        let w = self.inner.shared.load();
        NoPermit {
            limit: word::limit(w),
            in_flight: word::in_flight(w),
        }
    }

    fn owned(&self, in_flight: u32) -> OwnedPermit {
        OwnedPermit {
            inner: Arc::clone(&self.inner),
            in_flight,
            armed: true,
        }
    }

    #[cfg(loom)]
    #[doc(hidden)]
    pub fn __loom_broken(limit: u32, capacity: usize, broken: crate::loom_hooks::Broken) -> Self {
        let mut shared = Shared::new(limit, capacity, QueueOrder::Fifo);
        shared.broken = broken;
        ConcurrencyLimiter {
            inner: Arc::new(Inner {
                shared,
                estimator: None,
            }),
        }
    }
}

#[derive(Debug)]
enum State {
    Start,
    Waiting(u64),
    Done,
}

/// The future of [`ConcurrencyLimiter::acquire`].
///
/// # Cancel safety
///
/// Dropping it loses nothing (see [`ConcurrencyLimiter::acquire`]).
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    inner: &'a Inner,
    state: State,
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Permit<'a>, AcquireError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.inner;
        let granted = match self.state {
            State::Start => match inner.shared.try_admit() {
                Some(in_flight) => in_flight,
                None => match inner.shared.enqueue(cx.waker()) {
                    Enqueued::Granted(in_flight) => in_flight,
                    Enqueued::Waiting(ticket) => {
                        self.state = State::Waiting(ticket);
                        return Poll::Pending;
                    }
                    Enqueued::Full => {
                        self.state = State::Done;
                        let capacity = inner.shared.queue_capacity();
                        return Poll::Ready(Err(AcquireError::QueueFull { capacity }));
                    }
                },
            },
            State::Waiting(ticket) => match inner.shared.poll_ticket(ticket, cx.waker()) {
                Some(in_flight) => in_flight,
                None => return Poll::Pending,
            },
            State::Done => panic!("`Acquire` polled after it completed"),
        };
        self.state = State::Done;
        Poll::Ready(Ok(Permit {
            inner,
            in_flight: granted,
        }))
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        if let State::Waiting(ticket) = self.state {
            self.inner.shared.cancel(ticket);
        }
    }
}
