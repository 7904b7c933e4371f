//! The sizes the README and the docs state, measured: a `RateLimiter` is one
//! 128-byte block on any of the crate's clocks (the quota table of hot
//! changes and the refund table come later, from the first change or
//! cancellation), a keyed limiter's cell 16 bytes, its quota record 24.

#![cfg(target_pointer_width = "64")]

use core::mem::{align_of, size_of};
use core::time::Duration;

use limiter_core::{
    ManualClock, MonotonicClock, Quota, RateLimiter, cell::CellQuota, cell::GcraCell,
    clock::CoarseClock, clock::TscClock,
};

#[test]
fn a_rate_limiter_is_one_128_byte_block_on_every_clock() {
    assert_eq!(size_of::<RateLimiter>(), 128);
    assert_eq!(size_of::<RateLimiter<TscClock>>(), 128);
    assert_eq!(size_of::<RateLimiter<MonotonicClock>>(), 128);
    assert_eq!(size_of::<RateLimiter<CoarseClock>>(), 128);
    assert_eq!(size_of::<RateLimiter<ManualClock>>(), 128);
    // Aligned to the block: no neighbour shares its cache lines.
    assert_eq!(align_of::<RateLimiter>(), 128);
}

#[test]
fn a_keyed_cell_is_16_bytes_and_its_quota_record_24() {
    assert_eq!(size_of::<GcraCell>(), 16);
    assert_eq!(size_of::<CellQuota>(), 24);
}

#[test]
fn quota_changes_and_cancellations_work_from_the_compact_limiter() {
    // The table these allocate on first use behaves as the limiter's own.
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Quota::per_second(10).unwrap(), clock.clone());
    limiter.try_acquire().unwrap();
    let first = limiter.reserve_n(1, Duration::MAX).unwrap(); // slot at 100 ms
    let _second = limiter.reserve_n(1, Duration::MAX).unwrap(); // slot at 200 ms
    assert!(limiter.cancel(first), "not the last: its slot is refunded");
    let next = limiter.reserve_n(1, Duration::MAX).unwrap();
    assert_eq!(
        next.wait(),
        Duration::from_millis(100),
        "the refunded slot, reused"
    );
    limiter.set_quota(Quota::per_second(20).unwrap());
    assert_eq!(limiter.quota(), Quota::per_second(20).unwrap());
    clock.advance(Duration::from_secs(1));
    assert_eq!(limiter.available(), 1, "the burst of the new quota");
}
