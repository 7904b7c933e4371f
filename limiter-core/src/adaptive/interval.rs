//! The end of an interval: recording observations, claiming the
//! adjustment with one CAS on the window word, and installing the new rate
//! (module docs of [`crate::adaptive`], "How the rate moves").

use core::time::Duration;

use super::{AdaptiveLimiter, Adjustment, BUSY, Completion, NANOS_PER_SECOND, RateController};
use crate::clock::Clock;
use crate::quota::{MAX_SPAN, Quota};
use crate::sync::{AtomicU64, Ordering};

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
    /// Records a served request's latency: `record_outcome(latency,
    /// Completion::Success)`.
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
    #[inline]
    pub fn record(&self, latency: Duration) {
        self.record_outcome(latency, Completion::Success);
    }

    /// Records an observation, then adjusts the rate if this call is the
    /// first to find the interval over.
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
    #[inline]
    pub fn record_outcome(&self, latency: Duration, outcome: Completion) {
        self.policy.observe(latency, outcome);
        self.tick();
    }

    /// Adjusts the rate if the interval is over and no other call has
    /// claimed the adjustment; returns the decision if this call made it.
    /// `record*` does this for you; a policy without samples
    /// ([`LoadBased`](super::LoadBased)) may be driven by `tick` alone.
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
                    // Release: whoever acquires this rate in `current_rate`
                    // sees its quota installed above.
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
}
