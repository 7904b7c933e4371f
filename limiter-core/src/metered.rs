//! [`Metered`]: counts what a limiter decides, without adding contention.
//!
//! Counters are striped and, where possible, single-writer. Each of
//! [`STRIPES`] cache-padded stripes can be *owned* by one thread: the first
//! thread (by a per-thread token) to land on a free stripe claims it with one
//! CAS, and from then on counts there with a relaxed load and store, no
//! read-modify-write at all, since no other thread writes that stripe. A
//! thread whose stripe is owned by another counts on one shared stripe with
//! relaxed `fetch_add`s. [`Metered::stats`] sums every stripe. So metering
//! costs an owner two plain memory operations on its own cache line, and
//! never a counter that every thread fights over. Without `std` (or under
//! loom) there are no thread tokens and every count goes to the shared
//! stripe.
//!
//! Names follow the metrics convention `rate_limit.allowed`,
//! `rate_limit.rejected`, `rate_limit.delayed`, `rate_limit.wait_time` and
//! `rate_limit.cancelled`; with the `metrics` feature, [`Metered::publish`]
//! reports them through the `metrics` crate's facade as absolute counters
//! (`wait_time` in nanoseconds).

use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::error::AcquireError;
use crate::limiter_trait::Limiter;
use crate::reservation::Reservation;
use crate::sync::{AtomicU64, Ordering};

/// How many single-writer counter stripes a [`Metered`] limiter has (plus
/// one shared stripe for threads that find theirs taken).
pub const STRIPES: usize = 16;

#[derive(Debug, Default)]
struct Stripe {
    /// The token of the thread that owns this stripe; 0 while free. The
    /// shared stripe is never owned.
    owner: AtomicU64,
    allowed: AtomicU64,
    rejected: AtomicU64,
    delayed: AtomicU64,
    wait_nanos: AtomicU64,
    cancelled: AtomicU64,
}

/// Where the calling thread counts: its own stripe, or the shared one.
#[derive(Clone, Copy)]
enum Counter<'a> {
    Owned(&'a Stripe),
    Shared(&'a Stripe),
}

impl Counter<'_> {
    #[inline]
    fn add(self, counter: fn(&Stripe) -> &AtomicU64, by: u64) {
        match self {
            Counter::Owned(s) => {
                let c = counter(s);
                // Relaxed load and store: this thread is the stripe's only
                // writer, so no increment can be lost; readers only sum.
                c.store(
                    c.load(Ordering::Relaxed).wrapping_add(by),
                    Ordering::Relaxed,
                );
            }
            Counter::Shared(s) => {
                // Relaxed: a statistic; the RMW keeps concurrent increments.
                counter(s).fetch_add(by, Ordering::Relaxed);
            }
        }
    }
}

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

/// A [`Limiter`] that counts its decisions; itself a [`Limiter`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Limiter, ManualClock, Metered, Quota, RateLimiter};
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

impl<L: Limiter> Metered<L> {
    /// Counts the decisions of `limiter`.
    pub fn new(limiter: L) -> Metered<L> {
        Metered {
            inner: limiter,
            stripes: core::array::from_fn(|_| CachePadded::new(Stripe::default())),
            shared: CachePadded::new(Stripe::default()),
        }
    }

    /// The metered limiter, for its own methods (`set_quota`, `available`...).
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The totals so far, summed over the stripes. Not a snapshot: counts
    /// made while summing may or may not be included.
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

    /// The calling thread's counter: its own stripe if it owns (or can
    /// claim) the stripe its token maps to, the shared stripe otherwise.
    #[inline]
    fn counter(&self) -> Counter<'_> {
        let Some(token) = thread_token() else {
            return Counter::Shared(&self.shared);
        };
        let stripe = &self.stripes[(token % STRIPES as u64) as usize];
        // Relaxed: the owner field only decides who may write the stripe's
        // counters, and the claim CAS makes that decision unique.
        let owner = stripe.owner.load(Ordering::Relaxed);
        if owner == token
            || (owner == 0
                && stripe
                    .owner
                    .compare_exchange(0, token, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok())
        {
            Counter::Owned(stripe)
        } else {
            Counter::Shared(&self.shared)
        }
    }

    /// Counts a decision as allowed or rejected; returns where it counted.
    #[inline]
    fn record<T>(&self, outcome: &Result<T, AcquireError>) -> Counter<'_> {
        let counter = self.counter();
        match outcome {
            Ok(_) => counter.add(|s| &s.allowed, 1),
            Err(_) => counter.add(|s| &s.rejected, 1),
        }
        counter
    }
}

impl<L: Limiter> Limiter for Metered<L> {
    #[inline]
    fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        let outcome = self.inner.try_acquire_n(n);
        self.record(&outcome);
        outcome
    }

    fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        let outcome = self.inner.reserve_n(n, max_wait);
        let counter = self.record(&outcome);
        if let Ok(r) = &outcome
            && r.wait != 0
        {
            counter.add(|s| &s.delayed, 1);
            counter.add(|s| &s.wait_nanos, r.wait);
        }
        outcome
    }

    fn cancel(&self, reservation: Reservation) -> bool {
        let refunded = self.inner.cancel(reservation);
        if refunded {
            self.counter().add(|s| &s.cancelled, 1);
        }
        refunded
    }

    fn now(&self) -> u64 {
        self.inner.now()
    }
}

/// A token unique to the calling thread (never 0), assigned the first time
/// it meters anything; `None` while the thread is being torn down.
#[cfg(all(feature = "std", not(loom)))]
#[inline]
fn thread_token() -> Option<u64> {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
    static NEXT: StdAtomicU64 = StdAtomicU64::new(1);
    thread_local! {
        static TOKEN: Cell<u64> = const { Cell::new(0) };
    }
    TOKEN
        .try_with(|token| {
            if token.get() == 0 {
                // Relaxed: only uniqueness matters, which the RMW gives.
                token.set(NEXT.fetch_add(1, StdOrdering::Relaxed));
            }
            token.get()
        })
        .ok()
}

/// Without `std` (or under loom) there are no thread-locals: every count
/// goes to the shared stripe.
#[cfg(any(not(feature = "std"), loom))]
#[inline]
fn thread_token() -> Option<u64> {
    None
}
