//! The decision over all descriptors of one request: which are over the
//! limit, the overall answer, and what is charged, against any
//! [`Backend`].
//!
//! # The rule
//!
//! A descriptor is over the limit when its hits do not fit (more than
//! `requests_per_unit`, or more than what remains now); a descriptor with 0
//! hits (Envoy's check-only call) is over when nothing remains. Its answer
//! is OK anyway in shadow mode (counted). The request is over the limit
//! (envoyproxy/ratelimit's rule) if any descriptor that is not in quota
//! mode answers over, or if there are quota-mode descriptors and every one
//! of them answers over. Then **nothing is charged**, on any descriptor.
//! Otherwise every descriptor that fits is charged its hits, all together.
//!
//! # How
//!
//! 1. The common case in one backend call: charge everything
//!    ([`Backend::try_all`]). Granted means every part fit: done.
//! 2. Refused (nothing charged): read every part ([`Backend::peek`]), apply
//!    the rule, and if the request passes (a shadow or some quota-mode
//!    descriptors refused) charge the parts that fit, all together.
//! 3. If that charge is refused (another request took the room between the
//!    read and the charge), go back to 2, at most [`ATTEMPTS`] times; then
//!    the request is over the limit with nothing charged: stricter, never
//!    looser.

use core::time::Duration;

use crate::backend::{Backend, BackendError, Charge, Part, PartState};

/// Reads and charges tried before a contended request is refused.
pub(crate) const ATTEMPTS: usize = 3;

/// One descriptor to decide.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    /// The counter (its `hits` is ignored: see `hits`).
    pub(crate) part: Part,
    /// The hits asked for (may exceed `u32` and the limit).
    pub(crate) hits: u64,
    /// `shadow_mode`: answers OK whatever it decides.
    pub(crate) shadow: bool,
    /// Quota mode (the rule's or the global one).
    pub(crate) quota: bool,
}

/// One descriptor's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartOutcome {
    /// Its hits did not fit (before shadow mode turns the answer to OK).
    pub(crate) over: bool,
    /// Requests that remain (after the charge, if charged).
    pub(crate) remaining: u32,
    /// Time until the limit is full again.
    pub(crate) reset: Duration,
    /// Used before this request (`requests_per_unit - remaining before`).
    pub(crate) used_before: u64,
    /// The backend answered by its failure policy.
    pub(crate) degraded: bool,
}

/// The decision over a request's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// The request is over the limit (nothing charged).
    pub(crate) over: bool,
    /// Per check, in order.
    pub(crate) parts: Vec<PartOutcome>,
}

/// Whether a request whose parts answer `over` is over the limit.
pub(crate) fn overall(checks: &[Check], over: &[bool]) -> bool {
    let mut failed_normal = 0;
    let mut failed_quota = 0;
    let mut quota = 0;
    for (c, &o) in checks.iter().zip(over) {
        let answers_over = o && !c.shadow;
        if c.quota {
            quota += 1;
            failed_quota += usize::from(answers_over);
        } else {
            failed_normal += usize::from(answers_over);
        }
    }
    failed_normal > 0 || (quota > 0 && quota == failed_quota)
}

fn fits(c: &Check, state: &PartState) -> bool {
    if c.hits == 0 {
        state.remaining > 0
    } else {
        c.hits <= u64::from(state.remaining)
    }
}

/// Whether `c` can ever fit (its hits at most its limit).
fn feasible(c: &Check) -> bool {
    c.hits <= u64::from(c.part.limit.requests_per_unit) && c.part.limit.requests_per_unit > 0
}

/// A part with its hits, for the backend (`1..=requests_per_unit`).
fn charged(c: &Check) -> Part {
    let mut p = c.part.clone();
    p.hits = u32::try_from(c.hits).unwrap_or(u32::MAX);
    p
}

fn outcome(c: &Check, state: PartState, over: bool, charged: bool) -> PartOutcome {
    let limit = u64::from(c.part.limit.requests_per_unit);
    let remaining_before = if charged {
        u64::from(state.remaining) + c.hits
    } else {
        u64::from(state.remaining)
    };
    PartOutcome {
        over,
        remaining: if over { 0 } else { state.remaining },
        reset: state.reset,
        used_before: limit.saturating_sub(remaining_before),
        degraded: state.degraded,
    }
}

/// Decides `checks` against `backend`; see the module docs.
///
/// # Errors
///
/// The backend's error (only under the `error` failure policy).
/// Every backend call shares `deadline` (the request's).
pub(crate) async fn decide<B: Backend>(
    backend: &B,
    checks: &[Check],
    deadline: tokio::time::Instant,
) -> Result<Decision, BackendError> {
    // The fast path needs every part to spend: a check-only part that
    // refuses must be known before anything is charged.
    if !checks.is_empty() && checks.iter().all(|c| feasible(c) && c.hits > 0) {
        let parts: Vec<Part> = checks.iter().map(charged).collect();
        if let Charge::Granted(states) = backend.try_all(&parts, deadline).await? {
            return Ok(Decision {
                over: false,
                parts: checks
                    .iter()
                    .zip(states)
                    .map(|(c, s)| outcome(c, s, false, true))
                    .collect(),
            });
        }
    }
    for _ in 0..ATTEMPTS {
        let readable: Vec<usize> = (0..checks.len())
            .filter(|&i| checks[i].part.limit.requests_per_unit > 0)
            .collect();
        let parts: Vec<Part> = readable.iter().map(|&i| checks[i].part.clone()).collect();
        let states = if parts.is_empty() {
            Vec::new()
        } else {
            backend.peek(&parts, deadline).await?
        };
        let mut peeked: Vec<Option<PartState>> = vec![None; checks.len()];
        for (&i, s) in readable.iter().zip(states) {
            peeked[i] = Some(s);
        }
        let over: Vec<bool> = checks
            .iter()
            .zip(&peeked)
            .map(|(c, s)| !feasible(c) || s.as_ref().is_none_or(|s| !fits(c, s)))
            .collect();
        let zero = PartState {
            remaining: 0,
            reset: Duration::ZERO,
            degraded: false,
        };
        if overall(checks, &over) {
            return Ok(Decision {
                over: true,
                parts: checks
                    .iter()
                    .zip(&peeked)
                    .zip(&over)
                    .map(|((c, s), &o)| outcome(c, s.unwrap_or(zero), o, false))
                    .collect(),
            });
        }
        let spend: Vec<usize> = (0..checks.len())
            .filter(|&i| !over[i] && checks[i].hits > 0)
            .collect();
        let parts: Vec<Part> = spend.iter().map(|&i| charged(&checks[i])).collect();
        let granted = if parts.is_empty() {
            Some(Vec::new())
        } else {
            match backend.try_all(&parts, deadline).await? {
                Charge::Granted(states) => Some(states),
                Charge::Refused => None,
            }
        };
        if let Some(states) = granted {
            let mut out: Vec<PartOutcome> = checks
                .iter()
                .zip(&peeked)
                .zip(&over)
                .map(|((c, s), &o)| outcome(c, s.unwrap_or(zero), o, false))
                .collect();
            for (&i, s) in spend.iter().zip(states) {
                out[i] = outcome(&checks[i], s, false, true);
            }
            return Ok(Decision {
                over: false,
                parts: out,
            });
        }
    }
    Ok(Decision {
        over: true,
        parts: checks
            .iter()
            .map(|c| PartOutcome {
                over: true,
                remaining: 0,
                reset: Duration::ZERO,
                used_before: u64::from(c.part.limit.requests_per_unit),
                degraded: false,
            })
            .collect(),
    })
}
