//! [`Decide`]: "may `cost` permits for this key proceed, waiting at most
//! `max_wait`?", the one question every front end asks of a limiter (an
//! HTTP layer, a rules engine, a gateway, an async wait), and the one trait
//! an algorithm implements.
//!
//! A decision is either a [`Grant`] (the permits are claimed, possibly for
//! a slot `wait` from now, and can be given back with [`Decide::cancel`])
//! or a [`Denial`] that consumed nothing. Each carries everything a front
//! end writes: a grant its [`Headroom`], computed from the state word that
//! decision wrote (so a `RateLimit` header describes that decision, not a
//! second look a concurrent caller could already have moved), and the
//! [`Policy`] it was decided under; a denial its exact wait and policy.
//! Nothing is asked again after the decision.
//!
//! Times are [`Duration`]s relative to the decision, so the limiter's clock
//! never leaks into the caller.
//!
//! # Implementations and their headroom
//!
//! | limiter | key | headroom |
//! |---|---|---|
//! | [`RateLimiter`](crate::RateLimiter) | `()` | exact, from the word the CAS wrote |
//! | [`PriorityLimiter`](crate::PriorityLimiter) | the class (`usize`) | exact, within the class's share |
//! | [`PriorityClass`](crate::PriorityClass) | `()` | exact, within the class's share |
//! | [`AdaptiveLimiter`](crate::AdaptiveLimiter) | `()` | exact, under the rate in force |
//! | [`SlidingWindow`](crate::SlidingWindow) | `()` | exact, from the counts the CAS wrote |
//! | [`WarmUpLimiter`](crate::WarmUpLimiter) | `()` | from the word the CAS wrote: `remaining` is 0 while a request must wait and the burst when one may proceed; `refill_in` the time until the next may |
//! | [`Metered`](crate::Metered) | its inner limiter's | its inner limiter's |
//! | `(A, B)`: both, all or nothing | `A`'s key (`B` global) | the part with fewer permits left |
//!
//! A reservation served from a refunded slot (see
//! [`RateLimiter::cancel`](crate::RateLimiter::cancel)) writes no word: its
//! headroom is 0 remaining and its wait plus one emission interval, the
//! documented default wherever a decision leaves no state to read.
//!
//! Files: this one (the trait and its answers), `combine` (a pointer to a
//! decider, and two limits at once).

use alloc::boxed::Box;
use core::fmt;
use core::time::Duration;

use crate::debt::Debt;
use crate::error::AcquireError;
use crate::quota::Quota;
use crate::reservation::Headroom;

mod combine;

/// The error a limiter reports when it cannot decide (a store that is
/// down, a key table that is full). Boxed so that each limiter keeps its own
/// error type.
pub type Unavailable = Box<dyn core::error::Error + Send + Sync + 'static>;

/// Permits claimed by a decision, with what it left and the limit it was
/// decided under.
#[derive(Debug)]
pub struct Grant<T> {
    /// Gives the permits back through [`Decide::cancel`].
    pub ticket: T,
    /// How long after the decision the permits may be used (zero: now).
    pub wait: Duration,
    /// What the key has left right after this grant, from the state the
    /// decision wrote (0 remaining when the grant had to wait: the slots
    /// before it are taken).
    pub headroom: Headroom,
    /// The limit the permits were decided under.
    pub policy: Policy,
}

impl<T> Grant<T> {
    /// The same grant with its ticket mapped (a wrapper's own ticket).
    pub fn map_ticket<U>(self, f: impl FnOnce(T) -> U) -> Grant<U> {
        Grant {
            ticket: f(self.ticket),
            wait: self.wait,
            headroom: self.headroom,
            policy: self.policy,
        }
    }
}

/// Why permits were not granted. Nothing was consumed.
///
/// A refusal by the limit carries the [`Policy`] that refused it, so a
/// front end can state it (`RateLimit-Policy`, a gRPC refusal) without
/// asking again.
#[derive(Debug)]
#[non_exhaustive]
pub enum Denial {
    /// The request does not conform within the allowed wait; it would after
    /// `retry_after`.
    RateLimited {
        /// The exact time until the same request would conform.
        retry_after: Duration,
        /// The limit that refused it.
        policy: Policy,
    },
    /// The cost exceeds the burst: the request can never conform, however
    /// long it waits.
    OverBurst {
        /// The permits the request costs.
        cost: u32,
        /// The most the key can grant at once.
        burst: u32,
        /// The limit that refused it.
        policy: Policy,
    },
    /// The limiter could not decide (a store that is down, a full key
    /// table, a clock past the limiter's span, a priority class that does
    /// not exist).
    Unavailable(Unavailable),
}

impl Denial {
    /// The denial of a limit decided under `policy` that refused with
    /// `error` (an error other than a refusal by the limit, such as a clock
    /// past the limiter's span, is [`Unavailable`](Denial::Unavailable)).
    pub fn refused(error: AcquireError, policy: Policy) -> Denial {
        match error {
            AcquireError::RateLimited { wait } => Denial::RateLimited {
                retry_after: wait,
                policy,
            },
            AcquireError::InsufficientCapacity { requested, burst } => Denial::OverBurst {
                cost: requested,
                burst,
                policy,
            },
            other => Denial::Unavailable(Box::new(other)),
        }
    }

    /// How long to wait before the same request could succeed: `Some` for
    /// [`RateLimited`](Denial::RateLimited) only.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Denial::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The limit that refused: `None` when the limiter could not decide.
    pub fn policy(&self) -> Option<Policy> {
        match self {
            Denial::RateLimited { policy, .. } | Denial::OverBurst { policy, .. } => Some(*policy),
            Denial::Unavailable(_) => None,
        }
    }
}

/// The convenient surface's error for a denial: a refusal by the limit as
/// its [`AcquireError`], an [`AcquireError`] that could not decide (a clock
/// past the span, an unknown class) as itself, and any other error of a
/// decider that could not decide as [`AcquireError::Unavailable`].
impl From<Denial> for AcquireError {
    fn from(denial: Denial) -> AcquireError {
        match denial {
            Denial::RateLimited { retry_after, .. } => {
                AcquireError::RateLimited { wait: retry_after }
            }
            Denial::OverBurst { cost, burst, .. } => AcquireError::InsufficientCapacity {
                requested: cost,
                burst,
            },
            Denial::Unavailable(error) => error
                .downcast::<AcquireError>()
                .map_or(AcquireError::Unavailable, |error| *error),
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denial::RateLimited { retry_after, .. } => {
                write!(f, "rate limited; retry after {retry_after:?}")
            }
            Denial::OverBurst { cost, burst, .. } => write!(
                f,
                "the request costs {cost} permits but at most {burst} are granted at once; lower the cost or raise the burst"
            ),
            Denial::Unavailable(e) => write!(f, "the rate limiter could not decide: {e}"),
        }
    }
}

impl core::error::Error for Denial {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Denial::Unavailable(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// The limit a key is decided under: `burst` permits at once, one more
/// earned every `interval` (the GCRA emission interval `t`).
///
/// Both numbers are kept, not a digest of them: a `RateLimit-Policy`
/// header can state the burst (`q = burst` over `w = burst · t`) and the
/// steady rate (`1` per `t`) separately, which matters when the burst is
/// smaller than the rate per window.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{Policy, Quota};
///
/// let policy = Policy::from(Quota::per_second(10)?.with_burst(20)?);
/// assert_eq!(policy, Policy { burst: 20, interval: Duration::from_millis(100) });
/// assert_eq!(policy.window(), Duration::from_secs(2)); // an emptied limit refills in 2 s
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The most permits granted at once.
    pub burst: u32,
    /// The emission interval `t`: the time one permit takes to come back.
    pub interval: Duration,
}

impl Policy {
    /// `burst · interval`: the time an emptied limit takes to fill again
    /// (saturating at [`Duration::MAX`]).
    pub fn window(&self) -> Duration {
        self.interval.saturating_mul(self.burst)
    }
}

impl From<Quota> for Policy {
    fn from(quota: Quota) -> Policy {
        Policy {
            burst: quota.burst(),
            interval: quota.period(),
        }
    }
}

/// A limiter asked for permits per key, deciding at once, in memory: the
/// one trait an algorithm implements, and the seam under every front end
/// (limiter-async's `AsyncDecide` is its twin for a decision that needs an
/// `.await`).
///
/// `Key` is `()` for one global limit, `K` for a per-key limiter, the class
/// for the priority limiter. Waiting (limiter-async), [`Metered`](crate::Metered),
/// pointers and composition are written once over this trait; the
/// convenient surface (`try_acquire`, `reserve_n`, `take`) is each
/// limiter's own inherent methods. A grant's `wait` is all a waiting layer
/// needs of the slot: it sleeps until its own clock's now plus that wait.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{Decide, Headroom, ManualClock, Policy, Quota, RateLimiter};
///
/// let limiter = RateLimiter::with_clock(Quota::per_second(2)?, ManualClock::new());
/// let grant = limiter.decide(&(), 1, Duration::ZERO)?;
/// assert_eq!(grant.wait, Duration::ZERO);
/// assert_eq!(grant.headroom, Headroom { remaining: 0, refill_in: Duration::from_millis(500) });
/// assert_eq!(grant.policy, Policy { burst: 1, interval: Duration::from_millis(500) });
/// // Waiting up to a second: the next slot, 500 ms away, is claimed...
/// let held = limiter.decide(&(), 1, Duration::from_secs(1))?;
/// assert_eq!(held.wait, Duration::from_millis(500));
/// assert!(Decide::cancel(&limiter, &(), held.ticket)); // ...and given back.
/// let denied = limiter.decide_now(&(), 1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
/// assert_eq!(denied.policy(), Some(grant.policy));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Decide: Send + Sync {
    /// What requests are counted by.
    type Key: ?Sized;
    /// What a grant hands back to [`cancel`](Decide::cancel).
    type Ticket;

    /// Claims `cost` permits for `key` if they conform within `max_wait`.
    ///
    /// # Errors
    ///
    /// A [`Denial`]; every variant consumed nothing.
    fn decide(
        &self,
        key: &Self::Key,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Self::Ticket>, Denial>;

    /// Gives back the permits of a grant that will not be used; returns
    /// whether they are back (each limiter's `cancel` says when they are).
    fn cancel(&self, key: &Self::Key, ticket: Self::Ticket) -> bool;

    /// Claims `cost` permits for `key` if they conform now.
    ///
    /// # Errors
    ///
    /// As [`decide`](Decide::decide).
    fn decide_now(&self, key: &Self::Key, cost: u32) -> Result<Grant<Self::Ticket>, Denial> {
        self.decide(key, cost, Duration::ZERO)
    }

    /// Takes `cost` permits for `key` if they conform now, reporting no
    /// grant: the path of a waiting layer's free permit and of the
    /// convenient `try_acquire_n`. The default is
    /// [`decide_now`](Decide::decide_now) without its report;
    /// [`RateLimiter`](crate::RateLimiter) answers with its plain try, which
    /// computes no headroom and records nothing to cancel.
    ///
    /// # Errors
    ///
    /// The denial as an [`AcquireError`] (see its `From<Denial>`).
    #[inline]
    fn acquire_now(&self, key: &Self::Key, cost: u32) -> Result<(), AcquireError> {
        self.decide_now(key, cost)
            .map(drop)
            .map_err(AcquireError::from)
    }

    /// Charges `key` `permits` more after a grant, as capped GCRA debt:
    /// its next permit comes at most `max(cap, t)` later, and the part
    /// above the cap is reported as [`Debt::dropped`] (see
    /// [`ChargeAfter`](crate::debt::ChargeAfter) for the cap and the cost).
    ///
    /// The default charges nothing and reports every permit dropped: a
    /// limiter that cannot carry debt (sliding window, warm-up, adaptive,
    /// priority, calendar) keeps it. [`RateLimiter`](crate::RateLimiter),
    /// limiter-keyed's `KeyedLimiter`, [`Metered`](crate::Metered) of
    /// those, pointers to them and the pair `(A, B)` carry debt.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{debt::Debt, Decide, ManualClock, Quota, RateLimiter, SlidingWindow};
    ///
    /// let gcra = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// gcra.decide_now(&(), 1)?;
    /// let debt = Decide::charge_after(&gcra, &(), 3, Duration::from_secs(1));
    /// assert_eq!(debt, Debt { charged: 3, dropped: 0 });
    /// assert_eq!(gcra.decide_now(&(), 1).unwrap_err().retry_after(), Some(Duration::from_millis(400)));
    ///
    /// let window = SlidingWindow::with_clock(10, Duration::from_secs(1), ManualClock::new())?;
    /// let debt = Decide::charge_after(&window, &(), 3, Duration::from_secs(1));
    /// assert_eq!(debt, Debt { charged: 0, dropped: 3 }); // cannot carry debt
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn charge_after(&self, key: &Self::Key, permits: u64, cap: Duration) -> Debt {
        let _ = (key, cap);
        Debt {
            charged: 0,
            dropped: permits,
        }
    }
}
