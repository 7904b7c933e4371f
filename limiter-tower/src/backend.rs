//! [`Backend`]: "decide `cost` permits for this key, allowing up to
//! `max_wait`", the one question the layer asks of a limiter.
//!
//! A decision is either a [`Grant`] (the permits are claimed, possibly for a
//! slot `wait` from now, and can be given back with [`Backend::cancel`]) or a
//! [`Denial`] that consumed nothing. The grant carries the remaining permits
//! and the time until more, computed from the state the decision itself
//! wrote ([`Headroom`]), so the `RateLimit` header describes that decision
//! rather than a second look that a concurrent request could already have
//! moved.
//!
//! Implemented for a global [`RateLimiter`] (key `()`), for
//! [`KeyedLimiter<K>`] (key `K`), and for `Arc` of either. Times are
//! [`Duration`]s relative to the decision, so a backend's clock never leaks
//! into the layer: the layer sleeps `wait` on tokio's clock.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use limiter_core::{AcquireError, Clock, Headroom, Quota, RateLimiter, Reservation};
use limiter_keyed::{KeyedError, KeyedLimiter};

/// The error a backend reports when it cannot decide (a store that is down,
/// a key table that is full). Boxed so each backend keeps its own error type.
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A limiter the layer can ask for permits.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{ManualClock, Quota, RateLimiter};
/// use limiter_tower::{Backend, Denial};
///
/// let limiter = RateLimiter::with_clock(Quota::per_second(2)?, ManualClock::new());
/// let grant = limiter.decide_now(&(), 1, Duration::ZERO).unwrap()?;
/// assert_eq!((grant.wait, grant.remaining), (Duration::ZERO, 0));
/// // Waiting up to a second: the next slot, 500 ms away, is claimed.
/// let held = limiter.decide_now(&(), 1, Duration::from_secs(1)).unwrap()?;
/// assert_eq!(held.wait, Duration::from_millis(500));
/// assert!(Backend::cancel(&limiter, &(), held.ticket)); // and given back
/// let denied = limiter.decide_now(&(), 1, Duration::ZERO).unwrap().unwrap_err();
/// assert!(matches!(denied, Denial::RateLimited { retry_after } if retry_after == Duration::from_millis(500)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Cancel safety
///
/// The layer drops the future returned by [`decide`](Backend::decide) only
/// before it resolves (the client went away); a backend whose decision has
/// side effects after an `await` must tolerate that. In-memory backends
/// decide synchronously.
pub trait Backend: Send + Sync + 'static {
    /// What requests are counted by: `()` for one global limit.
    type Key: Send + Sync + 'static;
    /// What a grant hands back to [`cancel`](Backend::cancel).
    type Ticket: Send + 'static;

    /// Claims `cost` permits for `key` if they conform within `max_wait`
    /// (zero: only now).
    ///
    /// # Errors
    ///
    /// A [`Denial`]; every variant consumed nothing.
    fn decide(
        &self,
        key: &Self::Key,
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<Self::Ticket>, Denial>> + Send;

    /// The decision, when the backend can make it without waiting (the
    /// in-memory ones always can): the layer then answers, or calls the
    /// inner service, without an asynchronous step. `None` (the default)
    /// sends the layer to [`decide`](Backend::decide).
    fn decide_now(
        &self,
        key: &Self::Key,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<Self::Ticket>, Denial>> {
        let _ = (key, cost, max_wait);
        None
    }

    /// Gives back the permits of a grant that will not be used (a delayed
    /// client disconnected); returns whether they are back.
    fn cancel(&self, key: &Self::Key, ticket: Self::Ticket) -> bool;

    /// The policy `key` is decided under, for `RateLimit-Policy`.
    fn policy(&self, key: &Self::Key) -> Policy;
}

/// Permits claimed for a request.
#[derive(Debug)]
pub struct Grant<T> {
    /// Gives the permits back through [`Backend::cancel`].
    pub ticket: T,
    /// How long after the decision the permits may be used (zero: now).
    pub wait: Duration,
    /// Permits left for the key right after this grant (0 when the grant
    /// had to wait: the slots before it are taken).
    pub remaining: u32,
    /// Time from the decision until the key has more permits than
    /// `remaining` (zero when it is full).
    pub reset: Duration,
}

/// Why a request was not granted. Nothing was consumed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Denial {
    /// The request does not conform within the allowed wait; it would after
    /// `retry_after`.
    RateLimited {
        /// The exact time until the same request would conform.
        retry_after: Duration,
    },
    /// The cost exceeds the burst: the request can never conform, however
    /// long it waits.
    OverBurst {
        /// The permits the request costs.
        cost: u32,
        /// The most the key can grant at once.
        burst: u32,
    },
    /// The backend could not decide.
    Unavailable(BackendError),
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Denial::RateLimited { retry_after } => {
                write!(f, "rate limited; retry after {retry_after:?}")
            }
            Denial::OverBurst { cost, burst } => write!(
                f,
                "the request costs {cost} permits but at most {burst} are granted at once; lower the cost or raise the burst"
            ),
            Denial::Unavailable(e) => write!(f, "the rate limiter could not decide: {e}"),
        }
    }
}

impl std::error::Error for Denial {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Denial::Unavailable(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<AcquireError> for Denial {
    fn from(e: AcquireError) -> Denial {
        match e {
            AcquireError::RateLimited { wait } => Denial::RateLimited { retry_after: wait },
            AcquireError::InsufficientCapacity { requested, burst } => Denial::OverBurst {
                cost: requested,
                burst,
            },
            other => Denial::Unavailable(Box::new(other)),
        }
    }
}

impl From<KeyedError> for Denial {
    fn from(e: KeyedError) -> Denial {
        match e {
            KeyedError::Limited(e) => Denial::from(e),
            other => Denial::Unavailable(Box::new(other)),
        }
    }
}

/// A limit as the `RateLimit-Policy` header states it: `limit` permits per
/// `window`.
///
/// A GCRA quota of `burst` permits, one earned every `t`, maps to
/// `limit = burst` and `window = burst · t`: the most a client can send at
/// once, and the time an emptied limit takes to fill again.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_core::Quota;
/// use limiter_tower::Policy;
///
/// let policy = Policy::from(Quota::per_second(10)?.with_burst(20)?);
/// assert_eq!(policy, Policy { limit: 20, window: Duration::from_secs(2) });
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Permits (`q`).
    pub limit: u32,
    /// The window they are granted over (`w`).
    pub window: Duration,
}

impl From<Quota> for Policy {
    fn from(quota: Quota) -> Policy {
        Policy {
            limit: quota.burst(),
            window: Duration::from_nanos(quota.burst_span_nanos()),
        }
    }
}

/// The grant of a GCRA reservation, with the headroom its decision left.
fn gcra_grant((reservation, left): (Reservation, Headroom)) -> Grant<Reservation> {
    Grant {
        wait: reservation.wait(),
        ticket: reservation,
        remaining: left.remaining,
        reset: left.refill_in,
    }
}

/// The synchronous decision of an in-memory limiter.
trait DecideAtOnce<K> {
    fn decide_at_once(
        &self,
        key: &K,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial>;
}

impl<C: Clock + 'static> DecideAtOnce<()> for RateLimiter<C> {
    fn decide_at_once(
        &self,
        _key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        RateLimiter::reserve_n_with_headroom(self, cost, max_wait)
            .map(gcra_grant)
            .map_err(Denial::from)
    }
}

impl<K, C> DecideAtOnce<K> for KeyedLimiter<K, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + 'static,
{
    fn decide_at_once(
        &self,
        key: &K,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        KeyedLimiter::reserve_n_with_headroom(self, key, cost, max_wait)
            .map(gcra_grant)
            .map_err(Denial::from)
    }
}

impl<C: Clock + 'static> Backend for RateLimiter<C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<Reservation>, Denial>> + Send {
        std::future::ready(self.decide_at_once(key, cost, max_wait))
    }

    fn decide_now(
        &self,
        key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<Reservation>, Denial>> {
        Some(self.decide_at_once(key, cost, max_wait))
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        RateLimiter::cancel(self, ticket)
    }

    fn policy(&self, _key: &()) -> Policy {
        self.quota().into()
    }
}

impl<K, C> Backend for KeyedLimiter<K, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + 'static,
{
    type Key = K;
    type Ticket = Reservation;

    fn decide(
        &self,
        key: &K,
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<Reservation>, Denial>> + Send {
        std::future::ready(self.decide_at_once(key, cost, max_wait))
    }

    fn decide_now(
        &self,
        key: &K,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<Reservation>, Denial>> {
        Some(self.decide_at_once(key, cost, max_wait))
    }

    fn cancel(&self, key: &K, ticket: Reservation) -> bool {
        KeyedLimiter::cancel(self, key, ticket)
    }

    fn policy(&self, key: &K) -> Policy {
        self.quota_of(key).into()
    }
}

impl<B: Backend> Backend for Arc<B> {
    type Key = B::Key;
    type Ticket = B::Ticket;

    fn decide(
        &self,
        key: &B::Key,
        cost: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Grant<B::Ticket>, Denial>> + Send {
        (**self).decide(key, cost, max_wait)
    }

    fn decide_now(
        &self,
        key: &B::Key,
        cost: u32,
        max_wait: Duration,
    ) -> Option<Result<Grant<B::Ticket>, Denial>> {
        (**self).decide_now(key, cost, max_wait)
    }

    fn cancel(&self, key: &B::Key, ticket: B::Ticket) -> bool {
        (**self).cancel(key, ticket)
    }

    fn policy(&self, key: &B::Key) -> Policy {
        (**self).policy(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use limiter_core::ManualClock;

    fn now<F: Future>(f: F) -> F::Output {
        // Every in-memory decision is ready at once.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("an in-memory decision must be ready at once"),
        }
    }

    #[test]
    fn grants_report_remaining_and_reset() {
        let limiter = RateLimiter::with_clock(
            Quota::per_second(10).unwrap().with_burst(3).unwrap(),
            ManualClock::new(),
        );
        let g = now(limiter.decide(&(), 1, Duration::ZERO)).unwrap();
        assert_eq!(
            (g.wait, g.remaining, g.reset),
            (Duration::ZERO, 2, Duration::from_millis(100))
        );
        let g = now(limiter.decide(&(), 2, Duration::ZERO)).unwrap();
        assert_eq!(g.remaining, 0);
        let g = now(limiter.decide(&(), 1, Duration::from_secs(1))).unwrap();
        assert_eq!(g.wait, Duration::from_millis(100));
        assert_eq!((g.remaining, g.reset), (0, Duration::from_millis(200)));
        assert!(Backend::cancel(&limiter, &(), g.ticket));
    }

    #[test]
    fn reset_is_exact_between_emissions() {
        let clock = ManualClock::new();
        let quota = Quota::per_second(10).unwrap().with_burst(3).unwrap();
        let global = RateLimiter::with_clock(quota, clock.clone());
        let keyed = KeyedLimiter::builder(quota)
            .clock(clock.clone())
            .build()
            .unwrap();
        now(global.decide(&(), 1, Duration::ZERO)).unwrap();
        now(keyed.decide(&7u8, 1, Duration::ZERO)).unwrap();
        // Half an emission interval later: tat = 200 ms after the second
        // grant, one whole permit left, the next in 50 ms (not one `t`).
        clock.advance(Duration::from_millis(50));
        for g in [
            now(global.decide(&(), 1, Duration::ZERO)).unwrap(),
            now(keyed.decide(&7u8, 1, Duration::ZERO)).unwrap(),
        ] {
            assert_eq!((g.remaining, g.reset), (1, Duration::from_millis(50)));
        }
    }

    #[test]
    fn denials_keep_their_meaning() {
        let limiter = RateLimiter::with_clock(
            Quota::per_second(2).unwrap().with_burst(2).unwrap(),
            ManualClock::new(),
        );
        assert!(matches!(
            now(limiter.decide(&(), 3, Duration::MAX)),
            Err(Denial::OverBurst { cost: 3, burst: 2 })
        ));
        now(limiter.decide(&(), 2, Duration::ZERO)).unwrap();
        assert!(matches!(
            now(limiter.decide(&(), 1, Duration::ZERO)),
            Err(Denial::RateLimited { retry_after }) if retry_after == Duration::from_millis(500)
        ));
        assert_eq!(
            limiter.policy(&()),
            Policy {
                limit: 2,
                window: Duration::from_secs(1)
            }
        );
    }

    #[test]
    fn keyed_too_many_keys_is_unavailable() {
        let limiter = KeyedLimiter::builder(Quota::per_second(1).unwrap())
            .clock(ManualClock::new())
            .max_keys(1)
            .when_full(limiter_keyed::WhenFull::RejectNewKeys)
            .build()
            .unwrap();
        now(limiter.decide(&1u8, 1, Duration::ZERO)).unwrap();
        assert!(matches!(
            now(limiter.decide(&2u8, 1, Duration::ZERO)),
            Err(Denial::Unavailable(_))
        ));
    }
}
