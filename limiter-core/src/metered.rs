//! [`Metered`]: counts what a limiter decides, without adding contention.
//!
//! Counters are striped and, where possible, single-writer. Each of
//! [`Metered::STRIPES`] cache-padded stripes belongs, process-wide, to at most one
//! live thread: the first time a thread meters anything it claims a free
//! stripe index with one CAS on a process-wide bitmap, and from then on it
//! counts on that stripe of every [`Metered`] with a relaxed load and store,
//! no read-modify-write at all, since no other thread writes that stripe.
//! When the thread exits, a thread-local guard releases its index, and the
//! next thread to meter claims it. A thread that finds every index held
//! counts on one shared stripe with relaxed `fetch_add`s, and looks for a
//! free index again at its next count. [`Metered::stats`] sums every stripe.
//! So metering costs a stripe holder two plain memory operations on its own
//! cache line, and never a counter that every thread fights over. Without
//! `std` (or under loom) there are no thread-locals and every count goes to
//! the shared stripe.
//!
//! # Memory ordering
//!
//! A stripe passes from an exiting thread to the next holder through the
//! bitmap: the release clears the bit with a release RMW, the claim sets it
//! with an acquire CAS, so every count the old holder made happens before
//! the new holder's first load, and the new holder's load-and-store loses
//! none of them. The counters themselves are relaxed: they are statistics,
//! summed without ordering.
//!
//! Names follow the metrics convention `rate_limit.allowed`,
//! `rate_limit.rejected`, `rate_limit.delayed`, `rate_limit.wait_time` and
//! `rate_limit.cancelled`; with the `metrics` feature, [`Metered::publish`]
//! reports them through the `metrics` crate's facade as absolute counters
//! (`wait_time` in nanoseconds).

use core::time::Duration;

use crossbeam_utils::CachePadded;

use crate::decision::{Decide, Denial, Grant};
use crate::error::AcquireError;
use crate::sync::{AtomicU64, Ordering};

/// See [`Metered::STRIPES`].
const STRIPES: usize = 16;

#[derive(Debug, Default)]
struct Stripe {
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

/// The stripe indices held by live threads: bit `i` is set while a thread
/// holds stripe `i`.
#[cfg(all(feature = "std", not(loom)))]
mod holders {
    use crate::sync::{AtomicU32, Ordering};

    /// Bits of the claimable indices.
    const CLAIMABLE: u32 = if super::STRIPES == 32 {
        u32::MAX
    } else {
        (1 << super::STRIPES) - 1
    };

    /// No index held and no claim tried yet.
    const UNCLAIMED: u8 = u8::MAX;
    /// No index held: every one was taken at the last try.
    const NONE_FREE: u8 = u8::MAX - 1;

    fn held() -> &'static AtomicU32 {
        static HELD: AtomicU32 = AtomicU32::new(0);
        &HELD
    }

    /// The calling thread's index, released when the thread exits.
    struct Holding(core::cell::Cell<u8>);

    impl Drop for Holding {
        fn drop(&mut self) {
            let i = self.0.get();
            if u32::from(i) < u32::BITS {
                // Release: every count this thread made on stripe `i`
                // happens before the next holder's acquire claim.
                held().fetch_and(!(1 << i), Ordering::Release);
            }
        }
    }

    std::thread_local! {
        static HOLDING: Holding = const { Holding(core::cell::Cell::new(UNCLAIMED)) };
    }
    /// Claims a free index, or `None` if every one is held.
    fn claim() -> Option<u8> {
        // Relaxed: a guess at the bitmap; the CAS decides.
        let mut bits = held().load(Ordering::Relaxed);
        loop {
            let free = CLAIMABLE & !bits;
            if free == 0 {
                return None;
            }
            let i = free.trailing_zeros();
            // Acquire: see every count of the index's previous holder, whose
            // release cleared the bit. Relaxed on failure: just retry.
            match held().compare_exchange_weak(
                bits,
                bits | 1 << i,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(i as u8),
                Err(actual) => bits = actual,
            }
        }
    }

    /// The stripe index the calling thread holds, claiming one if it holds
    /// none; `None` if every index is held by another thread, or while the
    /// thread is being torn down.
    #[inline]
    pub(super) fn held_stripe() -> Option<usize> {
        HOLDING
            .try_with(|holding| {
                let i = holding.0.get();
                if u32::from(i) < u32::BITS {
                    return Some(usize::from(i));
                }
                let claimed = claim();
                holding.0.set(claimed.unwrap_or(NONE_FREE));
                claimed.map(usize::from)
            })
            .ok()
            .flatten()
    }
}

#[cfg(all(feature = "std", not(loom)))]
use holders::held_stripe;

/// Without `std` (and under loom, whose thread-local destructors cannot
/// touch a model atomic) there are no stripe holders: every count goes to
/// the shared stripe.
#[cfg(any(not(feature = "std"), loom))]
#[inline]
fn held_stripe() -> Option<usize> {
    None
}

#[cfg(all(test, feature = "std", not(loom)))]
mod tests {
    use super::*;
    use crate::{ManualClock, Quota, RateLimiter};

    #[test]
    fn a_stripe_returns_when_its_thread_exits() {
        let limiter = RateLimiter::with_clock(
            Quota::per_second(1).unwrap().with_burst(1_000).unwrap(),
            ManualClock::new(),
        );
        let metered = Metered::new(limiter);
        // More threads than stripes, one after another: each finds the
        // stripe its predecessor released, and none counts on the shared one.
        let threads = 3 * STRIPES as u64;
        for _ in 0..threads {
            std::thread::scope(|s| {
                // Joined explicitly: a join waits for the thread's
                // thread-local destructors, which release its stripe.
                s.spawn(|| metered.try_acquire().unwrap()).join().unwrap();
            });
        }
        // Relaxed: the threads were joined.
        assert_eq!(metered.shared.allowed.load(Ordering::Relaxed), 0);
        assert_eq!(metered.stats().allowed, threads);
    }
}
