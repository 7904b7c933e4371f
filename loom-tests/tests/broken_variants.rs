//! Deliberately broken variants of the limiter's atomic protocols, compiled
//! only for these checks, that the scenarios the real limiter passes must
//! catch (`#[should_panic]`): proof that the harness has teeth.
//!
//! Both make exactly the real limiter's decisions (`limiter_core::__loom`
//! exposes the pure GCRA functions under `cfg(loom)`) and differ only in the
//! protocol:
//!
//! * [`LoadStore`]: the state word is read with a load and written with a
//!   plain store instead of a CAS, so two threads can both decide on the same
//!   `tat` and both be admitted;
//! * a keyed cell's move to a new shared quota without its `LOCKED` step
//!   (`limiter_core::__loom::BROKEN_MOVE`);
//! * [`SplitQuota`]: a correct CAS on `tat`, but the quota lives in its own
//!   atomics instead of behind a generation in the state word, so a decision
//!   can pass its CAS on a `tat` that a quota change left unchanged (an idle
//!   limiter) while using the old quota.
#![cfg(loom)]

use limiter_core::__loom::{decide, rescale};
use limiter_core::{AcquireError, Quota};
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use loom_tests::scenarios::{self, NOW};
use loom_tests::{Subject, check};

/// A quota in two atomics (each read on its own).
#[derive(Debug)]
struct QuotaCells {
    t: AtomicU64,
    burst: AtomicU32,
}

impl QuotaCells {
    fn new(q: Quota) -> QuotaCells {
        QuotaCells {
            t: AtomicU64::new(q.period_nanos()),
            burst: AtomicU32::new(q.burst()),
        }
    }
    fn load(&self) -> Quota {
        let t = self.t.load(Ordering::SeqCst);
        let burst = self.burst.load(Ordering::SeqCst);
        Quota::from_nanos(t, burst).expect("valid parts")
    }
    fn store(&self, q: Quota) {
        self.t.store(q.period_nanos(), Ordering::SeqCst);
        self.burst.store(q.burst(), Ordering::SeqCst);
    }
}

/// BROKEN: load, decide, plain store.
#[derive(Debug)]
struct LoadStore {
    tat: AtomicU64,
    quota: QuotaCells,
}

impl Subject for LoadStore {
    fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        let tat = self.tat.load(Ordering::SeqCst);
        let (new_tat, _) = decide(tat, NOW, n, 0, self.quota.load())?;
        self.tat.store(new_tat, Ordering::SeqCst);
        Ok(())
    }
    fn set_quota(&self, quota: Quota) {
        let old = self.quota.load();
        self.quota.store(quota);
        let tat = self.tat.load(Ordering::SeqCst);
        self.tat
            .store(rescale(tat, NOW, old, quota), Ordering::SeqCst);
    }
    fn quota(&self) -> Quota {
        self.quota.load()
    }
}

/// BROKEN: CAS on `tat`, but the quota outside the state word.
#[derive(Debug)]
struct SplitQuota {
    tat: AtomicU64,
    quota: QuotaCells,
}

impl Subject for SplitQuota {
    fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        let mut tat = self.tat.load(Ordering::SeqCst);
        loop {
            let (new_tat, _) = decide(tat, NOW, n, 0, self.quota.load())?;
            match self
                .tat
                .compare_exchange(tat, new_tat, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Ok(()),
                Err(actual) => tat = actual,
            }
        }
    }
    fn set_quota(&self, quota: Quota) {
        let old = self.quota.load();
        self.quota.store(quota);
        let mut tat = self.tat.load(Ordering::SeqCst);
        loop {
            let new_tat = rescale(tat, NOW, old, quota);
            if new_tat == tat {
                return;
            }
            match self
                .tat
                .compare_exchange(tat, new_tat, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(actual) => tat = actual,
            }
        }
    }
    fn quota(&self) -> Quota {
        self.quota.load()
    }
}

#[test]
#[should_panic(expected = "over-admission")]
fn a_load_and_store_instead_of_the_cas_is_caught() {
    check("BROKEN load+store: 2 threads, burst 1", &[], || {
        scenarios::two_threads_one_permit(|q| LoadStore {
            tat: AtomicU64::new(0),
            quota: QuotaCells::new(q),
        })
    });
}

#[test]
#[should_panic(expected = "mixed the quotas")]
fn a_quota_outside_the_state_word_is_caught() {
    check(
        "BROKEN split quota: set_quota vs 2 x try_acquire",
        &[],
        || {
            scenarios::quota_change_on_an_idle_limiter(|q| SplitQuota {
                tat: AtomicU64::new(0),
                quota: QuotaCells::new(q),
            })
        },
    );
}

/// A keyed cell's move without `LOCKED` (the record written, then the word
/// CASed; see `keyed_set_quota.rs`): a decision can read the new version
/// with the old `tat`.
#[test]
#[should_panic]
fn a_keyed_move_without_locked_is_caught() {
    // Only this binary's following cells read it, and only this test makes any.
    limiter_core::__loom::BROKEN_MOVE.store(true, std::sync::atomic::Ordering::Relaxed);
    check(
        "broken move (no LOCKED) vs a decision",
        &[
            "admitted under the new quota",
            "refused under the old quota",
        ],
        scenarios::keyed_decision_racing_a_change,
    );
}
