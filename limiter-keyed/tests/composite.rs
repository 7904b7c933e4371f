//! Keyed limits in composite decisions: a per-user and a per-route
//! `KeyedLimiter` with a global `RateLimiter`, all or nothing, with exact
//! values under a manual clock; a refused request leaves every part as it
//! was, and a key table that is full refuses as a part like any other.

use std::time::Duration;

use limiter_core::{
    AcquireError, ManualClock, Quota, RateLimiter, composite::Limit, composite::cancel_all,
    composite::reserve_all, composite::try_acquire_all,
};
use limiter_keyed::{KeyedError, KeyedLimiter, WhenFull};

#[test]
fn user_route_and_global_are_charged_together_or_not_at_all() {
    let clock = ManualClock::new();
    let per_user = KeyedLimiter::builder(Quota::per_second(2).unwrap().with_burst(2).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    let per_route = KeyedLimiter::builder(Quota::per_second(10).unwrap().with_burst(3).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    let global = RateLimiter::with_clock(
        Quota::per_second(100).unwrap().with_burst(4).unwrap(),
        clock.clone(),
    );
    let (alice, bob, search) = (
        per_user.limit("alice"),
        per_user.limit("bob"),
        per_route.limit("/search"),
    );
    let alice_parts: [(&dyn Limit<KeyedError>, u32); 3] = [(&alice, 1), (&search, 1), (&global, 1)];
    let bob_parts: [(&dyn Limit<KeyedError>, u32); 3] = [(&bob, 1), (&search, 1), (&global, 1)];
    try_acquire_all(&alice_parts).unwrap();
    try_acquire_all(&alice_parts).unwrap();
    // Alice is out: refused by her own limit, 500 ms, nothing else charged.
    let refused = try_acquire_all(&alice_parts).unwrap_err();
    assert_eq!(refused.index, 0);
    assert_eq!(
        refused.error,
        KeyedError::Limited(AcquireError::RateLimited {
            wait: Duration::from_millis(500)
        })
    );
    assert_eq!(
        (per_route.available(&"/search"), global.available()),
        (1, 2)
    );
    // Bob takes the route's last permit; then the route refuses him.
    try_acquire_all(&bob_parts).unwrap();
    let refused = try_acquire_all(&bob_parts).unwrap_err();
    assert_eq!((refused.index, refused.unrefunded), (1, 0));
    assert_eq!(
        refused.error.retry_after(),
        Some(Duration::from_millis(100))
    );
    assert_eq!((per_user.available(&"bob"), global.available()), (1, 1));
    // A reservation waits for the longest part: the route's 100 ms.
    let r = reserve_all(&bob_parts, Duration::from_millis(100)).unwrap();
    assert_eq!(r.wait(), Duration::from_millis(100));
    assert_eq!(global.available(), 0);
    assert!(cancel_all(&bob_parts, r));
    assert_eq!(
        (
            per_user.available(&"bob"),
            per_route.available(&"/search"),
            global.available()
        ),
        (1, 0, 1)
    );
}

#[test]
fn a_full_key_table_refuses_as_a_part() {
    let clock = ManualClock::new();
    let per_user = KeyedLimiter::builder(Quota::per_second(1).unwrap())
        .max_keys(1)
        .when_full(WhenFull::RejectNewKeys)
        .clock(clock.clone())
        .build()
        .unwrap();
    let global = RateLimiter::with_clock(
        Quota::per_second(10).unwrap().with_burst(5).unwrap(),
        clock.clone(),
    );
    let first = per_user.limit("first");
    try_acquire_all(&[(&global as &dyn Limit<KeyedError>, 1), (&first, 1)]).unwrap();
    let second = per_user.limit("second");
    let refused =
        try_acquire_all(&[(&global as &dyn Limit<KeyedError>, 2), (&second, 1)]).unwrap_err();
    assert_eq!(
        (refused.index, refused.error),
        (1, KeyedError::TooManyKeys { max_keys: 1 })
    );
    assert_eq!(refused.unrefunded, 0);
    assert_eq!(global.available(), 4); // the two global permits were given back
}
