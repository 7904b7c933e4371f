//! [`Backend`]: what the layer asks of a limiter, which is the workspace's
//! one decision seam: limiter-core's [`Decide`](limiter_core::Decide) for
//! the limiters that decide in memory, limiter-async's [`AsyncDecide`] for
//! those that need an `.await` (Redis). `Backend` is a blanket over
//! `AsyncDecide` (itself a blanket over `Decide`): every algorithm of
//! limiter-core, a [`KeyedLimiter`](limiter_keyed::KeyedLimiter), a
//! composite `(A, B)` and `RedisBackend` work in the layer, with headers
//! from their own decision.
//!
//! A decision is either a [`Grant`] (the permits are claimed, possibly for a
//! slot `wait` from now, and can be given back with
//! [`AsyncDecide::cancel`]) or a [`Denial`] that
//! consumed nothing. The grant carries the [`Headroom`](limiter_core::Headroom)
//! its decision left, computed from the state that decision wrote, and the
//! [`Policy`](limiter_core::Policy) it was decided under, so the headers
//! describe that decision rather than a second look that a concurrent
//! request could already have moved. The layer writes:
//!
//! | header | from |
//! |---|---|
//! | `RateLimit-Policy` | the grant's or denial's `policy` (burst and emission interval) |
//! | `RateLimit` `r` | `grant.headroom.remaining` |
//! | `RateLimit` `t` | `grant.headroom.refill_in`, less the wait of a held request |
//! | `Retry-After` | the denial's `retry_after` |
//!
//! Times are [`Duration`](std::time::Duration)s relative to the decision,
//! so a backend's clock never leaks into the layer.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use limiter_core::{Decide, ManualClock, Quota, RateLimiter};
//!
//! let limiter = RateLimiter::with_clock(Quota::per_second(2)?, ManualClock::new());
//! let grant = limiter.decide(&(), 1, Duration::ZERO)?;
//! assert_eq!((grant.wait, grant.headroom.remaining), (Duration::ZERO, 0));
//! // Waiting up to a second: the next slot, 500 ms away, is claimed ...
//! let held = limiter.decide(&(), 1, Duration::from_secs(1))?;
//! assert_eq!(held.wait, Duration::from_millis(500));
//! assert!(Decide::cancel(&limiter, &(), held.ticket)); // ... and given back.
//! let denied = limiter.decide(&(), 1, Duration::ZERO).unwrap_err();
//! assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Cancel safety
//!
//! The layer drops the future of
//! [`decide_async`](AsyncDecide::decide_async) only before it resolves (the
//! client went away); a backend whose decision has side effects after an
//! `.await` must tolerate that. In-memory backends decide synchronously
//! ([`decide_ready`](AsyncDecide::decide_ready)), without a future.

use limiter_async::AsyncDecide;

/// A limiter the layer can ask for permits: any [`AsyncDecide`] whose key
/// and ticket can live in a request's future. The layer takes
/// `RateLimit-Policy` from the decision's `policy`, `RateLimit` from the
/// grant's headroom (`remaining`, and `refill_in` less the wait of a held
/// request) and `Retry-After` from the denial's `retry_after`.
///
/// Implemented for every such type; implement
/// [`Decide`](limiter_core::Decide) (in memory) or [`AsyncDecide`] (a
/// remote store) for a limiter of your own.
pub trait Backend:
    AsyncDecide<Key: Sized + Send + Sync + 'static, Ticket: Send + 'static> + Send + Sync + 'static
{
}

impl<D> Backend for D
where
    D: AsyncDecide + Send + Sync + 'static,
    D::Key: Sized + Send + Sync + 'static,
    D::Ticket: Send + 'static,
{
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use limiter_core::{Decide, Denial, Grant, ManualClock, Policy, Quota, RateLimiter};
    use limiter_keyed::KeyedLimiter;

    use super::*;

    /// The layer's view: the decision it gets at once from a backend.
    fn now<B: Backend>(
        b: &B,
        key: &B::Key,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Grant<B::Ticket>, Denial> {
        b.decide_ready(key, cost, max_wait)
            .expect("an in-memory decision is ready at once")
    }

    #[test]
    fn grants_report_remaining_and_reset() {
        let limiter = RateLimiter::with_clock(
            Quota::per_second(10).unwrap().with_burst(3).unwrap(),
            ManualClock::new(),
        );
        let g = now(&limiter, &(), 1, Duration::ZERO).unwrap();
        assert_eq!(
            (g.wait, g.headroom.remaining, g.headroom.refill_in),
            (Duration::ZERO, 2, Duration::from_millis(100))
        );
        let g = now(&limiter, &(), 2, Duration::ZERO).unwrap();
        assert_eq!(g.headroom.remaining, 0);
        let g = now(&limiter, &(), 1, Duration::from_secs(1)).unwrap();
        assert_eq!(g.wait, Duration::from_millis(100));
        assert_eq!(
            (g.headroom.remaining, g.headroom.refill_in),
            (0, Duration::from_millis(200))
        );
        assert!(Decide::cancel(&limiter, &(), g.ticket));
    }

    #[test]
    fn reset_is_exact_between_emissions() {
        let clock = ManualClock::new();
        let quota = Quota::per_second(10).unwrap().with_burst(3).unwrap();
        let global = RateLimiter::with_clock(quota, clock.clone());
        let keyed = KeyedLimiter::builder(quota)
            .clock(clock.clone())
            .build()
            .unwrap();
        now(&global, &(), 1, Duration::ZERO).unwrap();
        now(&keyed, &7u8, 1, Duration::ZERO).unwrap();
        // Half an emission interval later: tat = 200 ms after the second
        // grant, one whole permit left, the next in 50 ms (not one `t`).
        clock.advance(Duration::from_millis(50));
        for h in [
            now(&global, &(), 1, Duration::ZERO).unwrap().headroom,
            now(&keyed, &7u8, 1, Duration::ZERO).unwrap().headroom,
        ] {
            assert_eq!((h.remaining, h.refill_in), (1, Duration::from_millis(50)));
        }
    }

    #[test]
    fn denials_keep_their_meaning() {
        let limiter = RateLimiter::with_clock(
            Quota::per_second(2).unwrap().with_burst(2).unwrap(),
            ManualClock::new(),
        );
        let policy = Policy {
            burst: 2,
            interval: Duration::from_millis(500),
        };
        assert!(matches!(
            now(&limiter, &(), 3, Duration::MAX),
            Err(Denial::OverBurst { cost: 3, burst: 2, policy: p }) if p == policy
        ));
        assert_eq!(
            now(&limiter, &(), 2, Duration::ZERO).unwrap().policy,
            policy
        );
        let denial = now(&limiter, &(), 1, Duration::ZERO).unwrap_err();
        assert_eq!(denial.retry_after(), Some(Duration::from_millis(500)));
        assert_eq!(denial.policy(), Some(policy));
    }

    #[test]
    fn keyed_too_many_keys_is_unavailable() {
        let limiter = KeyedLimiter::builder(Quota::per_second(1).unwrap())
            .clock(ManualClock::new())
            .max_keys(1)
            .when_full(limiter_keyed::WhenFull::RejectNewKeys)
            .build()
            .unwrap();
        now(&limiter, &1u8, 1, Duration::ZERO).unwrap();
        assert!(matches!(
            now(&limiter, &2u8, 1, Duration::ZERO),
            Err(Denial::Unavailable(_))
        ));
    }
}
