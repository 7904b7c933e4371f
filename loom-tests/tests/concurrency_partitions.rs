//! limiter-concurrency's partition word under loom: with strict shares of
//! 1 + 1 of a limit of 2, the partition below its share is always admitted
//! and the global limit always holds; a per-partition counter checked
//! beside a global one (the check-then-act design of a partitioned limiter
//! that keeps them apart) is caught exceeding the global limit.
#![cfg(loom)]

use std::sync::Arc;

use limiter_concurrency::PartitionedLimiter;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::thread;
use loom_tests::check;

#[test]
fn partitions_never_exceed_the_global_limit_and_keep_their_reserve() {
    check(
        "concurrency: partitions 2 x p0 vs p1, limit 2",
        &["p1 admitted"],
        || {
            let l = Arc::new(PartitionedLimiter::with_reserve(2, &[0.5, 0.5], 1.0).unwrap());
            let holders = Arc::new(AtomicU32::new(0));
            let p0: Vec<_> = (0..2)
                .map(|_| {
                    let (l, holders) = (l.clone(), holders.clone());
                    thread::spawn(move || {
                        if let Ok(p) = l.try_acquire(0) {
                            let before = holders.fetch_add(1, Ordering::SeqCst);
                            assert!(before < 2, "over-admission");
                            holders.fetch_sub(1, Ordering::SeqCst);
                            drop(p);
                        }
                    })
                })
                .collect();
            let p1 = l
                .try_acquire(1)
                .expect("below its reserve: always admitted");
            let before = holders.fetch_add(1, Ordering::SeqCst);
            assert!(before < 2, "over-admission");
            holders.fetch_sub(1, Ordering::SeqCst);
            drop(p1);
            for t in p0 {
                t.join().unwrap();
            }
            assert_eq!(l.in_flight(), 0);
            "p1 admitted".into()
        },
    );
}

/// BROKEN: a partition counter and a global counter, each checked and then
/// incremented on its own.
#[derive(Debug, Default)]
struct SplitCounters {
    global: AtomicU32,
    partition: [AtomicU32; 2],
}

impl SplitCounters {
    fn try_acquire(&self, i: usize, share: u32, limit: u32) -> bool {
        if self.partition[i].load(Ordering::SeqCst) >= share
            && self.global.load(Ordering::SeqCst) >= limit
        {
            return false;
        }
        if self.global.load(Ordering::SeqCst) >= limit {
            return false;
        }
        self.partition[i].fetch_add(1, Ordering::SeqCst);
        self.global.fetch_add(1, Ordering::SeqCst);
        true
    }
}

#[test]
#[should_panic(expected = "over-admission")]
fn separate_partition_and_global_counters_are_caught() {
    check("BROKEN split partition counters", &[], || {
        let c = Arc::new(SplitCounters::default());
        let t: Vec<_> = (0..2)
            .map(|i| {
                let c = c.clone();
                thread::spawn(move || c.try_acquire(i, 1, 1))
            })
            .collect();
        let admitted = t
            .into_iter()
            .filter(|_| true)
            .map(|t| t.join().unwrap())
            .filter(|&b| b)
            .count();
        assert!(admitted <= 1, "over-admission: {admitted} of a limit of 1");
        String::new()
    });
}
