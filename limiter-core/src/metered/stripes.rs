//! Where a thread counts.
//!
//! Counters are striped and, where possible, single-writer. Each of
//! [`Metered::STRIPES`](super::Metered::STRIPES) cache-padded stripes
//! belongs, process-wide, to at most one live thread: the first time a
//! thread meters anything it claims a free stripe index with one CAS on a
//! process-wide bitmap, and from then on it counts on that stripe of every
//! [`Metered`](super::Metered) with a relaxed load and store, no
//! read-modify-write at all, since no other thread writes that stripe.
//! When the thread exits, a thread-local guard releases its index, and the
//! next thread to meter claims it. A thread that finds every index held
//! counts on one shared stripe with relaxed `fetch_add`s, and looks for a
//! free index again at its next count.
//! [`Metered::stats`](super::Metered::stats) sums every stripe.
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

use crate::sync::{AtomicU64, Ordering};

/// See [`Metered::STRIPES`](super::Metered::STRIPES).
pub(super) const STRIPES: usize = 16;

#[derive(Debug, Default)]
pub(super) struct Stripe {
    pub(super) allowed: AtomicU64,
    pub(super) rejected: AtomicU64,
    pub(super) delayed: AtomicU64,
    pub(super) wait_nanos: AtomicU64,
    pub(super) cancelled: AtomicU64,
}

/// Where the calling thread counts: its own stripe, or the shared one.
#[derive(Clone, Copy)]
pub(super) enum Counter<'a> {
    Owned(&'a Stripe),
    Shared(&'a Stripe),
}

impl Counter<'_> {
    #[inline]
    pub(super) fn add(self, counter: fn(&Stripe) -> &AtomicU64, by: u64) {
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
    pub(in crate::metered) fn held_stripe() -> Option<usize> {
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
pub(super) use holders::held_stripe;

/// Without `std` (and under loom, whose thread-local destructors cannot
/// touch a model atomic) there are no stripe holders: every count goes to
/// the shared stripe.
#[cfg(any(not(feature = "std"), loom))]
#[inline]
pub(super) fn held_stripe() -> Option<usize> {
    None
}

#[cfg(all(test, feature = "std", not(loom)))]
mod tests {
    use super::*;
    use crate::{ManualClock, Metered, Quota, RateLimiter};

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
