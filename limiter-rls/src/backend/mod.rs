//! Where the counters live: the [`CounterStore`] interface the decision policy
//! (`decide`) runs against, and its four implementations: GCRA and fixed
//! windows, each in memory or on Redis ([`AnyStore`] picks one at run
//! time without boxing).
//!
//! A backend offers two operations over a list of [`Part`]s (one per
//! request descriptor that has a limit):
//!
//! * [`CounterStore::try_all`]: charge every part `hits`, **all or nothing**. In
//!   memory the GCRA parts go through `limiter_core::composite::try_acquire_all` on
//!   limiter-keyed's per-key limits, the fixed windows under one lock; on
//!   Redis through limiter-redis's one-script `try_acquire_all`, the fixed
//!   windows through one script that checks every key before it increments
//!   any.
//! * [`CounterStore::peek`]: each part's state without charging anything.
//! * [`CounterStore::charge_over`]: charge every part `hits` **even past the
//!   limit**, for a cost already incurred (Envoy's per-descriptor
//!   `hits_addend`, typically reported on the response path). GCRA records
//!   the excess as debt (`tat` pushed past `now + tau + t`), at most one
//!   unit past the limit (`memory::debt_cap`): a check is then refused for
//!   at most one unit, as a fixed window forgets its excess when the window
//!   ends; fixed windows count past the limit.
//!
//! Parts passed to `try_all` have `1 <= hits <= requests_per_unit`; `peek`
//! and `charge_over` take any part with a known unit, `requests_per_unit`
//! 0 included (GCRA cannot count on a limit that admits nothing: such a
//! part is always past its limit, with the unit as its reset time).

pub mod memory;
pub mod redis;

pub use crate::window::UnixClock;

use core::time::Duration;

use tokio::time::Instant;

use crate::config::LimitSpec;

/// The two algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Exact GCRA: `requests_per_unit` per `unit` with a burst of
    /// `requests_per_unit`, no boundary bursts, refusals charge nothing.
    #[default]
    Gcra,
    /// envoyproxy/ratelimit's fixed windows aligned on Unix time (up to
    /// twice the limit across a window boundary), with their Redis keys.
    FixedWindow,
}

impl Algorithm {
    /// `gcra` or `fixed_window`.
    pub fn parse(s: &str) -> Option<Algorithm> {
        match s.to_ascii_lowercase().as_str() {
            "gcra" => Some(Algorithm::Gcra),
            "fixed_window" | "fixed-window" | "fixed" => Some(Algorithm::FixedWindow),
            _ => None,
        }
    }
}

/// One limit to decide: a counter key, its limit, and the hits to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The counter key without the window: `domain_key_value_…_` (their
    /// cache key minus the window start; the prefix is the backend's).
    pub key: String,
    /// The length of the domain at the start of `key` (the Cluster hash
    /// tag of the GCRA keys).
    pub domain_len: usize,
    /// The limit (a known unit; see the module docs for 0).
    pub limit: LimitSpec,
    /// Hits to add (see the module docs for the range each operation takes).
    pub hits: u32,
}

/// A part's state after a decision (or a peek).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartState {
    /// Requests a decision could still take now.
    pub remaining: u32,
    /// Time until the limit is fully available again: the GCRA bucket full,
    /// or the fixed window's end.
    pub reset: Duration,
    /// The answer did not come from the shared state (Redis unavailable,
    /// answered by the failure policy).
    pub degraded: bool,
    /// The limit is already past: GCRA debt beyond the burst (`tat − now >
    /// t · burst`), a fixed window counted past `requests_per_unit`, or a
    /// limit of 0 under GCRA. A check that charges nothing is refused only
    /// then (exactly at the limit it is admitted, as envoyproxy/ratelimit's).
    pub exceeded: bool,
}

/// The outcome of [`CounterStore::try_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Charge {
    /// Every part was charged; their states, in order.
    Granted(Vec<PartState>),
    /// At least one part refused; nothing was charged.
    Refused,
}

/// A backend that could not answer (only under the `error` failure
/// policy, or for a request no policy covers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError(pub String);

impl core::fmt::Display for BackendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BackendError {}

/// Counters for [`Part`]s; see the module docs.
///
/// `deadline` is the request's: every call a backend makes for one request
/// shares it, so a request costs at most the budget (`REDIS_TIMEOUT`)
/// however many calls its decision takes; a backend past it answers by its
/// failure policy without calling out. The in-memory backends never wait
/// and ignore it.
pub trait CounterStore: Send + Sync + 'static {
    /// Where the counters live, for traces: `memory` or `redis`.
    fn store(&self) -> &'static str;

    /// Charges every part, or none.
    fn try_all(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> impl Future<Output = Result<Charge, BackendError>> + Send;

    /// Every part's state, charging nothing.
    fn peek(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> impl Future<Output = Result<Vec<PartState>, BackendError>> + Send;

    /// Charges every part its hits even past the limit (see the module
    /// docs); every part's state after the charge.
    fn charge_over(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> impl Future<Output = Result<Vec<PartState>, BackendError>> + Send;
}

/// One of the four backends, chosen at start-up.
#[derive(Debug)]
pub enum AnyStore {
    /// GCRA in memory.
    MemoryGcra(memory::MemoryGcra),
    /// Fixed windows in memory.
    MemoryFixed(memory::MemoryFixed),
    /// GCRA on Redis or Redis Cluster.
    RedisGcra(redis::RedisGcra),
    /// Fixed windows on Redis or Redis Cluster.
    RedisFixed(redis::RedisFixed),
}

impl CounterStore for AnyStore {
    fn store(&self) -> &'static str {
        match self {
            AnyStore::MemoryGcra(_) | AnyStore::MemoryFixed(_) => "memory",
            AnyStore::RedisGcra(_) | AnyStore::RedisFixed(_) => "redis",
        }
    }

    async fn try_all(&self, parts: &[Part], deadline: Instant) -> Result<Charge, BackendError> {
        match self {
            AnyStore::MemoryGcra(b) => b.try_all(parts, deadline).await,
            AnyStore::MemoryFixed(b) => b.try_all(parts, deadline).await,
            AnyStore::RedisGcra(b) => b.try_all(parts, deadline).await,
            AnyStore::RedisFixed(b) => b.try_all(parts, deadline).await,
        }
    }

    async fn peek(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        match self {
            AnyStore::MemoryGcra(b) => b.peek(parts, deadline).await,
            AnyStore::MemoryFixed(b) => b.peek(parts, deadline).await,
            AnyStore::RedisGcra(b) => b.peek(parts, deadline).await,
            AnyStore::RedisFixed(b) => b.peek(parts, deadline).await,
        }
    }

    async fn charge_over(
        &self,
        parts: &[Part],
        deadline: Instant,
    ) -> Result<Vec<PartState>, BackendError> {
        match self {
            AnyStore::MemoryGcra(b) => b.charge_over(parts, deadline).await,
            AnyStore::MemoryFixed(b) => b.charge_over(parts, deadline).await,
            AnyStore::RedisGcra(b) => b.charge_over(parts, deadline).await,
            AnyStore::RedisFixed(b) => b.charge_over(parts, deadline).await,
        }
    }
}
