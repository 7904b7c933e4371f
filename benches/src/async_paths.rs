//! The async layer when no waiting is needed: `AsyncLimiter::take()` on a
//! free permit against the synchronous `try_acquire()` of the same limiter (what
//! the future, its poll and its reservation guard cost), and against
//! governor's `until_ready()` and leaky-bucket's `acquire_one()`, all on a
//! current-thread tokio runtime under the allow quota (every call admitted).
//!
//! Futures are awaited directly (not through `black_box`, which would force
//! each state machine out to memory); the permit's CAS cannot be optimised
//! away. Every async call that completes is one admitted permit, so the admission
//! count is the completion count; the sync side counts `Ok`s.

use std::time::Instant;

use limiter_async::AsyncLimiter;
use tokio::runtime::Runtime;

use crate::measure::{Batch, run};
use crate::subjects::{self, Path};

/// A current-thread runtime with timers.
pub fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime starts")
}

/// Our async limiter under the allow quota.
pub fn ours() -> AsyncLimiter {
    AsyncLimiter::new(Path::Allow.quota())
}

/// Our async limiter on the TSC clock (`from_limiter`): the same waiting
/// layer, reading the clock governor reads instead of tokio's (which paused
/// test time drives, and which costs an `Instant` read).
pub fn ours_tsc() -> AsyncLimiter<limiter_core::RateLimiter<limiter_core::clock::TscClock>> {
    AsyncLimiter::from_limiter(limiter_core::RateLimiter::with_clock(
        Path::Allow.quota(),
        limiter_core::clock::TscClock::new(),
    ))
}

/// governor's default direct limiter under the allow quota.
pub fn governor() -> governor::DefaultDirectRateLimiter {
    let quota =
        governor::Quota::per_second(nz(subjects::ALLOW_RATE)).allow_burst(nz(subjects::ALLOW_RATE));
    governor::RateLimiter::direct(quota)
}

fn nz(n: u32) -> std::num::NonZeroU32 {
    std::num::NonZeroU32::new(n).expect("non-zero")
}

fn batch(calls: u64, start: Instant) -> Batch {
    Batch {
        elapsed: start.elapsed(),
        admitted: calls,
        calls,
    }
}

/// `calls` awaits of `take()`, each on a free permit.
pub fn ours_take<L>(rt: &Runtime, limiter: &AsyncLimiter<L>, calls: u64) -> Batch
where
    L: limiter_core::Decide<Key = ()>,
    L::Ticket: Send,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..calls {
            limiter.take().await.expect("in range");
        }
        batch(calls, start)
    })
}

/// `calls` synchronous `try_acquire()`s of the same limiter.
pub fn ours_try_acquire(limiter: &AsyncLimiter, calls: u64) -> Batch {
    run(calls, &|| limiter.try_acquire().is_ok())
}

/// `calls` awaits of governor's `until_ready()`, each on a free permit.
pub fn governor_until_ready(
    rt: &Runtime,
    limiter: &governor::DefaultDirectRateLimiter,
    calls: u64,
) -> Batch {
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..calls {
            limiter.until_ready().await;
        }
        batch(calls, start)
    })
}

/// `calls` awaits of leaky-bucket's `acquire_one()`, each on a free permit.
pub fn leaky_acquire_one(rt: &Runtime, limiter: &leaky_bucket::RateLimiter, calls: u64) -> Batch {
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..calls {
            limiter.acquire_one().await;
        }
        batch(calls, start)
    })
}
