//! Multi-threaded stress test of the window guarantee: threads acquire (and
//! reserve slots ahead) while another thread moves a shared `ManualClock`
//! forward; every admission is recorded with its slot (`ready_at`, the time
//! the limiter decided at, or the future slot it claimed). Afterwards no
//! window `[a, b]` of slots may hold more than `burst + floor((b − a)/t)`
//! permits.
//!
//! Workers also hold some reservations for a while and cancel about half of
//! them, in any order, so refunds of slots cancelled out of order are handed
//! to other threads' reservations concurrently; a cancelled reservation is
//! not an admission, and the refunds it feeds must not break the bound.
//!
//! The schedule differs from run to run, the invariant does not: it follows
//! from every admission being one CAS in a single total order (see
//! `docs/verification.md`), and every refund being a slot the schedule had
//! already admitted, whatever the interleaving.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use limiter_core::{Clock, ManualClock, Quota, RateLimiter};

const T: u64 = 7;
const BURST: u32 = 5;

/// Checks every window `[slots[i], slots[j]]` of the sorted `(slot,
/// permits)` list: at most `burst + floor((b − a)/t)` permits.
fn assert_no_window_exceeds(mut slots: Vec<(u64, u32)>) {
    slots.sort_unstable();
    for i in 0..slots.len() {
        let mut permits = 0u64;
        for j in i..slots.len() {
            permits += u64::from(slots[j].1);
            let (a, b) = (slots[i].0, slots[j].0);
            let allowed = u64::from(BURST) + (b - a) / T;
            assert!(
                permits <= allowed,
                "{permits} permits in [{a}, {b}], the quota allows {allowed}"
            );
        }
    }
}

#[test]
fn no_window_admits_more_than_the_quota() {
    // Under miri: fewer threads and a much shorter run (it interprets).
    let (threads, end) = if cfg!(miri) { (2, 40) } else { (4, 20_000) };
    let quota = Quota::from_nanos(T, BURST).unwrap();
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(quota, clock.clone());
    let done = AtomicBool::new(false);
    let attempts = AtomicU64::new(0);
    let slots: Vec<(u64, u32)> = std::thread::scope(|s| {
        s.spawn(|| {
            // One thread moves time forward, 1 to 3 ns at a time, each time
            // after the workers made about one attempt each, so the
            // acquisitions spread over the whole run.
            let mut step = 1;
            let mut seen = 0;
            while clock.now() < end {
                let now_attempts = attempts.load(Ordering::Relaxed);
                if now_attempts < seen + u64::from(threads) {
                    std::thread::yield_now();
                    continue;
                }
                seen = now_attempts;
                clock.advance(Duration::from_nanos(step));
                step = step % 3 + 1;
            }
            done.store(true, Ordering::Release);
        });
        let workers: Vec<_> = (0..threads)
            .map(|id: u32| {
                let limiter = &limiter;
                let (done, attempts) = (&done, &attempts);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    let mut held = Vec::new();
                    let mut k = 0u32;
                    while !done.load(Ordering::Acquire) {
                        k = k.wrapping_add(1);
                        attempts.fetch_add(1, Ordering::Relaxed);
                        // Mix plain tries, multi-permit tries and reservations
                        // up to four periods ahead, some of them held.
                        let n = 1 + (k + id) % 2;
                        let max_wait = if k.is_multiple_of(3) { 4 * T } else { 0 };
                        match limiter.reserve_n(n, Duration::from_nanos(max_wait)) {
                            Ok(r) if r.wait() > Duration::ZERO && !k.is_multiple_of(4) => {
                                held.push(r)
                            }
                            Ok(r) => mine.push((r.ready_at(), r.permits())),
                            Err(_) => {}
                        }
                        // Now and then settle a held one, oldest or newest:
                        // cancel it, or keep it (its permits are used).
                        if held.len() > 3 || (k.is_multiple_of(5) && !held.is_empty()) {
                            let r = if k.is_multiple_of(2) {
                                held.remove(0)
                            } else {
                                held.pop().expect("not empty")
                            };
                            let slot = (r.ready_at(), r.permits());
                            // A refused cancel leaves the permits spent:
                            // counting them as admitted is the strict check.
                            if k.is_multiple_of(3) || !limiter.cancel(r) {
                                mine.push(slot);
                            }
                        }
                        // Leave the clock thread a core now and then (the
                        // machine may have fewer cores than threads).
                        std::thread::yield_now();
                    }
                    mine.extend(held.iter().map(|r| (r.ready_at(), r.permits())));
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(!slots.is_empty());
    let total: u64 = slots.iter().map(|s| u64::from(s.1)).sum();
    let (first, last) = (
        slots.iter().map(|s| s.0).min().unwrap(),
        slots.iter().map(|s| s.0).max().unwrap(),
    );
    assert!(total <= u64::from(BURST) + (last - first) / T);
    assert_no_window_exceeds(slots);
}

#[test]
fn the_window_check_catches_an_over_admission() {
    // The checker itself: burst + 1 permits at one instant must fail it.
    let over: Vec<(u64, u32)> = (0..=BURST).map(|_| (100, 1)).collect();
    let caught = std::panic::catch_unwind(|| assert_no_window_exceeds(over));
    assert!(caught.is_err());
    // ...and a paced schedule passes: the burst at 0, then one per t.
    let paced: Vec<(u64, u32)> = (0..BURST)
        .map(|_| (0, 1))
        .chain((1..50).map(|k| (k * T, 1)))
        .collect();
    assert_no_window_exceeds(paced);
}
