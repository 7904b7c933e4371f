//! [`Metered`]: counts what a limiter decides, without adding contention.
//!
//! Counters are striped: each thread adds to one of [`STRIPES`] cache-padded
//! stripes (picked once per thread), and [`Metered::stats`] sums them. Two
//! threads on different stripes never touch the same cache line, so metering
//! adds one uncontended relaxed `fetch_add` to a decision, not a shared
//! counter that every thread fights over. Without `std` there are no thread
//! ids and every thread uses stripe 0.
//!
//! Names follow the metrics convention `rate_limit.allowed`,
//! `rate_limit.rejected`, `rate_limit.delayed`, `rate_limit.wait_time` and
//! `rate_limit.cancelled`;
//! with the `metrics` feature, [`Metered::publish`] reports them through the
//! `metrics` crate's facade as absolute counters (`wait_time` in
//! nanoseconds).

use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::error::AcquireError;
use crate::limiter_trait::Limiter;
use crate::reservation::Reservation;
use crate::sync::{AtomicU64, Ordering};

/// How many counter stripes a [`Metered`] limiter has.
pub const STRIPES: usize = 8;

#[derive(Debug, Default)]
struct Stripe {
    allowed: AtomicU64,
    rejected: AtomicU64,
    delayed: AtomicU64,
    wait_nanos: AtomicU64,
    cancelled: AtomicU64,
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
}

impl<L: Limiter> Metered<L> {
    /// Counts the decisions of `limiter`.
    pub fn new(limiter: L) -> Metered<L> {
        Metered {
            inner: limiter,
            stripes: core::array::from_fn(|_| CachePadded::new(Stripe::default())),
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
            self.stripes.iter().fold(0u64, |total, s| {
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

    #[inline]
    fn stripe(&self) -> &Stripe {
        &self.stripes[stripe_index()]
    }

    #[inline]
    fn count(&self, counter: fn(&Stripe) -> &AtomicU64, by: u64) {
        // Relaxed: a statistic; nothing is ordered by it.
        counter(self.stripe()).fetch_add(by, Ordering::Relaxed);
    }

    #[inline]
    fn record<T>(&self, outcome: &Result<T, AcquireError>) {
        match outcome {
            Ok(_) => self.count(|s| &s.allowed, 1),
            Err(_) => self.count(|s| &s.rejected, 1),
        }
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
        self.record(&outcome);
        if let Ok(r) = &outcome
            && r.wait != 0
        {
            let stripe = self.stripe();
            // Relaxed: statistics, as in `count`.
            stripe.delayed.fetch_add(1, Ordering::Relaxed);
            stripe.wait_nanos.fetch_add(r.wait, Ordering::Relaxed);
        }
        outcome
    }

    fn cancel(&self, reservation: Reservation) -> bool {
        let refunded = self.inner.cancel(reservation);
        if refunded {
            self.count(|s| &s.cancelled, 1);
        }
        refunded
    }

    fn now(&self) -> u64 {
        self.inner.now()
    }
}

/// This thread's stripe: assigned round-robin the first time a thread
/// meters anything.
#[cfg(all(feature = "std", not(loom)))]
#[inline]
fn stripe_index() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|index| {
        let mut i = index.get();
        if i == usize::MAX {
            // Relaxed: only spreads threads over stripes; any value is correct.
            i = NEXT.fetch_add(1, StdOrdering::Relaxed) % STRIPES;
            index.set(i);
        }
        i
    })
}

/// Without `std` (or under loom) there are no thread-locals: one stripe.
#[cfg(any(not(feature = "std"), loom))]
#[inline]
fn stripe_index() -> usize {
    0
}
