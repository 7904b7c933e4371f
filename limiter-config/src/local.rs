//! `LocalRule`: an unkeyed in-process limiter (GCRA, sliding window,
//! warm-up, adaptive) as one object, so a rule holds
//! `Core::Local(Arc<dyn LocalRule>)` and no code path matches on the
//! algorithm.
//!
//! The decision, its headroom and its policy come from the limiter's own
//! [`Decide`], and so does waiting (the supertrait, so an
//! `Arc<dyn LocalRule>` upcasts to it). What differs between the
//! algorithms, and only that, is a method here with its default:
//!
//! * [`available`](LocalRule::available): the permits a request could take
//!   now, read without deciding (explain); `None` where that reading would
//!   not be honest (an adaptive rate moves with every latency recorded).
//! * [`set_quota`](LocalRule::set_quota): a reload that changes the numbers
//!   keeps the state where the algorithm can (GCRA); `false` makes the
//!   caller build a new limiter.
//! * [`record`](LocalRule::record): latencies feed an adaptive rate.
//!
//! The typed limiter stays reachable for library users through [`Any`]
//! (`RuleLimiter::gcra`, `adaptive_ewma`, …).

use std::any::Any;
use std::time::Duration;

use limiter_core::{
    AdaptiveLimiter, Clock, Decide, Quota, RateLimiter, Reservation, SlidingWindow, WarmUpLimiter,
    adaptive::Completion, adaptive::RateController,
};

/// What a rule needs of an unkeyed in-process limiter (module docs).
pub(crate) trait LocalRule: Decide<Key = (), Ticket = Reservation> + Any {
    /// The permits a request could take now, read without deciding;
    /// `None` where no honest reading exists without deciding.
    fn available(&self) -> Option<u32>;

    /// Moves the limiter to `quota` keeping its state; `false` if it cannot
    /// (the caller then replaces it).
    fn set_quota(&self, _quota: Quota) -> bool {
        false
    }

    /// Feeds a downstream latency and its outcome to an adaptive rate;
    /// nothing for a fixed one.
    fn record(&self, _latency: Duration, _outcome: Completion) {}
}

impl<C: Clock + 'static> LocalRule for RateLimiter<C> {
    fn available(&self) -> Option<u32> {
        Some(RateLimiter::available(self))
    }

    fn set_quota(&self, quota: Quota) -> bool {
        RateLimiter::set_quota(self, quota);
        true
    }
}

impl<C: Clock + 'static> LocalRule for SlidingWindow<C> {
    fn available(&self) -> Option<u32> {
        Some(SlidingWindow::available(self))
    }
}

impl<C: Clock + 'static> LocalRule for WarmUpLimiter<C> {
    fn available(&self) -> Option<u32> {
        Some(WarmUpLimiter::available(self))
    }
}

impl<P: RateController + 'static, C: Clock + 'static> LocalRule for AdaptiveLimiter<P, C> {
    /// An adaptive rate moves with every latency recorded: no reading
    /// without deciding.
    fn available(&self) -> Option<u32> {
        None
    }

    fn record(&self, latency: Duration, outcome: Completion) {
        self.record_outcome(latency, outcome);
    }
}

/// The typed limiter behind `local`, when it is an `L`.
pub(crate) fn downcast<L: Any>(local: &dyn LocalRule) -> Option<&L> {
    (local as &dyn Any).downcast_ref::<L>()
}
