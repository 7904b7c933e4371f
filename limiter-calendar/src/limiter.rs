//! [`CalendarLimiter`]: a [`CalendarQuota`] on one lock-free state word.
//!
//! Every decision is: one clock read (nanoseconds since the Unix epoch),
//! one relaxed load of the cached window, the pure decision of
//! [`crate::decide`] on one load of the state word, and on admission one
//! `compare_exchange_weak`, retried on the value a failed CAS returns. A
//! refusal writes nothing. The time-zone arithmetic runs once per period
//! (when the cached window no longer holds `now`), never per request.
//!
//! # The window cache
//!
//! A second word caches the current period as `[start: u32 | end: u32]`.
//! Every value ever stored in it is the exact window of this quota for some
//! instant, so a reader that finds `now` inside it may use it whatever the
//! interleaving: the cache is a pure function's memo, not shared state with
//! an invariant across words.

use core::time::Duration;

use limiter_core::{AcquireError, Clock, Decide, Denial, Grant, Headroom, Policy};

use crate::clock::UnixClock;
use crate::decide::{self, Refusal, pack, start, used};
use crate::period::{CalendarError, CalendarQuota, Window};
use crate::sync::{AtomicU32, AtomicU64, Ordering};

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A granted calendar decision: what is left and when the period resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalendarGrant {
    /// Permits left in the period after this grant, and the time until the
    /// period resets (when every permit comes back at once).
    pub headroom: Headroom,
    /// The instant the period resets, in seconds since the Unix epoch.
    pub reset_at: u32,
}

/// A fixed allowance per calendar period (day, week, month) in a time zone,
/// decided lock-free on one `AtomicU64`.
///
/// The clock must read **nanoseconds since the Unix epoch**: [`UnixClock`]
/// (the system's wall clock) by default, a
/// [`ManualClock`](limiter_core::ManualClock) set to an instant in tests.
/// State is in memory; a restart starts every period afresh (the Redis
/// backend keeps it across restarts).
///
/// A refusal's wait ([`AcquireError::RateLimited`]) is exactly the time
/// until the period resets.
///
/// # Memory ordering
///
/// Each grant is one successful CAS on the state word, so decisions are
/// linearizable and no interleaving grants more than the limit in a period.
/// The limit is read with a relaxed load: a concurrent
/// [`set_limit`](CalendarLimiter::set_limit) takes effect for decisions that
/// read it after the store, with no other data published with it.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use limiter_calendar::{CalendarLimiter, CalendarQuota, Period};
/// use limiter_core::{AcquireError, ManualClock};
///
/// // 2 per day in UTC; the clock at 2024-02-29T23:00:00Z.
/// let clock = ManualClock::starting_at(1_709_247_600 * 1_000_000_000);
/// let quota = CalendarQuota::new(2, Period::Day)?;
/// let limiter = CalendarLimiter::with_clock(quota, clock.clone());
/// let grant = limiter.acquire_n(2)?;
/// assert_eq!(grant.headroom.remaining, 0);
/// assert_eq!(grant.reset_at, 1_709_251_200); // 2024-03-01T00:00:00Z
/// assert_eq!(
///     limiter.try_acquire_n(1),
///     Err(AcquireError::RateLimited { wait: Duration::from_secs(3600) })
/// );
/// clock.advance(Duration::from_secs(3600));
/// assert!(limiter.try_acquire_n(2).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CalendarLimiter<C: Clock = UnixClock> {
    /// `[start | used]`, see [`crate::decide`].
    state: AtomicU64,
    /// `[start | end]` of the last window computed.
    window: AtomicU64,
    limit: AtomicU32,
    quota: CalendarQuota,
    clock: C,
}

impl CalendarLimiter<UnixClock> {
    /// A limiter for `quota` on the system's wall clock.
    pub fn new(quota: CalendarQuota) -> CalendarLimiter<UnixClock> {
        CalendarLimiter::with_clock(quota, UnixClock)
    }
}

impl<C: Clock> CalendarLimiter<C> {
    /// A limiter for `quota` on `clock`, which reads nanoseconds since the
    /// Unix epoch. Every period starts with its whole limit.
    pub fn with_clock(quota: CalendarQuota, clock: C) -> CalendarLimiter<C> {
        CalendarLimiter {
            state: AtomicU64::new(0),
            window: AtomicU64::new(0),
            limit: AtomicU32::new(quota.limit()),
            quota,
            clock,
        }
    }

    /// The quota (its limit as built; [`limit`](CalendarLimiter::limit) is
    /// the one in force).
    pub fn quota(&self) -> &CalendarQuota {
        &self.quota
    }

    /// The limit in force.
    pub fn limit(&self) -> u32 {
        // Relaxed: a single value, nothing published with it.
        self.limit.load(Ordering::Relaxed)
    }

    /// Changes the limit live. The count of the current period is kept in
    /// permits: lowering the limit below what was used refuses until the
    /// reset; raising it grants the difference at once.
    ///
    /// # Errors
    ///
    /// [`CalendarError::ZeroLimit`] for 0.
    pub fn set_limit(&self, limit: u32) -> Result<(), CalendarError> {
        if limit == 0 {
            return Err(CalendarError::ZeroLimit);
        }
        // Relaxed: see the type's memory-ordering section.
        self.limit.store(limit, Ordering::Relaxed);
        Ok(())
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Takes one permit of the current period.
    ///
    /// # Errors
    ///
    /// As [`acquire_n`](CalendarLimiter::acquire_n).
    pub fn try_acquire(&self) -> Result<(), AcquireError> {
        self.try_acquire_n(1)
    }

    /// Takes `n` permits of the current period, all or nothing.
    ///
    /// # Errors
    ///
    /// As [`acquire_n`](CalendarLimiter::acquire_n).
    pub fn try_acquire_n(&self, n: u32) -> Result<(), AcquireError> {
        self.acquire_n(n).map(|_| ())
    }

    /// Takes `n` permits of the current period, all or nothing, and says
    /// what is left and when the period resets, from the word this decision
    /// wrote.
    ///
    /// # Errors
    ///
    /// [`AcquireError::InsufficientCapacity`] when `n` exceeds the limit,
    /// [`AcquireError::RateLimited`] with the exact time until the reset when
    /// the period has fewer than `n` left, [`AcquireError::TimeOutOfRange`]
    /// for a clock outside 1970 to 2106.
    pub fn acquire_n(&self, n: u32) -> Result<CalendarGrant, AcquireError> {
        let now = self.clock.now();
        let window = self.window_at(now)?;
        let limit = self.limit();
        match acquire_on(&self.state, window.start, n, limit) {
            Ok(Some(word)) => grant_of(&self.quota, word, window, limit, now),
            // A lone limiter's word is never retired (only a keyed table's
            // sweeper retires words); refuse rather than grant if it were.
            Ok(None) => Err(AcquireError::TimeOutOfRange { now }),
            Err(refusal) => Err(refusal_of(&self.quota, refusal, window, n, limit, now)),
        }
    }

    /// Permits left in the current period (0 when the clock is out of
    /// range).
    pub fn available(&self) -> u32 {
        let now = self.clock.now();
        match self.window_at(now) {
            // Relaxed: a snapshot of one word.
            Ok(w) => decide::remaining(self.state.load(Ordering::Relaxed), w.start, self.limit()),
            Err(_) => 0,
        }
    }

    /// The current period.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimeOutOfRange`] for a clock outside 1970 to 2106.
    pub fn window(&self) -> Result<Window, AcquireError> {
        self.window_at(self.clock.now())
    }

    /// The window holding `now` (ns since the Unix epoch), from the cache
    /// when it holds `now`.
    fn window_at(&self, now: u64) -> Result<Window, AcquireError> {
        window_cached(&self.window, &self.quota, now)
    }
}

/// The window holding `now` (ns since the Unix epoch) from `cache` (`[start
/// | end]`) when it holds `now`, else computed and stored there.
pub(crate) fn window_cached(
    cache: &AtomicU64,
    quota: &CalendarQuota,
    now: u64,
) -> Result<Window, AcquireError> {
    let out_of_range = AcquireError::TimeOutOfRange { now };
    let second = u32::try_from(now / NANOS_PER_SEC).map_err(|_| out_of_range)?;
    // Relaxed: every value stored is an exact window of this quota (see
    // the module doc); containment is checked on the value read.
    let cached = cache.load(Ordering::Relaxed);
    let window = Window {
        start: start(cached),
        end: used(cached),
    };
    if window.contains(second) {
        return Ok(window);
    }
    let window = quota.window_at(second).map_err(|_| out_of_range)?;
    // Relaxed: as the load above.
    cache.store(pack(window.start, window.end), Ordering::Relaxed);
    Ok(window)
}

/// The word a state word holds once a keyed table's sweeper took it out
/// (`start` = `u32::MAX`, where no window can start: its end would not
/// fit). A decision that meets it looks the key up again.
pub(crate) const RETIRED: u64 = u64::MAX;

/// The CAS loop on one state word: the word after granting `n` in the
/// period starting at `current_start` (unchanged for `n == 0`), `None` if
/// the word is [`RETIRED`], or the refusal (which writes nothing).
pub(crate) fn acquire_on(
    state: &AtomicU64,
    current_start: u32,
    n: u32,
    limit: u32,
) -> Result<Option<u64>, Refusal> {
    // Relaxed load: the word carries only its own value; each grant is
    // decided on the value a CAS compares against.
    let mut word = state.load(Ordering::Relaxed);
    loop {
        if word == RETIRED {
            return Ok(None);
        }
        let next = decide::decide(word, current_start, n, limit)?;
        if next == word {
            return Ok(Some(word));
        }
        // Relaxed on both sides: the CAS orders grants on this word (a
        // single total order per atomic); nothing else is published with
        // it.
        match state.compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Ok(Some(next)),
            Err(current) => word = current,
        }
    }
}

/// The grant read from the word a decision wrote (or found, for `n == 0`).
pub(crate) fn grant_of(
    quota: &CalendarQuota,
    word: u64,
    window: Window,
    limit: u32,
    now: u64,
) -> Result<CalendarGrant, AcquireError> {
    let end = end_of(quota, start(word).max(window.start), window, now)?;
    Ok(CalendarGrant {
        headroom: Headroom {
            remaining: decide::remaining(word, window.start, limit),
            refill_in: until(end, now),
        },
        reset_at: end,
    })
}

/// The error of a refusal: more than the limit, or the wait until the
/// exhausted period ends.
pub(crate) fn refusal_of(
    quota: &CalendarQuota,
    refusal: Refusal,
    window: Window,
    n: u32,
    limit: u32,
    now: u64,
) -> AcquireError {
    match refusal {
        Refusal::Insufficient => AcquireError::InsufficientCapacity {
            requested: n,
            burst: limit,
        },
        Refusal::Exhausted { period_start } => match end_of(quota, period_start, window, now) {
            Ok(end) => AcquireError::RateLimited {
                wait: until(end, now),
            },
            Err(e) => e,
        },
    }
}

/// The end of the period starting at `period_start`: the current window's,
/// or (after a backwards clock step) a newer one's.
fn end_of(
    quota: &CalendarQuota,
    period_start: u32,
    current: Window,
    now: u64,
) -> Result<u32, AcquireError> {
    if period_start == current.start {
        return Ok(current.end);
    }
    quota
        .window_at(period_start)
        .map(|w| w.end)
        .map_err(|_| AcquireError::TimeOutOfRange { now })
}

/// The time from `now` (ns) until the second `end`.
pub(crate) fn until(end: u32, now: u64) -> Duration {
    Duration::from_nanos((u64::from(end) * NANOS_PER_SEC).saturating_sub(now))
}

/// The decision seam: one subject (`Key = ()`), grants at once or
/// refusals (a calendar period cannot hold a future slot: a month's wait is
/// never a reservation; a wait never helps before the reset, which the denial's
/// `retry_after` names), grants that cannot be given back (`Ticket = ()`,
/// `cancel` is `false`), and a policy of `limit` permits per current period
/// (`burst = limit`, `interval = period / limit`, so `window()` is the
/// period's length, 23 or 25 hours on a DST day).
impl<C: Clock> Decide for CalendarLimiter<C> {
    type Key = ();
    type Ticket = ();

    fn decide(&self, _key: &(), cost: u32, _max_wait: Duration) -> Result<Grant<()>, Denial> {
        let decided = self.acquire_n(cost);
        let policy = self.policy();
        match decided {
            Ok(grant) => Ok(Grant {
                ticket: (),
                wait: Duration::ZERO,
                headroom: grant.headroom,
                policy,
            }),
            Err(error) => Err(Denial::refused(error, policy)),
        }
    }

    fn cancel(&self, _key: &(), _ticket: ()) -> bool {
        false
    }
}

impl<C: Clock> CalendarLimiter<C> {
    /// `limit` permits per current period (see the `Decide` impl).
    fn policy(&self) -> Policy {
        let limit = self.limit();
        let period = self.window().map_or(Duration::ZERO, |w| {
            Duration::from_secs(u64::from(w.end - w.start))
        });
        Policy {
            burst: limit,
            interval: period / limit,
        }
    }
}
