//! The rules as understood: what `validate` makes of a file once every
//! field has been checked, and what `RuleSet` builds limiters from.
//!
//! Every value here is already valid (quotas representable, URLs parsed,
//! CIDRs parsed, header names legal), so building a limiter from a
//! [`RuleSpec`] cannot fail on the numbers. Two specs with the same
//! [`RuleSpec::shape`] differ only in numbers that a live limiter can take
//! through `set_quota`; any other change replaces the limiter.

use std::fmt;
use std::time::Duration;

use http::Method;
use http::header::HeaderName;
use ipnet::IpNet;
use limiter_core::Quota;
use limiter_redis::FailurePolicy;
use limiter_tower::Mode;

use crate::source::Pos;
use crate::units::{DisplayDuration, Rate};

/// The default `max_delay` of a rule in delay mode (`leaky_bucket`'s default
/// mode): one second, so a leaky bucket at `r`/s queues at most `r` requests.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1);

/// The default cap on the keys of a keyed rule.
pub const DEFAULT_MAX_KEYS: usize = 100_000;

/// One rule of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    /// The rule's name (its key under `rate_limits`).
    pub name: String,
    /// Where the rule starts in the file.
    pub pos: Pos,
    /// The algorithm and its numbers.
    pub algorithm: Algorithm,
    /// What requests are counted by.
    pub key: KeySpec,
    /// Which HTTP requests the rule applies to; `None`: library use only
    /// ([`RuleSet::get`](crate::RuleSet::get)), never matched by the router.
    pub matcher: Option<MatchSpec>,
    /// Reject at once, or hold up to a delay.
    pub mode: Mode,
    /// Where the state lives.
    pub backend: BackendSpec,
    /// Client networks that pass uncounted.
    pub allowlist: Vec<IpNet>,
    /// Proxies whose `X-Forwarded-For` is believed (key `ip` then reads the
    /// client behind them).
    pub trusted_proxies: Vec<IpNet>,
    /// The rate-limit header syntax.
    pub headers: HeaderSpec,
    /// The most keys a keyed local rule holds.
    pub max_keys: usize,
}

/// What must stay equal for a reload to update a live limiter in place.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shape<'a> {
    kind: &'static str,
    key_is_global: bool,
    backend: &'a BackendSpec,
    fixed: Fixed<'a>,
    max_keys: usize,
}

/// The numbers of an algorithm that `set_quota` cannot change.
#[derive(Debug, Clone, PartialEq)]
enum Fixed<'a> {
    /// None: the whole quota moves through `set_quota`.
    Nothing,
    /// The priority classes (the quota moves).
    Classes(&'a [(String, f64)]),
    /// Everything (no `set_quota`).
    All(&'a Algorithm),
}

impl RuleSpec {
    /// The part of the rule that a live limiter cannot change: algorithm,
    /// whether keyed, the backend and, for the algorithms without
    /// `set_quota` (sliding window, warm-up, adaptive), all their numbers.
    pub(crate) fn shape(&self) -> Shape<'_> {
        let fixed = match &self.algorithm {
            Algorithm::TokenBucket { .. } | Algorithm::LeakyBucket { .. } => Fixed::Nothing,
            Algorithm::Priority { classes, .. } => Fixed::Classes(classes),
            other => Fixed::All(other),
        };
        Shape {
            kind: self.algorithm.name(),
            key_is_global: self.key.is_global(),
            backend: &self.backend,
            fixed,
            max_keys: self.max_keys,
        }
    }
}

/// An algorithm with its numbers, all valid.
#[derive(Debug, Clone, PartialEq)]
pub enum Algorithm {
    /// GCRA at `rate` with `burst`: reject mode by default.
    TokenBucket {
        /// The rate as written.
        rate: Rate,
        /// The quota (`rate` with `burst`).
        quota: Quota,
    },
    /// GCRA pacing at `rate` (burst 1 unless given): delay mode by default.
    LeakyBucket {
        /// The rate as written.
        rate: Rate,
        /// The quota.
        quota: Quota,
    },
    /// At most `limit` per `window`, the previous window weighted in.
    SlidingWindow {
        /// Permits per window.
        limit: u32,
        /// The window.
        window: Duration,
    },
    /// GCRA whose rate ramps up over `warm_up` after idle time.
    WarmUp {
        /// The rate when warm.
        rate: Rate,
        /// The warm quota.
        quota: Quota,
        /// How long a cold limiter takes to reach `rate`.
        warm_up: Duration,
        /// How much slower than `rate` a cold limiter starts.
        cold_factor: f64,
    },
    /// A rate moved between bounds by observed latency.
    Adaptive {
        /// The policy moving the rate.
        policy: AdaptivePolicySpec,
        /// The lowest rate, per second.
        min_rate: f64,
        /// The highest (and starting) rate, per second.
        max_rate: f64,
        /// The burst.
        burst: u32,
    },
    /// One GCRA shared by classes, each limited to its share of the burst.
    Priority {
        /// The rate as written.
        rate: Rate,
        /// The quota.
        quota: Quota,
        /// Class names and shares, highest class first (share 1.0).
        classes: Vec<(String, f64)>,
        /// The request header naming a request's class (HTTP); a request
        /// without it, or naming no class, is of the lowest class.
        class_header: Option<HeaderName>,
    },
}

/// Which latency policy an adaptive rule follows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AdaptivePolicySpec {
    /// `EwmaAimd`: hold the latency average at `target`.
    EwmaAimd {
        /// The target latency.
        target: Duration,
    },
    /// `PercentileWindow`: hold the p99 (per window) under `target`.
    Percentile {
        /// The latency threshold.
        target: Duration,
    },
}

impl Algorithm {
    /// The name as written in a file.
    pub fn name(&self) -> &'static str {
        match self {
            Algorithm::TokenBucket { .. } => "token_bucket",
            Algorithm::LeakyBucket { .. } => "leaky_bucket",
            Algorithm::SlidingWindow { .. } => "sliding_window",
            Algorithm::WarmUp { .. } => "warm_up",
            Algorithm::Adaptive { .. } => "adaptive",
            Algorithm::Priority { .. } => "priority",
        }
    }

    /// The GCRA quota of the algorithms that have one.
    pub fn quota(&self) -> Option<Quota> {
        match *self {
            Algorithm::TokenBucket { quota, .. }
            | Algorithm::LeakyBucket { quota, .. }
            | Algorithm::WarmUp { quota, .. }
            | Algorithm::Priority { quota, .. } => Some(quota),
            _ => None,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = |f: &mut fmt::Formatter<'_>, rate: &Rate, quota: &Quota| {
            write!(
                f,
                "rate {rate} (one permit every {}), burst {}",
                DisplayDuration(quota.period()),
                quota.burst()
            )
        };
        write!(f, "{}: ", self.name())?;
        match self {
            Algorithm::TokenBucket { rate, quota } | Algorithm::LeakyBucket { rate, quota } => {
                q(f, rate, quota)
            }
            Algorithm::SlidingWindow { limit, window } => {
                write!(f, "limit {limit} per {}", DisplayDuration(*window))
            }
            Algorithm::WarmUp {
                rate,
                quota,
                warm_up,
                cold_factor,
            } => {
                q(f, rate, quota)?;
                write!(
                    f,
                    ", warm-up {}, cold factor {cold_factor}",
                    DisplayDuration(*warm_up)
                )
            }
            Algorithm::Adaptive {
                policy,
                min_rate,
                max_rate,
                burst,
            } => {
                let (name, target) = match policy {
                    AdaptivePolicySpec::EwmaAimd { target } => ("ewma_aimd", target),
                    AdaptivePolicySpec::Percentile { target } => ("percentile", target),
                };
                write!(
                    f,
                    "policy {name} (target {}), rate {min_rate}/s to {max_rate}/s, burst {burst}",
                    DisplayDuration(*target)
                )
            }
            Algorithm::Priority {
                rate,
                quota,
                classes,
                class_header,
            } => {
                q(f, rate, quota)?;
                f.write_str(", classes")?;
                for (name, share) in classes {
                    write!(f, " {name}={share}")?;
                }
                match class_header {
                    Some(h) => write!(f, ", class from header {h}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// One part of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// The client address (the socket peer, or the client behind
    /// `trusted_proxies`).
    Ip,
    /// The rule's route (axum's matched route template, else the path the
    /// rule matched by: never the raw path, so ids cannot mint keys).
    Route,
    /// A request header's value.
    Header(HeaderName),
}

/// What requests are counted by: no parts is one global bucket.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeySpec {
    /// The parts, in order; empty for `global`.
    pub parts: Vec<KeyPart>,
}

impl KeySpec {
    /// Whether this is one bucket for every request.
    pub fn is_global(&self) -> bool {
        self.parts.is_empty()
    }
}

impl fmt::Display for KeySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.parts.is_empty() {
            return f.write_str("global");
        }
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(" + ")?;
            }
            match p {
                KeyPart::Ip => f.write_str("ip")?,
                KeyPart::Route => f.write_str("route")?,
                KeyPart::Header(h) => write!(f, "header:{h}")?,
            }
        }
        Ok(())
    }
}

/// Which requests a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchSpec {
    /// A route template or a path prefix.
    pub path: PathMatch,
    /// The methods; empty: all.
    pub methods: Vec<Method>,
}

/// A route template (`/orders/{id}`, `/files/{*rest}`) or a path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatch {
    /// The template, whole.
    Route(String),
    /// A prefix, matched at segment boundaries (`/api` matches `/api/x`,
    /// not `/apix`).
    Prefix(String),
}

/// Where a rule's state lives.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendSpec {
    /// In this process.
    Local,
    /// On Redis, shared by every process using it.
    Redis(RedisSpec),
}

/// A Redis backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisSpec {
    /// The server's URL.
    pub url: String,
    /// The prefix of the rule's Redis keys (default `limiter:RULE`).
    pub key_prefix: String,
    /// What to answer while Redis is unavailable.
    pub failure_policy: FailurePolicy,
    /// The timeout of one Redis call.
    pub timeout: Duration,
}

/// The rate-limit headers a rule's responses carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeaderSpec {
    /// `RateLimit-Policy` and `RateLimit` (IETF draft-10).
    #[default]
    Draft10,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`.
    Legacy,
    /// None (`Retry-After` on a 429 stays).
    None,
}
