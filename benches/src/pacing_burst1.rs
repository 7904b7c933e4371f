//! Strict pacing side by side: one consumer, burst 1, real time.
//!
//! Each subject is a limiter of `rate` permits a second with a burst of 1
//! (no tolerance), drained by one consumer that loops on its waiting call
//! for `length`:
//!
//! * `ours/timer`: `AsyncLimiter::take()` with `WakeUp::Timer` (tokio's
//!   1 ms timer);
//! * `ours/precise`: the same with `WakeUp::Precise` (the timer thread);
//! * `governor`: `until_ready()` on a direct limiter with `allow_burst(1)`;
//! * `leaky_bucket`: `acquire_one()` with `max(1)`, refilled every 1 ms (its
//!   shortest interval) by `rate / 1000`: a bucket of one token cannot hold
//!   more, so above 1,000/s it is capped at 1,000/s by construction;
//! * `blocking`: a plain thread on the core's blocking `take()` (the default
//!   TSC clock, `thread::sleep`, default timer slack): the OS floor.
//!
//! The async subjects run in one task on a 2-worker multi-thread runtime.
//! [`run_precise_depth`] runs `ours/precise` with several consumers sharing
//! the limiter (the HTTP delay rows' reference).
//!
//! # What is reported
//!
//! * **Achieved rate**: permits whose wait ended by the deadline, divided by
//!   the permits the quota allows in `length` (`rate · length + 1`), in
//!   percent.
//! * **Lateness**: each call's slot is replayed with the ideal burst-1 GCRA
//!   over the calls in order (`slot = max(call, previous slot + t)`), and
//!   lateness is wake − slot; p50 and p99 in microseconds.
//! * **CPU per permit**: user + system CPU time of the whole process (every
//!   thread: workers, the timer thread, the blocking thread) during the run,
//!   from `getrusage(RUSAGE_SELF)`, less what the process burns while idle
//!   (background threads of the bench, measured once over a sleep), divided
//!   by the permits taken.
//!
//! A consumer that wakes `δ` after a slot of period `t` loses `δ − t` when
//! `δ > t` (burst 1 gives no catch-up): the achieved rate is the measure of
//! the wake-up's precision.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use limiter_async::{AsyncLimiter, WakeUp};
use limiter_core::{Quota, RateLimiter};
use tokio::runtime::Runtime;

/// The subjects, in the order they are reported.
pub const SUBJECTS: [&str; 5] = [
    "ours/timer",
    "ours/precise",
    "governor",
    "leaky_bucket",
    "blocking",
];

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Paced {
    /// Permits a second asked for.
    pub rate: u32,
    /// Achieved rate, percent of the configured one.
    pub achieved_pct: f64,
    /// Median lateness after the slot, microseconds.
    pub p50_late_us: f64,
    /// 99th percentile lateness, microseconds.
    pub p99_late_us: f64,
    /// Process CPU time per permit taken, microseconds.
    pub cpu_us_per_permit: f64,
}

/// User + system CPU time of this process so far.
fn cpu_time() -> Duration {
    // Safety: `getrusage` only writes the `rusage` we pass, which is a
    // plain-old-data struct for which all-zero bytes are a valid value.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Loops `op` from `start` until `start + length`; returns (call, woke)
/// pairs.
async fn drive_async<F, Fut>(start: Instant, length: Duration, mut op: F) -> Vec<(Instant, Instant)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let deadline = start + length;
    let mut calls = Vec::with_capacity(1 << 16);
    loop {
        let called = Instant::now();
        if called >= deadline {
            return calls;
        }
        op().await;
        calls.push((called, Instant::now()));
    }
}

/// The CPU the process burns while idle, in CPU seconds per second: the
/// background threads of the run (the coarse clocks' updaters, idle tokio
/// workers) measured over `length` of sleep, to be taken off each run's CPU.
pub fn idle_cpu_per_second(length: Duration) -> f64 {
    let before = cpu_time();
    let start = Instant::now();
    std::thread::sleep(length);
    cpu_time().saturating_sub(before).as_secs_f64() / start.elapsed().as_secs_f64()
}

/// Measures one subject at `rate` for `length`; `idle` (from
/// [`idle_cpu_per_second`]) is taken off its CPU time.
pub fn run(rt: &Runtime, subject: &str, rate: u32, length: Duration, idle: f64) -> Paced {
    let quota = Quota::per_second(rate).expect("a valid pacing rate");
    let cpu_before = cpu_time();
    let start = Instant::now();
    let calls = match subject {
        "ours/timer" | "ours/precise" => {
            let wake = if subject == "ours/timer" {
                WakeUp::Timer
            } else {
                WakeUp::Precise
            };
            rt.block_on(async move {
                tokio::spawn(async move {
                    let limiter = AsyncLimiter::new(quota).with_wake_up(wake);
                    drive_async(start, length, || {
                        let limiter = limiter.clone();
                        async move { limiter.take().await.expect("in range") }
                    })
                    .await
                })
                .await
                .expect("pacing task")
            })
        }
        "governor" => rt.block_on(async move {
            tokio::spawn(async move {
                let limiter = governor::RateLimiter::direct(
                    governor::Quota::per_second(nz(rate)).allow_burst(nz(1)),
                );
                drive_async(start, length, || limiter.until_ready()).await
            })
            .await
            .expect("pacing task")
        }),
        "leaky_bucket" => rt.block_on(async move {
            tokio::spawn(async move {
                let limiter = leaky_bucket::RateLimiter::builder()
                    .max(1)
                    .initial(1)
                    .refill((rate as usize / 1_000).max(1))
                    .interval(Duration::from_millis(1))
                    .build();
                drive_async(start, length, || limiter.acquire_one()).await
            })
            .await
            .expect("pacing task")
        }),
        "blocking" => std::thread::spawn(move || {
            let limiter = RateLimiter::new(quota);
            let deadline = start + length;
            let mut calls = Vec::with_capacity(1 << 16);
            loop {
                let called = Instant::now();
                if called >= deadline {
                    return calls;
                }
                limiter.take().expect("in range");
                calls.push((called, Instant::now()));
            }
        })
        .join()
        .expect("pacing thread"),
        other => panic!("unknown pacing subject {other}"),
    };
    finish(rate, start, length, &calls, cpu_before, idle)
}

/// `AsyncLimiter::take()` with the precise wake-up at `rate`, burst 1,
/// drained by `consumers` tasks sharing the limiter for `length`: with two
/// or more, a take is always queued behind the one being woken, as
/// requests are behind a held one in a delay queue (the HTTP delay rows
/// compare against this at the same depth). Lateness is replayed over all
/// calls in call order.
pub fn run_precise_depth(
    rt: &Runtime,
    rate: u32,
    length: Duration,
    idle: f64,
    consumers: usize,
) -> Paced {
    let quota = Quota::per_second(rate).expect("a valid pacing rate");
    let cpu_before = cpu_time();
    let start = Instant::now();
    let mut calls = rt.block_on(async move {
        let limiter = AsyncLimiter::new(quota).with_wake_up(WakeUp::Precise);
        let tasks: Vec<_> = (0..consumers.max(1))
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    drive_async(start, length, || {
                        let limiter = limiter.clone();
                        async move { limiter.take().await.expect("in range") }
                    })
                    .await
                })
            })
            .collect();
        let mut calls = Vec::new();
        for task in tasks {
            calls.extend(task.await.expect("pacing task"));
        }
        calls
    });
    calls.sort_unstable_by_key(|&(called, _)| called);
    finish(rate, start, length, &calls, cpu_before, idle)
}

/// The report of a run that began at `start` with the process's CPU time
/// at `cpu_before`: its CPU less the background's (`idle`), summarized.
fn finish(
    rate: u32,
    start: Instant,
    length: Duration,
    calls: &[(Instant, Instant)],
    cpu_before: Duration,
    idle: f64,
) -> Paced {
    let t = Quota::per_second(rate)
        .expect("a valid pacing rate")
        .period();
    let busy = cpu_time().saturating_sub(cpu_before);
    let background = Duration::from_secs_f64(idle * start.elapsed().as_secs_f64());
    summarize(
        rate,
        t,
        start,
        length,
        calls,
        busy.saturating_sub(background),
    )
}

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("non-zero")
}

/// Each wake-up's lateness after its ideal burst-1 slot, microseconds, in
/// call order: `slot = max(call, previous slot + t)`.
fn lateness_us(t: Duration, start: Instant, calls: &[(Instant, Instant)]) -> Vec<f64> {
    let ns = |i: Instant| i.saturating_duration_since(start).as_nanos() as f64;
    let t_ns = t.as_nanos() as f64;
    let mut next = f64::MIN;
    calls
        .iter()
        .map(|&(called, woke)| {
            let slot = ns(called).max(next);
            next = slot + t_ns;
            (ns(woke) - slot).max(0.0) / 1e3
        })
        .collect()
}

/// The report of one run from its (call, woke) pairs.
fn summarize(
    rate: u32,
    t: Duration,
    start: Instant,
    length: Duration,
    calls: &[(Instant, Instant)],
    cpu: Duration,
) -> Paced {
    let deadline = start + length;
    let woken = calls.iter().filter(|(_, w)| *w <= deadline).count() as f64;
    let allowed = (length.as_nanos() / t.as_nanos()) as f64 + 1.0;
    let mut late = lateness_us(t, start, calls);
    late.sort_by(f64::total_cmp);
    let at = |q: f64| {
        late.get(((late.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    Paced {
        rate,
        achieved_pct: woken / allowed * 100.0,
        p50_late_us: at(0.50),
        p99_late_us: at(0.99),
        cpu_us_per_permit: cpu.as_secs_f64() * 1e6 / (calls.len().max(1) as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_counts_only_lateness_past_each_ideal_slot() {
        // t = 1 ms; calls at 0, 0.5 (woken 1.2), 1.2 (woken 2.0) ms.
        let start = Instant::now();
        let at = |us: u64| start + Duration::from_micros(us);
        let calls = [(at(0), at(0)), (at(500), at(1_200)), (at(1_200), at(2_000))];
        let paced = summarize(
            1_000,
            Duration::from_millis(1),
            start,
            Duration::from_millis(2),
            &calls,
            Duration::from_micros(30),
        );
        // Slots 0, 1, 2 ms: lateness 0, 200, 0 µs.
        assert_eq!(
            lateness_us(Duration::from_millis(1), start, &calls),
            [0.0, 200.0, 0.0]
        );
        assert_eq!(paced.achieved_pct, 100.0);
        assert_eq!(paced.cpu_us_per_permit, 10.0);
    }
}
