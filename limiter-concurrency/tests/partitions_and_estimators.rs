//! Partitions through the public API, and permits feeding an estimator.

use std::time::Duration;

use limiter_concurrency::partition::PartitionRefusal;
use limiter_concurrency::{
    Aimd, Bounds, ConcurrencyLimiter, ConfigError, Outcome, PartitionedLimiter,
};

#[test]
fn reserves_are_kept_and_the_rest_of_an_idle_share_is_lent() {
    // live 90 %, batch 10 % of 20: shares 18 and 2, reserves (half) 9 and 1.
    let l = PartitionedLimiter::new(20, &[0.9, 0.1]).unwrap();
    assert_eq!((l.guaranteed(0), l.guaranteed(1)), (18, 2));
    assert_eq!((l.reserved(0), l.reserved(1)), (9, 1));
    // Batch alone borrows live's idle share down to live's reserve.
    let batch: Vec<_> = (0..11).map(|_| l.try_acquire(1).unwrap()).collect();
    assert!(matches!(
        l.try_acquire(1),
        Err(PartitionRefusal::NoPermit(_))
    ));
    // Live gets its reserve at once, however much batch borrowed.
    let live: Vec<_> = (0..9).map(|_| l.try_acquire(0).unwrap()).collect();
    assert_eq!(l.in_flight(), 20);
    assert!(
        l.try_acquire(0).is_err(),
        "global limit full; nothing is revoked"
    );
    drop(batch);
    // Batch released: live takes the rest of its share and borrows beyond
    // it, down to batch's reserve of 1.
    let more: Vec<_> = (0..10).map(|_| l.try_acquire(0).unwrap()).collect();
    assert_eq!(l.partition_in_flight(0), 19);
    assert!(l.try_acquire(0).is_err());
    assert!(l.try_acquire(1).is_ok(), "batch's reserve was kept for it");
    drop((live, more));
    assert_eq!(
        l.try_acquire(2).err(),
        Some(PartitionRefusal::UnknownPartition(2))
    );
}

#[test]
fn strict_shares_lend_nothing() {
    let l = PartitionedLimiter::with_reserve(20, &[0.9, 0.1], 1.0).unwrap();
    let batch: Vec<_> = (0..2).map(|_| l.try_acquire(1).unwrap()).collect();
    assert!(l.try_acquire(1).is_err());
    drop(batch);
    let live: Vec<_> = (0..18).map(|_| l.try_acquire(0).unwrap()).collect();
    assert!(l.try_acquire(0).is_err());
    drop(live);
    assert!(PartitionedLimiter::with_reserve(20, &[1.0], 1.5).is_err());
}

#[test]
fn partition_configuration_errors_are_typed() {
    assert_eq!(
        PartitionedLimiter::new(10, &[0.9, 0.2]).err(),
        Some(ConfigError::PartitionShares { sum: 0.9 + 0.2 })
    );
    assert!(matches!(
        PartitionedLimiter::new(10, &[]),
        Err(ConfigError::PartitionCount { count: 0 })
    ));
    assert!(matches!(
        PartitionedLimiter::new(10, &[f64::NAN]),
        Err(ConfigError::OutOfRange { .. })
    ));
    assert!(matches!(
        PartitionedLimiter::new(0, &[1.0]),
        Err(ConfigError::ZeroLimit { .. })
    ));
    assert!(matches!(
        PartitionedLimiter::new(1 << 24, &[1.0]),
        Err(ConfigError::PartitionedLimitTooLarge { .. })
    ));
}

#[test]
fn a_limit_cut_revokes_nothing_in_a_partitioned_limiter() {
    let l = PartitionedLimiter::new(10, &[0.5, 0.5]).unwrap();
    let held: Vec<_> = (0..5).map(|_| l.try_acquire(0).unwrap()).collect();
    assert_eq!(l.set_limit(4), Ok(10));
    assert_eq!(l.in_flight(), 5);
    // Partition 1 is below its new reserve of 1, but the limit is full
    // (a cut is drained, never enforced by revocation).
    assert!(l.try_acquire(1).is_err());
    drop(held);
    assert_eq!(l.try_acquire(1).map(|p| p.partition()).ok(), Some(1));
}

#[test]
fn finished_permits_move_the_limit_through_the_estimator() {
    let aimd = Aimd::new(Bounds::new(10, 2, 100).unwrap())
        .backoff(0.5)
        .unwrap();
    let l = ConcurrencyLimiter::adaptive(aimd).build().unwrap();
    assert!(l.is_adaptive());
    let p = l.try_acquire().unwrap();
    p.finish(Outcome::Dropped(Duration::from_millis(3)));
    assert_eq!(l.limit(), 5);
    // An ignored outcome, or a plain drop, is no signal.
    l.try_acquire().unwrap().finish(Outcome::Ignore);
    drop(l.try_acquire().unwrap());
    assert_eq!(l.limit(), 5);
    assert_eq!(l.in_flight(), 0);
}

#[test]
fn estimator_bounds_are_checked() {
    assert_eq!(
        Bounds::new(5, 10, 20).err(),
        Some(ConfigError::InitialOutOfBounds {
            initial: 5,
            min: 10,
            max: 20
        })
    );
    assert_eq!(
        Bounds::new(5, 30, 20).err(),
        Some(ConfigError::MinAboveMax { min: 30, max: 20 })
    );
    assert_eq!(
        Bounds::new(5, 0, 20).err(),
        Some(ConfigError::ZeroLimit { name: "min_limit" })
    );
    assert!(Bounds::new(5, 1, u32::MAX).is_err());
}

#[test]
fn a_forgotten_permit_stays_held() {
    let l = ConcurrencyLimiter::new(2).unwrap();
    l.try_acquire().unwrap().forget();
    assert_eq!(l.in_flight(), 1);
    l.try_acquire_owned().unwrap().forget();
    assert_eq!(l.in_flight(), 2);
    // Both are held for good: nothing more is admitted, and a raise is
    // what it takes to admit again.
    assert!(l.try_acquire().is_err());
    l.set_limit(3).unwrap();
    drop(l.try_acquire().unwrap());
    assert_eq!(l.in_flight(), 2);
}
