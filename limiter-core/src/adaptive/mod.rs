//! [`AdaptiveLimiter`]: a [`RateLimiter`] whose rate follows latency or
//! load, moved within `[min_rate, max_rate]` by an [`RateController`].
//!
//! # How the rate moves
//!
//! The caller records observations ([`record`](AdaptiveLimiter::record),
//! [`record_outcome`](AdaptiveLimiter::record_outcome)); each goes to the
//! policy, lock-free and without allocating. Time is cut into intervals of
//! the policy's length. The recording call that finds the current interval
//! over claims the adjustment with one CAS on the window word; it alone asks
//! the policy for a proposal, clamps it, applies the app-limited guard, and
//! installs the new rate with [`RateLimiter::set_quota`] (the GCRA state is
//! kept and rescaled, never rebuilt). Then it starts the next interval at
//! its own `now`. There is no background thread: no recording, no
//! adjustment.
//!
//! # The app-limited guard
//!
//! Every admission through [`try_acquire_n`](AdaptiveLimiter::try_acquire_n),
//! [`reserve_n`](AdaptiveLimiter::reserve_n) or [`Decide`](crate::Decide) is counted. At the end
//! of an interval of `elapsed` ns at rate `r`, the rate allowed
//! `allowed = ⌊r · elapsed / 10^9⌋` permits; if fewer than half of them were
//! admitted (`2 · admitted < allowed`), the caller is not using the rate and
//! a raise is refused (the rate holds). Cuts are never refused.
//!
//! # The window word
//!
//! ```text
//!  63   62                                                          0
//! +----+-------------------------------------------------------------+
//! |busy|  start of the current interval, ns on the limiter's clock   |
//! +----+-------------------------------------------------------------+
//! ```
//!
//! `busy` is set by the claiming CAS and cleared, with the new start, by a
//! release store when the adjustment is done (also if the policy panics),
//! so adjustments never overlap and each sees the previous one's writes.
//! The loom model `loom-tests/tests/adaptive_claim.rs` checks that every
//! interval is adjusted exactly once.
//!
//! Files: this one (the limiter and what it reports), `builder`,
//! `interval` (recording and the adjustment), `acquire` (taking permits),
//! `controller` (what a policy is), `ewma`, `load` and `percentile` (the
//! policies), `adjustment` (the record
//! of each decision).

mod acquire;
mod adjustment;
mod builder;
mod controller;
mod ewma;
mod histogram;
mod interval;
mod load;
mod percentile;

use core::time::Duration;

pub use adjustment::Adjustment;
pub use builder::AdaptiveBuilder;
pub use controller::{Completion, Proposal, RateController, Reason};
pub use ewma::EwmaAimd;
pub use load::LoadBased;
pub use percentile::PercentileWindow;

use crate::clock::{Clock, DefaultClock};
use crate::limiter::RateLimiter;
use crate::sync::{AtomicU64, Ordering};
use adjustment::AdjustmentLog;

const BUSY: u64 = 1 << 63;
const NANOS_PER_SECOND: f64 = 1e9;

/// A rate limiter whose rate an [`RateController`] moves from observed
/// latency or load, between `min_rate` and `max_rate`, starting at
/// `max_rate`.
///
/// # Memory ordering
///
/// Acquisitions are those of the inner [`RateLimiter`] (linearizable), plus
/// one relaxed `fetch_add` on the admission counter. Adjustments are
/// serialised by the interval claim (acquire CAS, release store). The rate
/// is published with a release store after its quota is installed, and
/// [`current_rate`](AdaptiveLimiter::current_rate) reads it with an acquire
/// load: a caller that sees a rate sees its quota in force.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_core::{AdaptiveLimiter, ManualClock, adaptive::PercentileWindow};
///
/// let clock = ManualClock::new();
/// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
/// let adaptive = AdaptiveLimiter::builder(policy)
///     .min_rate(100.0)
///     .max_rate(1000.0)
///     .clock(clock.clone())
///     .build()?;
/// assert_eq!(adaptive.current_rate(), 1000.0);
///
/// assert!(adaptive.try_acquire().is_ok());
/// adaptive.record(Duration::from_millis(150));
/// clock.advance(Duration::from_secs(1));
/// adaptive.record(Duration::from_millis(150)); // crosses the interval's end
/// assert_eq!(adaptive.current_rate(), 800.0);
/// # Ok::<(), limiter_core::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct AdaptiveLimiter<P, C: Clock = DefaultClock> {
    limiter: RateLimiter<C>,
    policy: P,
    min_rate: f64,
    max_rate: f64,
    burst: u32,
    /// Interval length in ns, at least 1.
    interval: u64,
    /// The current rate, `f64` bits. Written only under the claim.
    rate: AtomicU64,
    /// `[busy:1 | start:63]`, see the module doc.
    window: AtomicU64,
    /// Permits admitted since the interval started.
    admitted: AtomicU64,
    decisions: AdjustmentLog,
}

impl AdaptiveLimiter<(), DefaultClock> {
    /// The adjustment interval of [`EwmaAimd`] and [`LoadBased`] unless
    /// they are given one: 1 s. It does not depend on the policy or the
    /// clock; it is defined on `AdaptiveLimiter<()>` so that
    /// `AdaptiveLimiter::DEFAULT_INTERVAL` names it without a type
    /// annotation. ([`PercentileWindow::DEFAULT_WINDOW`] is the window's.)
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::AdaptiveLimiter;
    ///
    /// assert_eq!(AdaptiveLimiter::DEFAULT_INTERVAL, Duration::from_secs(1));
    /// ```
    pub const DEFAULT_INTERVAL: Duration = controller::DEFAULT_INTERVAL;
}

impl<P: RateController, C: Clock> AdaptiveLimiter<P, C> {
    /// The rate in force, in permits per second.
    ///
    /// A caller that reads a rate here then sees the limiter enforcing it
    /// (or a later one): [`limiter`](AdaptiveLimiter::limiter)`().quota()`
    /// read afterwards is that rate's quota or a later one.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// assert_eq!(adaptive.current_rate(), 1000.0);
    /// clock.advance(Duration::from_secs(1));
    /// adaptive.record(Duration::from_millis(500));
    /// assert_eq!(adaptive.current_rate(), 800.0);
    /// assert_eq!(adaptive.limiter().quota().period(), Duration::from_micros(1250));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn current_rate(&self) -> f64 {
        // Acquire: pairs with the release store in `adjust`, which follows
        // the rate's `set_quota`; seeing the rate, we see that quota.
        f64::from_bits(self.rate.load(Ordering::Acquire))
    }

    /// The last adjustment, `None` before the first.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// use limiter_core::adaptive::Reason;
    /// assert_eq!(adaptive.last_decision(), None);
    /// clock.advance(Duration::from_secs(1));
    /// adaptive.record(Duration::from_millis(500));
    /// let decision = adaptive.last_decision().unwrap();
    /// assert_eq!((decision.previous_rate, decision.rate), (1000.0, 800.0));
    /// assert!(matches!(decision.reason, Reason::LatencyAbove { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn last_decision(&self) -> Option<Adjustment> {
        self.decisions.read()
    }

    /// How many adjustments (including holds) have been made.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// clock.advance(Duration::from_secs(1));
    /// assert!(adaptive.tick().is_some()); // an empty window: a hold
    /// assert!(adaptive.tick().is_none()); // the next interval is not over
    /// assert_eq!(adaptive.decisions(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decisions(&self) -> u64 {
        self.decisions.count()
    }

    /// The lowest rate, permits per second.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// assert_eq!(adaptive.min_rate(), 100.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn min_rate(&self) -> f64 {
        self.min_rate
    }

    /// The highest (and starting) rate, permits per second.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// assert_eq!(adaptive.max_rate(), 1000.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_rate(&self) -> f64 {
        self.max_rate
    }

    /// The adjustment interval.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// assert_eq!(adaptive.interval(), Duration::from_secs(1)); // the policy's
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// The policy.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// use limiter_core::adaptive::RateController;
    /// assert_eq!(adaptive.policy().interval(), Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The inner limiter (its [`available`](RateLimiter::available),
    /// [`quota`](RateLimiter::quota), clock). Acquiring through it directly
    /// bypasses the admission count of the app-limited guard.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// assert_eq!(adaptive.limiter().quota().burst(), 1);
    /// adaptive.limiter().try_acquire()?; // not counted
    /// assert_eq!(adaptive.admitted_in_interval(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limiter(&self) -> &RateLimiter<C> {
        &self.limiter
    }

    /// Permits admitted so far in the current interval.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let clock = ManualClock::new();
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, clock.clone())
    ///     .min_rate(100.0)
    ///     .max_rate(1000.0)
    ///     .build()?;
    /// adaptive.try_acquire()?;
    /// assert_eq!(adaptive.admitted_in_interval(), 1);
    /// clock.advance(Duration::from_secs(1));
    /// adaptive.tick();
    /// assert_eq!(adaptive.admitted_in_interval(), 0); // a new interval
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn admitted_in_interval(&self) -> u64 {
        // Relaxed: a snapshot of a counter.
        self.admitted.load(Ordering::Relaxed)
    }

    #[inline]
    fn count(&self, n: u32) {
        // Relaxed: a counter, taken by the adjustment's swap.
        self.admitted.fetch_add(u64::from(n), Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
