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
//! [`reserve_n`](AdaptiveLimiter::reserve_n) or [`Decide`] is counted. At the end
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

mod adjustment;
mod controller;
mod histogram;
mod percentile;

use core::time::Duration;

pub use adjustment::Adjustment;
pub use controller::{Completion, EwmaAimd, LoadBased, Proposal, RateController, Reason};
pub use percentile::PercentileWindow;

use crate::clock::{Clock, DefaultClock};
use crate::decision::{Decide, Denial, Grant};
use crate::error::{AcquireError, QuotaError};
use crate::limiter::RateLimiter;
use crate::quota::{MAX_SPAN, Quota, saturating_nanos};
use crate::reservation::Reservation;
use crate::sync::{AtomicU64, Ordering};
use adjustment::AdjustmentLog;
use controller::check;

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

/// Builds an [`AdaptiveLimiter`]; see [`AdaptiveLimiter::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct AdaptiveBuilder<P, C> {
    policy: P,
    clock: C,
    min_rate: Option<f64>,
    max_rate: Option<f64>,
    burst: u32,
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

impl<P: RateController> AdaptiveLimiter<P, DefaultClock> {
    /// A builder for a limiter driven by `policy`, on a new
    /// [`DefaultClock`] unless [`clock`](AdaptiveBuilder::clock) says
    /// otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{AdaptiveLimiter, adaptive::EwmaAimd};
    ///
    /// let adaptive = AdaptiveLimiter::builder(EwmaAimd::new(Duration::from_millis(50)))
    ///     .max_rate(200.0)
    ///     .build()?;
    /// assert_eq!(adaptive.current_rate(), 200.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(policy: P) -> AdaptiveBuilder<P, DefaultClock> {
        AdaptiveBuilder::with_clock(policy, DefaultClock::default())
    }
}

impl<P: RateController, C: Clock> AdaptiveBuilder<P, C> {
    /// A builder for a limiter driven by `policy` reading `clock` (the
    /// constructor without `std`).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, ManualClock::new())
    ///     .max_rate(50.0)
    ///     .build()?;
    /// assert_eq!(adaptive.limiter().clock().now(), 0);
    /// # use limiter_core::Clock;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(policy: P, clock: C) -> AdaptiveBuilder<P, C> {
        AdaptiveBuilder {
            policy,
            clock,
            min_rate: None,
            max_rate: None,
            burst: 1,
        }
    }

    /// The lowest rate, in permits per second (default: 1, or `max_rate`
    /// if that is lower).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let builder = AdaptiveBuilder::with_clock(policy, ManualClock::new()).max_rate(50.0);
    /// assert_eq!(builder.build()?.min_rate(), 1.0);
    /// # let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let builder = AdaptiveBuilder::with_clock(policy, ManualClock::new()).max_rate(50.0);
    /// assert_eq!(builder.min_rate(10.0).build()?.min_rate(), 10.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn min_rate(mut self, per_second: f64) -> Self {
        self.min_rate = Some(per_second);
        self
    }

    /// The highest rate and the starting one, in permits per second
    /// (required).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow, QuotaError};
    ///
    /// let policy = || PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let missing = AdaptiveBuilder::with_clock(policy(), ManualClock::new()).build();
    /// assert!(matches!(missing, Err(QuotaError::InvalidParameter { name: "max_rate", .. })));
    /// let adaptive = AdaptiveBuilder::with_clock(policy(), ManualClock::new())
    ///     .max_rate(50.0)
    ///     .build()?;
    /// assert_eq!(adaptive.max_rate(), 50.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_rate(mut self, per_second: f64) -> Self {
        self.max_rate = Some(per_second);
        self
    }

    /// The burst at every rate (default 1).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveBuilder::with_clock(policy, ManualClock::new())
    ///     .max_rate(10.0)
    ///     .burst(3)
    ///     .build()?;
    /// assert_eq!(adaptive.limiter().available(), 3);
    /// assert!(adaptive.try_acquire_n(3).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }

    /// Reads `clock` instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use limiter_core::{AdaptiveLimiter, Clock, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let adaptive = AdaptiveLimiter::builder(policy)
    ///     .max_rate(10.0)
    ///     .clock(ManualClock::starting_at(7))
    ///     .build()?;
    /// assert_eq!(adaptive.limiter().clock().now(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> AdaptiveBuilder<P, C2> {
        AdaptiveBuilder {
            policy: self.policy,
            clock,
            min_rate: self.min_rate,
            max_rate: self.max_rate,
            burst: self.burst,
        }
    }

    /// The limiter, full, at `max_rate`; its first interval starts now.
    ///
    /// # Errors
    ///
    /// [`QuotaError::InvalidParameter`] for a missing `max_rate`, a
    /// `min_rate` above it, an interval of zero or beyond
    /// [`MAX_SPAN`], or bad policy parameters; the errors of
    /// [`Quota::from_rate`] and [`Quota::with_burst`] when either end of
    /// the range cannot be a quota with this burst.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::QuotaError;
    /// use core::time::Duration;
    /// use limiter_core::{adaptive::AdaptiveBuilder, ManualClock, adaptive::PercentileWindow};
    ///
    /// let policy = PercentileWindow::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let inverted = AdaptiveBuilder::with_clock(policy, ManualClock::new())
    ///     .min_rate(100.0)
    ///     .max_rate(10.0)
    ///     .build();
    /// assert!(matches!(inverted, Err(QuotaError::InvalidParameter { name: "min_rate", .. })));
    /// ```
    pub fn build(self) -> Result<AdaptiveLimiter<P, C>, QuotaError> {
        let Some(max_rate) = self.max_rate else {
            return Err(QuotaError::InvalidParameter {
                name: "max_rate",
                requirement: "set with `max_rate`",
            });
        };
        let min_rate = self
            .min_rate
            .unwrap_or(if max_rate < 1.0 { max_rate } else { 1.0 });
        let top = Quota::from_rate(max_rate)?.with_burst(self.burst)?;
        Quota::from_rate(min_rate)?.with_burst(self.burst)?;
        check(min_rate <= max_rate, "min_rate", "at most max_rate")?;
        let interval = saturating_nanos(self.policy.interval());
        check(
            interval > 0 && interval <= MAX_SPAN,
            "interval",
            "above zero and at most MAX_SPAN",
        )?;
        self.policy.validate()?;
        let start = self.clock.now().min(MAX_SPAN);
        Ok(AdaptiveLimiter {
            limiter: RateLimiter::with_clock(top, self.clock),
            policy: self.policy,
            min_rate,
            max_rate,
            burst: self.burst,
            interval,
            rate: AtomicU64::new(max_rate.to_bits()),
            window: AtomicU64::new(start),
            admitted: AtomicU64::new(0),
            decisions: AdjustmentLog::new(),
        })
    }
}

/// Ends an adjustment: clears `busy` and starts the next interval, even if
/// the policy panicked.
struct Claim<'a> {
    window: &'a AtomicU64,
    next_start: u64,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        // Release: the next claimer (acquire CAS) sees the rate, the policy
        // state and the decision written under this claim.
        self.window.store(self.next_start, Ordering::Release);
    }
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

    /// Records a served request's latency: `record_outcome(latency,
    /// Completion::Success)`.
    #[inline]
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
    /// adaptive.record(Duration::from_millis(150)); // over the threshold
    /// clock.advance(Duration::from_secs(1));
    /// adaptive.record(Duration::from_millis(150)); // crosses the interval's end
    /// assert_eq!(adaptive.current_rate(), 800.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record(&self, latency: Duration) {
        self.record_outcome(latency, Completion::Success);
    }

    /// Records an observation, then adjusts the rate if this call is the
    /// first to find the interval over.
    #[inline]
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
    /// use limiter_core::{adaptive::Completion, adaptive::Reason};
    /// adaptive.record_outcome(Duration::from_millis(1), Completion::Dropped);
    /// clock.advance(Duration::from_secs(1));
    /// adaptive.record_outcome(Duration::from_millis(1), Completion::Ignored);
    /// assert_eq!(adaptive.last_decision().unwrap().reason, Reason::Dropped { count: 1 });
    /// assert_eq!(adaptive.current_rate(), 800.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_outcome(&self, latency: Duration, outcome: Completion) {
        self.policy.observe(latency, outcome);
        self.tick();
    }

    /// Adjusts the rate if the interval is over and no other call has
    /// claimed the adjustment; returns the decision if this call made it.
    /// `record*` does this for you; a policy without samples
    /// ([`LoadBased`]) may be driven by `tick` alone.
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
    /// assert!(adaptive.tick().is_none()); // the interval is not over
    /// clock.advance(Duration::from_secs(1));
    /// let decision = adaptive.tick().unwrap();
    /// assert_eq!(decision.at, 1_000_000_000);
    /// assert!(adaptive.tick().is_none()); // claimed once per interval
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tick(&self) -> Option<Adjustment> {
        let now = self.limiter.clock().now();
        // Acquire: as the claim's CAS, for the early return's freshness.
        let word = self.window.load(Ordering::Acquire);
        if word & BUSY != 0 || now < word.saturating_add(self.interval) {
            return None;
        }
        // Acquire: see everything the previous adjustment wrote before its
        // release store of `word`. Relaxed on failure: someone else claimed.
        self.window
            .compare_exchange(word, word | BUSY, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        let _claim = Claim {
            window: &self.window,
            next_start: now.min(MAX_SPAN),
        };
        Some(self.adjust(word, now))
    }

    /// The adjustment, under the claim.
    fn adjust(&self, start: u64, now: u64) -> Adjustment {
        let previous = self.current_rate();
        let proposal = self.policy.propose(previous);
        // Relaxed: a counter taken exactly once by swap.
        let admitted = self.admitted.swap(0, Ordering::Relaxed);
        let elapsed = (now - start) as f64;
        let allowed = (previous * elapsed / NANOS_PER_SECOND) as u64;
        let mut rate = if proposal.rate.is_finite() && proposal.rate > 0.0 {
            proposal.rate.clamp(self.min_rate, self.max_rate)
        } else {
            previous
        };
        let app_limited = rate > previous && admitted.saturating_mul(2) < allowed;
        if app_limited {
            rate = previous;
        }
        if rate != previous {
            match Quota::from_rate(rate).and_then(|q| q.with_burst(self.burst)) {
                Ok(quota) => {
                    self.limiter.set_quota(quota);
                    // Release: a reader whose acquire load in current_rate
                    // sees this rate also sees the quota installed above.
                    // The next adjustment sees it through the claim anyway.
                    self.rate.store(rate.to_bits(), Ordering::Release);
                }
                // Unreachable for rates within the validated range; hold.
                Err(_) => rate = previous,
            }
        }
        let decision = Adjustment {
            at: now,
            previous_rate: previous,
            proposed_rate: proposal.rate,
            rate,
            reason: proposal.reason,
            app_limited,
            admitted,
            allowed,
        };
        self.decisions.write(&decision);
        decision
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

/// Taking permits; every admission counts toward the app-limited guard.
impl<P: RateController, C: Clock> AdaptiveLimiter<P, C> {
    /// Takes one permit now at the rate in force.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n`].
    #[inline]
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits now at the rate in force, all or nothing.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_n`].
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.limiter.try_acquire_n(n)?;
        self.count(n);
        Ok(())
    }

    /// Claims the earliest slot for `n` permits within `max_wait`. A
    /// reservation counts as admitted when made, also if later cancelled
    /// (the demand was there).
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::reserve_n`].
    #[inline]
    pub fn reserve_n(&self, n: u32, max_wait: Duration) -> Result<Reservation, AcquireError> {
        let reservation = self.limiter.reserve_n(n, max_wait)?;
        self.count(n);
        Ok(reservation)
    }

    /// Gives back a reservation as [`RateLimiter::cancel`] does.
    pub fn cancel(&self, reservation: Reservation) -> bool {
        self.limiter.cancel(reservation)
    }
}

/// Exact headroom under the rate in force, from the word the decision
/// wrote; the policy is the quota of that rate. Grants count as admitted,
/// as [`reserve_n`](AdaptiveLimiter::reserve_n)'s do.
impl<P: RateController, C: Clock> Decide for AdaptiveLimiter<P, C> {
    type Key = ();
    type Ticket = Reservation;

    fn decide(
        &self,
        _key: &(),
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<Reservation>, Denial> {
        let grant = self.limiter.decide(&(), cost, max_wait)?;
        self.count(cost);
        Ok(grant)
    }

    fn cancel(&self, _key: &(), ticket: Reservation) -> bool {
        self.limiter.cancel(ticket)
    }

    #[inline]
    fn acquire_now(&self, _key: &(), cost: u32) -> Result<(), AcquireError> {
        self.try_acquire_n(cost)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
