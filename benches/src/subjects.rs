//! The implementations under test, each built for a [`Path`] and reduced to
//! "try one permit" (`Fn() -> bool`).
//!
//! Clocks are paired like with like:
//!
//! | clock kind | ours | governor | ratelimit | Mutex GCRA |
//! |---|---|---|---|---|
//! | OS monotonic (`Instant`) | `MonotonicClock` | `clock::MonotonicClock` | `StdClock` | `MonotonicClock` |
//! | TSC through quanta | `TscClock` | `QuantaClock` (its default) | [`Elapsed`]`<TscClock>` | `TscClock` |
//! | cached, 1 ms upkeep | `CoarseClock` | `QuantaUpkeepClock` | [`Elapsed`]`<CoarseClock>` | `CoarseClock` |
//!
//! leaky-bucket has one clock (tokio's `Instant`, read only when its
//! atomic balance runs dry), so it appears once.

use std::num::NonZeroU32;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use governor::clock::{MonotonicClock as GovMonotonic, QuantaClock, QuantaUpkeepClock};
use limiter_core::{Clock, Quota, RateLimiter, clock::CoarseClock};

use crate::mutex_gcra::MutexGcra;

/// Permits a second (and burst) of the quota that never limits.
pub const ALLOW_RATE: u32 = 1_000_000_000;

/// Which decision every timed call takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// A quota that never limits: every call is admitted and writes state.
    Allow,
    /// A quota drained during setup: every timed call is refused.
    Deny,
}

impl Path {
    /// Both paths, allow first.
    pub const BOTH: [Path; 2] = [Path::Allow, Path::Deny];

    /// The quota every implementation gets for this path.
    pub fn quota(self) -> Quota {
        let quota = match self {
            Path::Allow => Quota::per_second(ALLOW_RATE).and_then(|q| q.with_burst(ALLOW_RATE)),
            Path::Deny => Quota::per_hour(1),
        };
        quota.expect("the benchmark quotas are valid")
    }

    /// How many of `calls` calls every implementation must admit.
    pub fn expected(self, calls: u64) -> u64 {
        match self {
            Path::Allow => calls,
            Path::Deny => 0,
        }
    }

    /// `"allow"` or `"deny"`.
    pub fn name(self) -> &'static str {
        match self {
            Path::Allow => "allow",
            Path::Deny => "deny",
        }
    }

    /// Takes the one permit of the deny quota during setup (not timed).
    fn prepare(self, op: &dyn Fn() -> bool) {
        if self == Path::Deny {
            assert!(op(), "the first permit of the deny quota must be admitted");
            assert!(!op(), "the deny quota must refuse the second permit");
        }
    }
}

/// A subject: one try for one permit, shareable between threads.
pub type Subject = Arc<dyn Fn() -> bool + Send + Sync>;

fn prepared<F: Fn() -> bool + Send + Sync + 'static>(path: Path, op: F) -> Arc<F> {
    path.prepare(&op);
    Arc::new(op)
}

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("non-zero")
}

/// `limiter_core::RateLimiter` on `clock`.
pub fn ours<C: Clock + 'static>(path: Path, clock: C) -> Arc<impl Fn() -> bool + Send + Sync> {
    let limiter = RateLimiter::with_clock(path.quota(), clock);
    prepared(path, move || limiter.try_acquire().is_ok())
}

/// Ours after one `set_quota` (to the same quota): the quota read from the
/// change table, the path of every limiter whose quota was changed.
pub fn ours_changed<C: Clock + 'static>(
    path: Path,
    clock: C,
) -> Arc<impl Fn() -> bool + Send + Sync> {
    let limiter = RateLimiter::with_clock(path.quota(), clock);
    limiter.set_quota(path.quota());
    prepared(path, move || limiter.try_acquire().is_ok())
}

/// `limiter_core::RateLimiter` on `clock`, wrapped in `Metered` (the cost of
/// metering).
pub fn ours_metered<C: Clock + 'static>(
    path: Path,
    clock: C,
) -> Arc<impl Fn() -> bool + Send + Sync> {
    let limiter = limiter_core::Metered::new(RateLimiter::with_clock(path.quota(), clock));
    prepared(path, move || limiter.try_acquire().is_ok())
}

/// The Mutex-protected GCRA baseline on `clock`.
pub fn mutex<C: Clock + 'static>(path: Path, clock: C) -> Arc<impl Fn() -> bool + Send + Sync> {
    let limiter = MutexGcra::new(path.quota(), clock);
    prepared(path, move || limiter.try_acquire())
}

fn governor_quota(path: Path) -> governor::Quota {
    match path {
        Path::Allow => governor::Quota::per_second(nz(ALLOW_RATE)).allow_burst(nz(ALLOW_RATE)),
        Path::Deny => governor::Quota::per_hour(nz(1)),
    }
}

/// governor's direct limiter on its default clock (`QuantaClock`, the TSC).
pub fn governor_tsc(path: Path) -> Arc<impl Fn() -> bool + Send + Sync> {
    let limiter =
        governor::RateLimiter::direct_with_clock(governor_quota(path), QuantaClock::default());
    prepared(path, move || limiter.check().is_ok())
}

/// governor's direct limiter on `std::time::Instant`.
pub fn governor_monotonic(path: Path) -> Arc<impl Fn() -> bool + Send + Sync> {
    let limiter = governor::RateLimiter::direct_with_clock(governor_quota(path), GovMonotonic);
    prepared(path, move || limiter.check().is_ok())
}

/// governor's direct limiter on quanta's upkeep clock (1 ms upkeep). quanta
/// allows one upkeep thread per process, so all of these share one clock.
pub fn governor_coarse(path: Path) -> Arc<impl Fn() -> bool + Send + Sync> {
    static UPKEEP: OnceLock<QuantaUpkeepClock> = OnceLock::new();
    let clock = UPKEEP
        .get_or_init(|| {
            QuantaUpkeepClock::from_interval(Duration::from_millis(1))
                .expect("the quanta upkeep thread starts")
        })
        .clone();
    let limiter = governor::RateLimiter::direct_with_clock(governor_quota(path), clock);
    prepared(path, move || limiter.check().is_ok())
}

/// One of our clocks seen through ratelimit's `Clock` trait.
#[derive(Debug, Clone)]
pub struct Elapsed<C>(pub C);

impl<C: Clock> ratelimit::Clock for Elapsed<C> {
    #[inline]
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.0.now())
    }
}

/// The `ratelimit` crate's token bucket on `clock`.
pub fn ratelimit_on<C>(path: Path, clock: C) -> Arc<impl Fn() -> bool + Send + Sync>
where
    C: ratelimit::Clock + Send + Sync + 'static,
{
    let (rate, period, max, initial) = match path {
        Path::Allow => (
            u64::from(ALLOW_RATE),
            Duration::from_secs(1),
            u64::from(ALLOW_RATE),
            u64::from(ALLOW_RATE),
        ),
        Path::Deny => (1, Duration::from_secs(3600), 1, 1),
    };
    let limiter = ratelimit::Builder::with_clock(rate, clock)
        .period(period)
        .max_tokens(max)
        .initial_available(initial)
        .build()
        .expect("valid ratelimit parameters");
    prepared(path, move || limiter.try_wait().is_ok())
}

/// `ratelimit` on its own `std::time::Instant` clock.
pub fn ratelimit_std(path: Path) -> Arc<impl Fn() -> bool + Send + Sync> {
    ratelimit_on(path, ratelimit::StdClock::new())
}

/// leaky-bucket's limiter, tried without waiting (`try_acquire(1)`).
pub fn leaky_bucket(path: Path) -> Arc<impl Fn() -> bool + Send + Sync> {
    let limiter = leaky(path);
    prepared(path, move || limiter.try_acquire(1))
}

/// leaky-bucket's limiter for `path`: the allow one holds 2^40 tokens.
pub fn leaky(path: Path) -> leaky_bucket::RateLimiter {
    match path {
        Path::Allow => leaky_bucket::RateLimiter::builder()
            .max(1 << 40)
            .initial(1 << 40)
            .refill(1_000_000)
            .interval(Duration::from_millis(1))
            .build(),
        Path::Deny => leaky_bucket::RateLimiter::builder()
            .max(1)
            .initial(1)
            .refill(1)
            .interval(Duration::from_secs(3600))
            .build(),
    }
}

/// A coarse clock shared by every subject of a run (one updater thread).
pub fn coarse_clock() -> CoarseClock {
    static COARSE: OnceLock<CoarseClock> = OnceLock::new();
    COARSE
        .get_or_init(|| CoarseClock::new().expect("the coarse clock's updater starts"))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::run;
    use limiter_core::{MonotonicClock, clock::TscClock};

    fn check(path: Path, op: &dyn Fn() -> bool) {
        assert_eq!(run(1_000, op).admitted, path.expected(1_000), "{path:?}");
    }

    #[test]
    fn every_subject_admits_all_on_allow_and_none_on_deny() {
        for path in Path::BOTH {
            check(path, &*ours(path, MonotonicClock::new()));
            check(path, &*ours(path, TscClock::new()));
            check(path, &*ours(path, coarse_clock()));
            check(path, &*mutex(path, TscClock::new()));
            check(path, &*governor_tsc(path));
            check(path, &*governor_monotonic(path));
            check(path, &*governor_coarse(path));
            check(path, &*ratelimit_std(path));
            check(path, &*ratelimit_on(path, Elapsed(TscClock::new())));
            check(path, &*ratelimit_on(path, Elapsed(coarse_clock())));
            check(path, &*leaky_bucket(path));
        }
    }
}
