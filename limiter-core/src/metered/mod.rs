//! [`Metered`]: counts what a limiter decides, without adding contention:
//! counters are striped and, where possible, single-writer (`stripes`).
//!
//! Names follow the metrics convention `rate_limit.allowed`,
//! `rate_limit.rejected`, `rate_limit.delayed`, `rate_limit.wait_time` and
//! `rate_limit.cancelled`; with the `metrics` feature, [`Metered::publish`]
//! reports them through the `metrics` crate's facade as absolute counters
//! (`wait_time` in nanoseconds).
//!
//! Files: this one (the wrapper and its counts), `stripes` (where a thread
//! counts, and the stripe bitmap).

use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::decision::{Decide, Denial, Grant};
use crate::error::AcquireError;
use crate::sync::{AtomicU64, Ordering};
use stripes::{Counter, STRIPES, Stripe, held_stripe};

mod stripes;

/// Totals of what a [`Metered`] limiter decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests granted (`rate_limit.allowed`), at once or by reservation.
    pub allowed: u64,
    /// Requests refused (`rate_limit.rejected`).
    pub rejected: u64,
    /// Reservations granted with a wait above zero (`rate_limit.delayed`).
    pub delayed: u64,
    /// The waits of those reservations, summed (`rate_limit.wait_time`).
    pub wait_total: Duration,
    /// Reservations given back by a successful `cancel`.
    pub cancelled: u64,
}

/// A limiter that counts its decisions; itself a [`Decide`] with the
/// inner limiter's key, and, for one limit, the convenient surface
/// (`try_acquire`, `reserve_n`, `cancel`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{ManualClock, Metered, Quota, RateLimiter};
///
/// let metered = Metered::new(RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new()));
/// assert!(metered.try_acquire().is_ok());
/// assert!(metered.try_acquire().is_err());
/// let r = metered.reserve_n(1, Duration::from_secs(1)).unwrap();
/// let stats = metered.stats();
/// assert_eq!((stats.allowed, stats.rejected, stats.delayed), (2, 1, 1));
/// assert_eq!(stats.wait_total, r.wait());
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct Metered<L> {
    inner: L,
    stripes: [CachePadded<Stripe>; STRIPES],
    shared: CachePadded<Stripe>,
}

impl Metered<()> {
    /// How many single-writer counter stripes a [`Metered`] limiter has (plus
    /// one shared stripe for threads that find every stripe held). It does
    /// not depend on the inner limiter; it is defined on `Metered<()>` so
    /// that `Metered::STRIPES` names it without a type annotation.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Metered;
    ///
    /// assert_eq!(Metered::STRIPES, 16);
    /// ```
    pub const STRIPES: usize = STRIPES;
}

impl<L: Decide> Metered<L> {
    /// Counts the decisions of `limiter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Metered, Quota, RateLimiter};
    ///
    /// let metered = Metered::new(RateLimiter::with_clock(Quota::per_second(1)?, ManualClock::new()));
    /// assert_eq!(metered.stats().allowed, 0);
    /// metered.try_acquire()?;
    /// assert_eq!(metered.stats().allowed, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(limiter: L) -> Metered<L> {
        Metered {
            inner: limiter,
            stripes: core::array::from_fn(|_| CachePadded::new(Stripe::default())),
            shared: CachePadded::new(Stripe::default()),
        }
    }

    /// The metered limiter, for its own methods (`set_quota`, `available`...).
    /// Calls made on it directly are not counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Metered, Quota, RateLimiter};
    ///
    /// let metered = Metered::new(RateLimiter::with_clock(Quota::per_second(5)?, ManualClock::new()));
    /// assert_eq!(metered.inner().available(), 1);
    /// metered.inner().try_acquire()?; // not counted
    /// assert_eq!(metered.stats().allowed, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The totals so far, summed over the stripes. Not a snapshot: counts
    /// made while summing may or may not be included.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Metered, Quota, RateLimiter};
    ///
    /// let metered = Metered::new(RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new()));
    /// metered.try_acquire()?;
    /// let r = metered.reserve_n(1, Duration::MAX)?; // waits 100 ms
    /// assert!(metered.cancel(r));
    /// let stats = metered.stats();
    /// assert_eq!((stats.allowed, stats.delayed, stats.cancelled), (2, 1, 1));
    /// assert_eq!(stats.wait_total, Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Stats {
        // Relaxed: each counter is independent and only summed.
        let sum = |f: fn(&Stripe) -> &AtomicU64| {
            self.stripes
                .iter()
                .map(|s| &**s)
                .chain(core::iter::once(&*self.shared))
                .fold(0u64, |total, s| {
                    total.saturating_add(f(s).load(Ordering::Relaxed))
                })
        };
        Stats {
            allowed: sum(|s| &s.allowed),
            rejected: sum(|s| &s.rejected),
            delayed: sum(|s| &s.delayed),
            wait_total: Duration::from_nanos(sum(|s| &s.wait_nanos)),
            cancelled: sum(|s| &s.cancelled),
        }
    }

    /// Reports [`stats`](Metered::stats) through the `metrics` facade as
    /// absolute counters `rate_limit.allowed`, `.rejected`, `.delayed`,
    /// `.wait_time` (nanoseconds) and `.cancelled`. Call it periodically, or
    /// from your exporter's scrape hook; it costs the hot path nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::{ManualClock, Metered, Quota, RateLimiter};
    ///
    /// let metered = Metered::new(RateLimiter::with_clock(Quota::per_second(1)?, ManualClock::new()));
    /// metered.try_acquire()?;
    /// metered.publish(); // to whichever recorder is installed (none here)
    /// assert_eq!(metered.stats().allowed, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish(&self) {
        let s = self.stats();
        metrics::counter!("rate_limit.allowed").absolute(s.allowed);
        metrics::counter!("rate_limit.rejected").absolute(s.rejected);
        metrics::counter!("rate_limit.delayed").absolute(s.delayed);
        metrics::counter!("rate_limit.wait_time")
            .absolute(u64::try_from(s.wait_total.as_nanos()).unwrap_or(u64::MAX));
        metrics::counter!("rate_limit.cancelled").absolute(s.cancelled);
    }

    /// The calling thread's counter: the stripe whose index it holds, the
    /// shared stripe if it holds none.
    #[inline]
    fn counter(&self) -> Counter<'_> {
        match held_stripe() {
            Some(i) => Counter::Owned(&self.stripes[i]),
            None => Counter::Shared(&self.shared),
        }
    }

    /// Counts a decision as allowed or rejected; returns where it counted.
    #[inline]
    fn record<T, E>(&self, outcome: &Result<T, E>) -> Counter<'_> {
        let counter = self.counter();
        match outcome {
            Ok(_) => counter.add(|s| &s.allowed, 1),
            Err(_) => counter.add(|s| &s.rejected, 1),
        }
        counter
    }
}

/// The convenient surface of one metered limit, each call counted.
impl<L: Decide<Key = ()>> Metered<L> {
    /// Takes one permit now.
    ///
    /// # Errors
    ///
    /// The inner limiter's refusal.
    #[inline]
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits now, all or nothing.
    ///
    /// # Errors
    ///
    /// The inner limiter's refusal.
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.acquire_now(&(), n)
    }

    /// Claims the earliest slot for `n` permits within `max_wait`; a grant
    /// with a wait counts as delayed too.
    ///
    /// # Errors
    ///
    /// The inner limiter's refusal.
    pub fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<L::Ticket, AcquireError> {
        self.decide(&(), n, max_wait)
            .map(|grant| grant.ticket)
            .map_err(AcquireError::from)
    }

    /// Gives back a reservation; counted as cancelled when its permits are
    /// back.
    pub fn cancel(&self, reservation: L::Ticket) -> bool {
        Decide::cancel(self, &(), reservation)
    }
}

/// Counts the decisions of the inner limiter: a grant as allowed (and
/// delayed, with its wait, when it waits), a denial as rejected, a cancel
/// that gives permits back as cancelled. Headroom and policy are the inner
/// limiter's.
impl<L: Decide> Decide for Metered<L> {
    type Key = L::Key;
    type Ticket = L::Ticket;

    fn decide(
        &self,
        key: &L::Key,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<L::Ticket>, Denial> {
        let outcome = self.inner.decide(key, cost, max_wait);
        let counter = self.counter();
        match &outcome {
            Ok(grant) => {
                counter.add(|s| &s.allowed, 1);
                if !grant.wait.is_zero() {
                    counter.add(|s| &s.delayed, 1);
                    counter.add(
                        |s| &s.wait_nanos,
                        crate::quota::saturating_nanos(grant.wait),
                    );
                }
            }
            Err(_) => counter.add(|s| &s.rejected, 1),
        }
        outcome
    }

    fn cancel(&self, key: &L::Key, ticket: L::Ticket) -> bool {
        let refunded = Decide::cancel(&self.inner, key, ticket);
        if refunded {
            self.counter().add(|s| &s.cancelled, 1);
        }
        refunded
    }

    #[inline]
    fn acquire_now(&self, key: &L::Key, cost: u32) -> Result<(), AcquireError> {
        let outcome = self.inner.acquire_now(key, cost);
        self.record(&outcome);
        outcome
    }

    fn charge_after(&self, key: &L::Key, permits: u64, cap: Duration) -> crate::debt::Debt {
        self.inner.charge_after(key, permits, cap)
    }
}
