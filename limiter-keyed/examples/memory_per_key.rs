//! Measures the resident memory per key of a `KeyedLimiter<u64>` holding
//! 1,000,000 limited keys, from the process's resident set (Linux
//! `/proc/self/statm`), next to the layout it replaced: the same entry
//! (cell and quota, 24 bytes) inline in a `DashMap`.
//!
//! Also prints what an empty limiter with the default `max_keys` holds (its
//! map is presized).
//!
//! Run: `cargo run --release -p limiter-keyed --example memory_per_key [keyed|dashmap]`

use limiter_core::{ManualClock, Quota, cell::GcraCell};
use limiter_keyed::KeyedLimiter;

const KEYS: u64 = 1_000_000;

/// Resident bytes, or 0 where `/proc/self/statm` does not exist.
fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "keyed".into());
    let quota = Quota::per_second(1).expect("valid quota");
    let empty_before = resident();
    let empty = KeyedLimiter::<u64>::new(quota);
    println!(
        "an empty KeyedLimiter<u64> (default max_keys): {} KB resident",
        (resident() - empty_before) >> 10
    );
    drop(empty);
    let before = resident();
    let held: Box<dyn std::any::Any> = match which.as_str() {
        "dashmap" => {
            let map = dashmap::DashMap::<u64, (GcraCell, Quota)>::new();
            for k in 0..KEYS {
                let _ = map
                    .entry(k)
                    .or_insert_with(|| (GcraCell::new(), quota))
                    .0
                    .try_acquire_n(quota, 0, 1);
            }
            Box::new(map)
        }
        _ => {
            let limiter = KeyedLimiter::builder(quota)
                .max_keys(KEYS as usize)
                .clock(ManualClock::new())
                .build()
                .expect("valid builder");
            for k in 0..KEYS {
                limiter.try_acquire(&k).expect("a new key is admitted");
            }
            assert_eq!(limiter.len(), KEYS as usize);
            Box::new(limiter)
        }
    };
    let after = resident();
    println!(
        "{which}: {} bytes per key ({} keys, {} MB resident growth)",
        (after - before) / KEYS,
        KEYS,
        (after - before) >> 20
    );
    drop(held);
}
