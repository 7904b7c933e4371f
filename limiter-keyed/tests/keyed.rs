//! The public contract of `KeyedLimiter`, with a manual clock and exact
//! expectations.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use limiter_core::{AcquireError, ManualClock, Quota, QuotaError};
use limiter_keyed::{KeyedError, KeyedLimiter, WhenFull};

const MS: Duration = Duration::from_millis(1);

fn quota(per_second: u32, burst: u32) -> Quota {
    Quota::per_second(per_second)
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

fn limited(wait: Duration) -> Result<(), KeyedError> {
    Err(KeyedError::Limited(AcquireError::RateLimited { wait }))
}

fn keyed<K: std::hash::Hash + Eq + Clone + Send + Sync>(
    q: Quota,
    max_keys: usize,
    when_full: WhenFull,
) -> (KeyedLimiter<K, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let l = KeyedLimiter::builder(q)
        .max_keys(max_keys)
        .when_full(when_full)
        .clock(clock.clone())
        .build()
        .unwrap();
    (l, clock)
}

#[test]
fn each_key_has_its_own_exact_state() {
    let (l, clock) = keyed::<&str>(quota(10, 2), 100, WhenFull::RejectNewKeys);
    assert_eq!(l.try_acquire_n(&"alice", 2), Ok(()));
    assert_eq!(l.try_acquire(&"alice"), limited(100 * MS));
    assert_eq!(l.available(&"bob"), 2, "an unseen key is full");
    assert_eq!(l.try_acquire(&"bob"), Ok(()));
    assert_eq!(l.available(&"bob"), 1);
    clock.advance(60 * MS);
    assert_eq!(l.try_acquire(&"alice"), limited(40 * MS));
    assert_eq!(l.try_acquire(&"bob"), Ok(()));
    assert_eq!(l.try_acquire(&"bob"), limited(40 * MS));
    assert_eq!(
        l.try_acquire_n(&"carol", 3),
        Err(KeyedError::Limited(AcquireError::InsufficientCapacity {
            requested: 3,
            burst: 2
        }))
    );
    assert_eq!(l.len(), 2, "carol's refusal left no state");
}

#[test]
fn overrides_and_reservations_are_per_key() {
    let clock = ManualClock::new();
    let l = KeyedLimiter::builder(quota(10, 1))
        .quota_for("vip", quota(100, 5))
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(l.quota_of(&"vip").burst(), 5);
    assert_eq!(l.try_acquire_n(&"vip", 5), Ok(()));
    assert_eq!(l.try_acquire(&"vip"), limited(10 * MS));
    let r = l.reserve_n(&"anon", 1, Duration::ZERO).unwrap();
    let next = l.reserve_n(&"anon", 1, Duration::from_secs(1)).unwrap();
    assert_eq!(next.wait(), 100 * MS);
    // A later reservation depends on `r`: its slot (now) becomes a refund,
    // which the next reservation of the key takes.
    assert!(l.cancel(&"anon", r));
    assert_eq!(
        l.reserve_n(&"anon", 1, Duration::ZERO).map(|r| r.wait()),
        Ok(Duration::ZERO)
    );
    assert!(l.cancel(&"anon", next));
    assert_eq!(
        l.reserve_n(&"anon", 1, 99 * MS),
        Err(KeyedError::Limited(AcquireError::RateLimited {
            wait: 100 * MS
        }))
    );
}

#[test]
fn a_full_limiter_rejects_new_keys_but_never_forgets_a_limited_one() {
    let (l, clock) = keyed::<u32>(quota(10, 1), 2, WhenFull::RejectNewKeys);
    assert_eq!(l.try_acquire(&1), Ok(())); // idle again at 100 ms
    clock.advance(50 * MS);
    assert_eq!(l.try_acquire(&2), Ok(())); // idle again at 150 ms
    assert_eq!(
        l.try_acquire(&3),
        Err(KeyedError::TooManyKeys { max_keys: 2 })
    );
    clock.advance(50 * MS); // t = 100 ms: key 1 is idle, key 2 is not
    assert_eq!(l.try_acquire(&3), Ok(()));
    assert_eq!(l.len(), 2);
    // Key 2 kept its debt: 50 ms to go.
    assert_eq!(l.try_acquire(&2), limited(50 * MS));
    // Key 1 was forgotten, which loses nothing: it was full.
    assert_eq!(
        l.try_acquire(&4),
        Err(KeyedError::TooManyKeys { max_keys: 2 })
    );
    assert_eq!(l.available(&1), 1);
    // Two refusals; the idle key swept for key 3 was not an eviction.
    assert_eq!((l.new_keys_refused(), l.evictions()), (2, 0));
}

#[test]
fn evict_least_recent_forgets_the_smallest_debt() {
    let (l, clock) = keyed::<u32>(quota(10, 1), 2, WhenFull::EvictLeastRecent);
    assert_eq!(l.try_acquire(&1), Ok(())); // tat 100 ms
    clock.advance(50 * MS);
    assert_eq!(l.try_acquire(&2), Ok(())); // tat 150 ms
    assert_eq!(l.try_acquire(&3), Ok(()), "key 1 is evicted");
    assert_eq!(l.len(), 2);
    assert_eq!(l.try_acquire(&2), limited(100 * MS), "key 2 remembered");
    // Key 1 comes back full (its 50 ms of debt forgotten), evicting key 2.
    assert_eq!(l.try_acquire(&1), Ok(()));
    assert_eq!(l.len(), 2);
    assert_eq!((l.evictions(), l.new_keys_refused()), (2, 0));
}

#[test]
fn the_pressure_counters_count_evictions_and_refusals_only() {
    // Evicting, the clock standing still: every new key past the cap
    // evicts exactly one limited key.
    let (l, clock) = keyed::<u64>(quota(10, 1), 100, WhenFull::EvictLeastRecent);
    for key in 0..100 {
        assert_eq!(l.try_acquire(&key), Ok(()));
    }
    assert_eq!(l.evictions(), 0, "below the cap nothing is evicted");
    for key in 100..1_100 {
        assert_eq!(l.try_acquire(&key), Ok(()));
    }
    assert_eq!(l.evictions(), 1_000);
    // An existing key (the last one in), refused, evicts nothing.
    assert!(l.try_acquire(&1_099).is_err());
    assert_eq!(l.evictions(), 1_000);
    // Every key idle: room comes from the sweep, which is no eviction.
    clock.advance(100 * MS);
    for key in 2_000..2_100 {
        assert_eq!(l.try_acquire(&key), Ok(()));
    }
    assert_eq!((l.evictions(), l.new_keys_refused()), (1_000, 0));

    // Rejecting: each new key past the cap is one refusal, none evicted.
    let (l, clock) = keyed::<u64>(quota(10, 1), 100, WhenFull::RejectNewKeys);
    let admitted = (0..1_100u64).filter(|k| l.try_acquire(k).is_ok()).count();
    assert_eq!(admitted, 100);
    assert_eq!((l.new_keys_refused(), l.evictions()), (1_000, 0));
    clock.advance(100 * MS);
    for key in 2_000..2_100 {
        assert_eq!(l.try_acquire(&key), Ok(()));
    }
    assert_eq!(l.new_keys_refused(), 1_000, "idle keys made room");
}

#[test]
fn a_million_distinct_keys_keep_the_map_bounded() {
    // Rejecting: each key is idle 1 ms after its permit; the clock moves
    // 1 ms every 1,000 keys, so about a thousand keys are live at once.
    let (l, clock) = keyed::<u64>(quota(1_000, 1), 5_000, WhenFull::RejectNewKeys);
    let mut refused = 0;
    for key in 0..1_000_000u64 {
        if key % 1_000 == 0 {
            clock.advance(MS);
        }
        match l.try_acquire(&key) {
            Ok(()) => {}
            Err(KeyedError::TooManyKeys { .. }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
        assert!(l.len() <= 5_000);
    }
    assert_eq!(refused, 0, "idle keys always made room");

    // Evicting, with the clock standing still: no key is ever idle, every
    // new key is admitted, and the map still never grows past the cap.
    let (l, _clock) = keyed::<u64>(quota(1, 1), 5_000, WhenFull::EvictLeastRecent);
    for key in 0..1_000_000u64 {
        assert_eq!(l.try_acquire(&key), Ok(()));
        assert!(l.len() <= 5_000);
    }
    // Each new key takes the slot of the key it evicts.
    assert_eq!(l.len(), 5_000);

    // Rejecting with the clock standing still: exactly the cap is admitted.
    let (l, _clock) = keyed::<u64>(quota(1, 1), 5_000, WhenFull::RejectNewKeys);
    let admitted = (0..1_000_000u64)
        .filter(|k| l.try_acquire(k).is_ok())
        .count();
    assert_eq!((admitted, l.len()), (5_000, 5_000));
}

#[test]
fn threads_on_one_key_share_its_burst_exactly() {
    let (l, _clock) = keyed::<&str>(quota(1, 100), 10, WhenFull::RejectNewKeys);
    let l = Arc::new(l);
    let admitted = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (l, admitted) = (Arc::clone(&l), Arc::clone(&admitted));
            std::thread::spawn(move || {
                for _ in 0..1_000 {
                    if l.try_acquire(&"shared").is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(admitted.load(Ordering::Relaxed), 100);
    assert_eq!(l.len(), 1);
}

#[test]
fn threads_on_their_own_keys_do_not_interfere() {
    let (l, _clock) = keyed::<u64>(quota(1, 100), 1_000, WhenFull::RejectNewKeys);
    let l = Arc::new(l);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let l = Arc::clone(&l);
            std::thread::spawn(move || {
                let mut mine = 0;
                for i in 0..1_000u64 {
                    // Own key 1,000 times, and 100 shared new keys on the way.
                    mine += usize::from(l.try_acquire(&t).is_ok());
                    if i % 10 == 0 {
                        let _ = l.try_acquire(&(1_000 + i));
                    }
                }
                mine
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 100);
    }
    assert_eq!(l.len(), 4 + 100);
}

#[test]
fn racing_new_keys_never_pass_the_cap() {
    let (l, _clock) = keyed::<u64>(quota(1, 1), 100, WhenFull::RejectNewKeys);
    let l = Arc::new(l);
    let admitted = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (l, admitted) = (Arc::clone(&l), Arc::clone(&admitted));
            std::thread::spawn(move || {
                for i in 0..1_000u64 {
                    if l.try_acquire(&(t * 1_000 + i)).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(admitted.load(Ordering::Relaxed), 100);
    assert_eq!(l.len(), 100);
}

#[test]
fn builder_and_manual_sweep() {
    assert!(matches!(
        KeyedLimiter::<u8>::builder(quota(1, 1)).max_keys(0).build(),
        Err(QuotaError::InvalidParameter {
            name: "max_keys",
            ..
        })
    ));
    let l = KeyedLimiter::<u8>::new(quota(1, 1));
    assert_eq!(l.max_keys(), limiter_keyed::KeyedLimiter::DEFAULT_MAX_KEYS);
    assert!(l.is_empty());

    let (l, clock) = keyed::<u8>(quota(10, 1), 10, WhenFull::RejectNewKeys);
    for k in 0..5 {
        assert_eq!(l.try_acquire(&k), Ok(()));
    }
    assert_eq!(l.evict_idle(), 0);
    clock.advance(100 * MS);
    assert_eq!(l.evict_idle(), 5);
    assert!(l.is_empty());
}

#[test]
fn an_error_chain_tells_each_thing_once() {
    use std::error::Error;
    let errors = [
        KeyedError::Limited(AcquireError::RateLimited { wait: 100 * MS }),
        KeyedError::Limited(AcquireError::InsufficientCapacity {
            requested: 3,
            burst: 2,
        }),
        KeyedError::TooManyKeys { max_keys: 2 },
    ];
    for error in errors {
        let mut chain = vec![error.to_string()];
        let mut next = error.source();
        while let Some(e) = next {
            chain.push(e.to_string());
            next = e.source();
        }
        for (i, message) in chain.iter().enumerate() {
            for later in &chain[i + 1..] {
                assert!(
                    !later.contains(message.as_str()) && !message.contains(later.as_str()),
                    "the chain repeats itself: {chain:?}"
                );
            }
        }
        if let KeyedError::Limited(inner) = error {
            let told = chain
                .iter()
                .filter(|m| m.contains(&inner.to_string()))
                .count();
            assert_eq!(told, 1, "the refusal is told once: {chain:?}");
        }
    }
}

#[test]
fn a_stale_reservation_never_refunds_a_key_that_came_back() {
    let (l, _frozen) = keyed::<u32>(quota(10, 1), 1, WhenFull::EvictLeastRecent);
    let stale = l.reserve_n(&7, 1, Duration::ZERO).unwrap();
    assert_eq!(l.try_acquire(&8), Ok(()), "evicts key 7");
    assert_eq!(
        l.try_acquire(&7),
        Ok(()),
        "key 7 comes back full, in a new cell"
    );
    assert!(
        !l.cancel(&7, stale),
        "a reservation of the evicted cell refunded its successor"
    );
    assert_eq!(l.try_acquire(&7), limited(100 * MS));
}

#[test]
fn eviction_forgets_the_key_whose_debt_is_fewest_permits() {
    // Key 1: 1 permit/s, burst 1, one permit taken: tat = 1 s, 1 permit of
    // debt. Key 2: 1,000/s, burst 100, all taken: tat = 100 ms (earlier),
    // but 100 permits of debt. Forgetting key 1 gives away one permit;
    // forgetting key 2, a hundred.
    let clock = ManualClock::new();
    let l = KeyedLimiter::builder(quota(10, 1))
        .quota_for(1u32, quota(1, 1))
        .quota_for(2, quota(1_000, 100))
        .max_keys(2)
        .when_full(WhenFull::EvictLeastRecent)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(l.try_acquire(&1), Ok(()));
    assert_eq!(l.try_acquire_n(&2, 100), Ok(()));
    assert_eq!(l.try_acquire(&3), Ok(()));
    assert_eq!(l.len(), 2);
    assert_eq!(
        l.available(&2),
        0,
        "key 2 and its debt of 100 permits are kept"
    );
    assert_eq!(l.try_acquire(&2), limited(MS));
    assert_eq!(l.available(&1), 1, "key 1 was forgotten");
}

#[test]
fn evicting_threads_always_get_a_cell() {
    // Every key is new and the map holds one: each insertion must evict.
    let (l, _frozen) = keyed::<u64>(quota(1, 1), 1, WhenFull::EvictLeastRecent);
    let l = Arc::new(l);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let l = Arc::clone(&l);
            std::thread::spawn(move || {
                (0..10_000u64)
                    .filter(|i| l.try_acquire(&(t * 1_000_000 + i)).is_err())
                    .count()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 0, "a new key was refused under eviction");
    }
    assert!(l.len() <= 1);
}

#[test]
fn available_is_exactly_what_a_try_takes_near_the_span_limit() {
    let (l, clock) = keyed::<u32>(
        Quota::from_nanos(100, 3).unwrap(),
        10,
        WhenFull::RejectNewKeys,
    );
    assert_eq!(l.try_acquire(&1), Ok(()));
    let now = limiter_core::clock::MAX_SPAN - 50;
    clock.set(now);
    for key in [1, 2] {
        assert_eq!(l.available(&key), 0, "key {key}");
        assert_eq!(
            l.try_acquire(&key),
            Err(KeyedError::Limited(AcquireError::TimeOutOfRange { now })),
            "key {key}"
        );
    }
}

#[test]
fn a_clock_of_any_origin_counts_from_the_limiter_birth() {
    // A clock reading Unix time in nanoseconds (2027), past MAX_SPAN.
    let start = 1_800_000_000_000_000_000;
    let clock = ManualClock::starting_at(start);
    let l = KeyedLimiter::builder(quota(10, 2))
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(l.try_acquire_n(&"a", 2), Ok(()));
    assert_eq!(l.try_acquire(&"a"), limited(100 * MS));
    assert_eq!(l.available(&"b"), 2);
    let r = l.reserve_n(&"a", 1, Duration::from_secs(1)).unwrap();
    assert_eq!(r.wait(), 100 * MS);
    assert_eq!(r.ready_at(), start + 100_000_000, "a clock reading");
    assert!(l.cancel(&"a", r));
    clock.advance(100 * MS);
    assert_eq!(l.available(&"a"), 1);
    assert_eq!(l.try_acquire(&"a"), Ok(()));
}
