//! The decision over all descriptors of one request: which are over the
//! limit, the overall answer, and what is charged, against any
//! [`CounterStore`].
//!
//! # The rule
//!
//! Three kinds of descriptor, as Envoy sends them:
//!
//! * a **check** (0 hits: a descriptor's own `hits_addend` of 0, Envoy's
//!   request path in quota mode) charges nothing and is over only when its
//!   limit is already past (GCRA debt beyond the burst, a fixed window
//!   counted past the limit); exactly at the limit it passes, as
//!   envoyproxy/ratelimit's `count + 0 > limit`;
//! * a **cost** (a descriptor's own `hits_addend` of 1 or more, Envoy's
//!   response path with `apply_on_stream_done`, a cost already incurred)
//!   is charged in full **even past the limit** and whatever the request's
//!   answer (GCRA: as debt, at most one unit of it; fixed windows: the count
//!   goes past the limit, as theirs); it answers over when it did not fit;
//! * a **request** (the request's `hits_addend`, 0 meaning 1) is over when
//!   its hits do not fit (more than `requests_per_unit`, or more than what
//!   remains now).
//!
//! A descriptor's answer is OK anyway in shadow mode (counted). The request
//! is over the limit (envoyproxy/ratelimit's rule) if any descriptor that
//! is not in quota mode answers over, or if there are quota-mode
//! descriptors and every one of them answers over. Then **no request
//! descriptor is charged**. Otherwise every request descriptor that fits is
//! charged its hits, all together.
//!
//! # How
//!
//! 1. The common case in one backend call: charge everything
//!    ([`CounterStore::try_all`]) when no descriptor is a check. Granted means
//!    every part fit: done.
//! 2. Refused (nothing charged): read every part ([`CounterStore::peek`]), apply
//!    the rule, and if the request passes (a shadow or some quota-mode
//!    descriptors refused) charge the request descriptors that fit, all
//!    together.
//! 3. If that charge is refused (another request took the room between the
//!    read and the charge), go back to 2, at most [`ATTEMPTS`] times; then
//!    the request is over the limit with nothing charged: stricter, never
//!    looser.
//! 4. Costs are charged past the limit ([`CounterStore::charge_over`]) once the
//!    answer is known.
//!
//! A limit of 0 never reports a reset of zero: its reset is the time until
//! more could be admitted (a fixed window's end) or, where nothing ever
//! will be, the unit.

use core::time::Duration;

use crate::backend::{BackendError, Charge, CounterStore, Part, PartState};

/// Reads and charges tried before a contended request is refused.
pub(crate) const ATTEMPTS: usize = 3;

/// One descriptor to decide.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    /// The counter (its `hits` is ignored: see `hits`).
    pub(crate) part: Part,
    /// The hits asked for (may exceed `u32` and the limit).
    pub(crate) hits: u64,
    /// The hits are a cost already incurred (the descriptor's own
    /// `hits_addend`): charged even past the limit.
    pub(crate) cost: bool,
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
    /// Time until the limit is full again (never zero for a limit of 0).
    pub(crate) reset: Duration,
    /// Used before this request (`requests_per_unit - remaining before`).
    pub(crate) used_before: u64,
    /// The backend answered by its failure policy.
    pub(crate) degraded: bool,
}

/// The decision over a request's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// The request is over the limit (no request descriptor charged).
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

/// Whether `c` is over the limit in `state` (before any charge).
fn is_over(c: &Check, state: &PartState) -> bool {
    if c.hits == 0 {
        state.exceeded
    } else if c.cost {
        c.hits > u64::from(state.remaining)
    } else {
        !feasible(c) || c.hits > u64::from(state.remaining)
    }
}

/// Whether `c` can ever fit (its hits at most its limit).
fn feasible(c: &Check) -> bool {
    c.hits <= u64::from(c.part.limit.requests_per_unit) && c.part.limit.requests_per_unit > 0
}

/// A part with its hits, for the backend.
fn charged(c: &Check) -> Part {
    let mut p = c.part.clone();
    p.hits = u32::try_from(c.hits).unwrap_or(u32::MAX);
    p
}

/// The outcome of `c` in the state `now` (after its charge, if charged),
/// with `remaining_before` requests left before this request.
fn outcome(c: &Check, now: PartState, over: bool, remaining_before: u64) -> PartOutcome {
    let limit = c.part.limit.requests_per_unit;
    let used_before = u64::from(limit).saturating_sub(remaining_before);
    let unit = Duration::from_secs(c.part.limit.unit.seconds().unwrap_or(1));
    PartOutcome {
        over,
        remaining: if over { 0 } else { now.remaining },
        // A limit of 0 admits nothing within the reset: never "retry now".
        reset: if limit == 0 && now.reset.is_zero() {
            unit
        } else {
            now.reset
        },
        used_before,
        degraded: now.degraded,
    }
}

/// Decides `checks` against `backend`; see the module docs.
///
/// # Errors
///
/// The backend's error (only under the `error` failure policy).
/// Every backend call shares `deadline` (the request's).
pub(crate) async fn decide<B: CounterStore>(
    backend: &B,
    checks: &[Check],
    deadline: tokio::time::Instant,
) -> Result<Decision, BackendError> {
    // The fast path needs every part to spend: a check that refuses must be
    // known before anything is charged. Costs that fit are charged here as
    // requests are.
    if !checks.is_empty() && checks.iter().all(|c| feasible(c) && c.hits > 0) {
        let parts: Vec<Part> = checks.iter().map(charged).collect();
        if let Charge::Granted(states) = backend.try_all(&parts, deadline).await? {
            return Ok(Decision {
                over: false,
                parts: checks
                    .iter()
                    .zip(states)
                    .map(|(c, s)| outcome(c, s, false, u64::from(s.remaining) + c.hits))
                    .collect(),
            });
        }
    }
    let parts: Vec<Part> = checks.iter().map(|c| c.part.clone()).collect();
    let mut peeked = Vec::new();
    let mut over = vec![true; checks.len()];
    let mut spent: Option<(Vec<usize>, Vec<PartState>)> = None;
    for _ in 0..ATTEMPTS {
        peeked = if parts.is_empty() {
            Vec::new()
        } else {
            backend.peek(&parts, deadline).await?
        };
        if peeked.len() != parts.len() {
            return Err(BackendError(
                "a read answered for fewer limits than asked".into(),
            ));
        }
        over = checks
            .iter()
            .zip(&peeked)
            .map(|(c, s)| is_over(c, s))
            .collect();
        if overall(checks, &over) {
            break;
        }
        let spend: Vec<usize> = (0..checks.len())
            .filter(|&i| !over[i] && checks[i].hits > 0 && !checks[i].cost)
            .collect();
        let charge: Vec<Part> = spend.iter().map(|&i| charged(&checks[i])).collect();
        let granted = if charge.is_empty() {
            Some(Vec::new())
        } else {
            match backend.try_all(&charge, deadline).await? {
                Charge::Granted(states) => Some(states),
                Charge::Refused => None,
            }
        };
        if let Some(states) = granted {
            spent = Some((spend, states));
            break;
        }
    }
    let mut after: Vec<Option<PartState>> = vec![None; checks.len()];
    let request_over = spent.is_none();
    if let Some((spend, states)) = spent {
        for (i, s) in spend.into_iter().zip(states) {
            after[i] = Some(s);
        }
    } else {
        // Contended past ATTEMPTS: every request descriptor answers over.
        if !overall(checks, &over) {
            for (o, c) in over.iter_mut().zip(checks) {
                *o |= !c.cost && c.hits > 0;
            }
        }
    }
    let costs: Vec<usize> = (0..checks.len())
        .filter(|&i| checks[i].cost && checks[i].hits > 0)
        .collect();
    if !costs.is_empty() {
        let charge: Vec<Part> = costs.iter().map(|&i| charged(&checks[i])).collect();
        let states = backend.charge_over(&charge, deadline).await?;
        for (&i, s) in costs.iter().zip(states) {
            after[i] = Some(s);
        }
    }
    let none = |c: &Check| PartState {
        remaining: 0,
        reset: Duration::ZERO,
        degraded: false,
        exceeded: c.part.limit.requests_per_unit == 0,
    };
    Ok(Decision {
        over: request_over,
        parts: checks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let before = peeked.get(i).copied().unwrap_or_else(|| none(c));
                outcome(
                    c,
                    after[i].unwrap_or(before),
                    over[i],
                    u64::from(before.remaining),
                )
            })
            .collect(),
    })
}
