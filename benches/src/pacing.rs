//! Real-time behaviour of the async limiter (not criterion: these run for
//! seconds against the wall clock).
//!
//! * **Pacing**: `tasks` tasks loop on `take()` for a fixed time at a given
//!   rate with a burst of 1 ms worth of permits. The `k`-th permit (0-based,
//!   Each task records when it called `take()` and when it woke. The slots
//!   are rebuilt by running the same GCRA over the calls in call order
//!   (`tat' = max(tat, call) + t`, slot `= max(call, tat' − burst·t)`), which
//!   is the order the CAS serves them in; a wake-up's lateness is its time
//!   minus its slot. The rate error is `(permits woken by the deadline −
//!   rate · length − burst) / (rate · length + burst)`, in percent: negative
//!   when wake-ups later than the burst can absorb lose permits for good.
//! * **Fairness**: among 20 tasks looping on `take()`, one `take_n(10)` is
//!   timed. With FIFO slots it completes at its reserved slot, which is
//!   exactly the wait a `try_acquire_n(10)` reports just before it. governor's
//!   `until_n_ready(10)` polls and may be overtaken forever; its wait is
//!   capped and reported as a timeout.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use limiter_async::AsyncLimiter;
use limiter_core::{AcquireError, Quota};
use tokio::runtime::Runtime;
use tokio::time::Instant;

/// What one pacing run measured.
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// Permits a second asked for.
    pub rate: u32,
    /// Tasks taking permits.
    pub tasks: usize,
    /// `(woken − slotted) / slotted` by the deadline, in percent.
    pub error_pct: f64,
    /// Median lateness of a wake-up after its slot, microseconds.
    pub p50_late_us: f64,
    /// 99th percentile lateness, microseconds.
    pub p99_late_us: f64,
}

/// A multi-thread runtime with one worker per core, timers enabled.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime starts")
}

/// Paces `tasks` tasks at `rate` per second for `length`, with a burst of
/// `burst_ms` milliseconds' worth of permits (`rate · burst_ms / 1000`).
pub fn pacing(rt: &Runtime, rate: u32, tasks: usize, length: Duration, burst_ms: u32) -> Pacing {
    let burst = (rate / 1_000 * burst_ms).max(1);
    let quota = Quota::per_second(rate)
        .and_then(|q| q.with_burst(burst))
        .expect("valid pacing quota");
    let t = quota.period();
    let mut calls: Vec<(Instant, Instant)> = rt.block_on(async move {
        let limiter = AsyncLimiter::new(quota);
        let start = limiter.limiter().clock().origin();
        let deadline = start + length;
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let mut woke = Vec::with_capacity(4096);
                    loop {
                        let called = Instant::now();
                        if called >= deadline {
                            break;
                        }
                        limiter.take().await.expect("in range");
                        woke.push((called, Instant::now()));
                    }
                    woke
                })
            })
            .collect();
        let mut all = Vec::new();
        for handle in handles {
            all.extend(handle.await.expect("pacing task"));
        }
        all.push((start, start));
        all
    });
    calls.sort();
    let (start, _) = calls.remove(0);
    let deadline = start + length;
    let woken = calls.iter().filter(|(_, w)| *w <= deadline).count() as f64;
    let slotted = (length.as_nanos() / t.as_nanos()) as f64 + f64::from(burst);
    // The GCRA replayed in call order, in nanoseconds since `start`.
    let ns = |i: Instant| i.saturating_duration_since(start).as_nanos() as f64;
    let (t_ns, span) = (t.as_nanos() as f64, t.as_nanos() as f64 * f64::from(burst));
    let mut tat = 0.0f64;
    let mut late: Vec<f64> = calls
        .iter()
        .map(|&(called, woke)| {
            let call = ns(called);
            tat = tat.max(call) + t_ns;
            let slot = call.max(tat - span);
            (ns(woke) - slot).max(0.0) / 1e3
        })
        .collect();
    late.sort_by(f64::total_cmp);
    let at = |q: f64| {
        late.get(((late.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    Pacing {
        rate,
        tasks,
        error_pct: (woken - slotted) / slotted * 100.0,
        p50_late_us: at(0.50),
        p99_late_us: at(0.99),
    }
}

/// The fairness quota: 1000 a second, burst 10.
fn fairness_quota() -> Quota {
    Quota::per_second(1_000)
        .and_then(|q| q.with_burst(10))
        .expect("valid fairness quota")
}

/// How long one `take_n(10)` waited among 20 `take()` loops, and the FIFO
/// slot time it was owed (the wait `try_acquire_n(10)` reported just
/// before), both in milliseconds.
pub fn fairness_ours(rt: &Runtime) -> (f64, f64) {
    rt.block_on(async {
        let limiter = AsyncLimiter::new(fairness_quota());
        let stop = Arc::new(AtomicBool::new(false));
        let loops = spawn_loops(&stop, {
            let limiter = limiter.clone();
            move || {
                let limiter = limiter.clone();
                async move { limiter.take().await.expect("in range") }
            }
        });
        // Let the loops saturate the limiter.
        tokio::time::sleep(Duration::from_millis(200)).await;
        // A refusal writes nothing, so this asks the wait without taking it.
        // If the 10 permits happen to be free (the loops lag on a loaded
        // machine) the try takes them; let the loops catch up and ask again.
        let mut measured = (Duration::ZERO, Duration::ZERO);
        for _ in 0..20 {
            if let Err(AcquireError::RateLimited { wait }) = limiter.limiter().try_acquire_n(10) {
                let start = Instant::now();
                limiter.take_n(10).await.expect("10 fits the burst");
                measured = (start.elapsed(), wait);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (took, owed) = measured;
        stop_loops(&stop, loops).await;
        (took.as_secs_f64() * 1e3, owed.as_secs_f64() * 1e3)
    })
}

/// How long governor's `until_n_ready(10)` waited among 20 `until_ready()`
/// loops, in milliseconds, or `None` if it did not finish within `cap`.
pub fn fairness_governor(rt: &Runtime, cap: Duration) -> Option<f64> {
    rt.block_on(async {
        let nz = |n| NonZeroU32::new(n).expect("non-zero");
        let limiter = Arc::new(governor::RateLimiter::direct(
            governor::Quota::per_second(nz(1_000)).allow_burst(nz(10)),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let loops = spawn_loops(&stop, {
            let limiter = Arc::clone(&limiter);
            move || {
                let limiter = Arc::clone(&limiter);
                async move { limiter.until_ready().await }
            }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let start = Instant::now();
        let done = tokio::time::timeout(cap, limiter.until_n_ready(nz(10))).await;
        let took = start.elapsed();
        stop_loops(&stop, loops).await;
        match done {
            Ok(result) => {
                result.expect("10 fits the burst");
                Some(took.as_secs_f64() * 1e3)
            }
            Err(_) => None,
        }
    })
}

/// Spawns 20 tasks that call `take` until `stop` is set.
fn spawn_loops<F, Fut>(stop: &Arc<AtomicBool>, take: F) -> Vec<tokio::task::JoinHandle<()>>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    (0..20)
        .map(|_| {
            let stop = Arc::clone(stop);
            let take = take.clone();
            tokio::spawn(async move {
                // Relaxed: a stop flag; nothing is published with it.
                while !stop.load(Ordering::Relaxed) {
                    take().await;
                }
            })
        })
        .collect()
}

async fn stop_loops(stop: &AtomicBool, loops: Vec<tokio::task::JoinHandle<()>>) {
    // Relaxed: as in `spawn_loops`.
    stop.store(true, Ordering::Relaxed);
    for task in loops {
        task.abort();
        // Aborted tasks report cancellation; that is expected.
        let _ = task.await;
    }
}
