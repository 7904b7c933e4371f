//! The rules as understood: what `validate` makes of a file once every
//! field has been checked, and what `limiter-config` builds limiters from.
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

use limiter_calendar::CalendarQuota;
use limiter_core::Quota;

use crate::algorithm::{Algorithm, Fixed};
use crate::source::Pos;
use crate::units::Rate;

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
    /// (`RuleSet::get` in `limiter-config`), never matched by the router.
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
    /// Keys with a quota of their own (`overrides:`), in file order; only
    /// on a keyed local `token_bucket` or `leaky_bucket` rule. Not part of
    /// the [`shape`](RuleSpec::shape): a reload applies them live.
    pub overrides: Vec<KeyOverride>,
    /// Decide and count, but refuse and delay nothing (`shadow: true` on
    /// the rule, or at the top of the file for every rule that does not say
    /// `shadow: false`). Not part of the [`shape`](RuleSpec::shape):
    /// switching it keeps the limiter's state.
    pub shadow: bool,
    /// Whether a shadowed rule's responses carry the rate-limit headers of
    /// its decisions (`shadow_headers: true`); by default a shadowed rule
    /// is invisible to clients.
    pub shadow_headers: bool,
    /// Block a key outright after it is refused too often (`penalty`);
    /// keyed rules only.
    pub penalty: Option<PenaltySpec>,
    /// What a request costs: up front, and after its response (`cost`).
    /// Not part of the [`shape`](RuleSpec::shape): a reload applies it to
    /// the next requests, keeping the limiter's state.
    pub cost: CostSpec,
    /// A calendar quota beside the rate (`quota: { limit: 10000, per:
    /// month }`): a composite that both must admit, all or nothing (a
    /// refusal by one charges nothing on the other). Only on a
    /// `token_bucket` or `leaky_bucket` rule; per key on a keyed rule (at
    /// most `max_keys` keys). Not part of the [`shape`](RuleSpec::shape):
    /// the count is kept apart from the rate's state, so a reload that
    /// changes only the limit keeps the period's count, and one that
    /// changes the period, reset day or zone starts a new count without
    /// touching the rate.
    pub quota: Option<CalendarQuota>,
}

/// What a request of a rule costs (`cost: 3`, or `cost: { request: 1,
/// response_header: x-tokens-used, max_debt: 1m }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostSpec {
    /// The permits a request takes when it is admitted: 1 to the rule's
    /// burst (default 1).
    pub request: u32,
    /// The response header that states the request's total cost; the rest
    /// (total − `request`) is charged to the key as debt when the response
    /// head arrives. GCRA rules only (`token_bucket`, `leaky_bucket`;
    /// local, keyed or Redis).
    pub response_header: Option<HeaderName>,
    /// The cap on that debt: right after a charge the key's next permit is
    /// at most `max(max_debt, t)` away. From the rule's `t` to
    /// [`MAX_DEBT_LIMIT`](limiter_core::debt::MAX_DEBT_LIMIT) (one day);
    /// default [`DEFAULT_MAX_DEBT`](limiter_core::debt::DEFAULT_MAX_DEBT) (one
    /// minute).
    pub max_debt: Duration,
}

impl Default for CostSpec {
    fn default() -> CostSpec {
        CostSpec {
            request: 1,
            response_header: None,
            max_debt: limiter_core::debt::DEFAULT_MAX_DEBT,
        }
    }
}

/// The most keys of one rule with a quota of their own, from the file and
/// the admin API together.
pub const MAX_OVERRIDES: usize = 10_000;

/// One key's own quota (`overrides: { "tenant-7": { rate: 100/s, burst: 20 } }`).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyOverride {
    /// The key's text: for a one-part key (`ip`, `header:x-tenant`) its
    /// value as the request carries it; for a key of several parts, the
    /// encoded key as `explain` and the admin API show it.
    pub key: String,
    /// Where the key is written.
    pub pos: Pos,
    /// The rate as written.
    pub rate: Rate,
    /// The rate with its burst.
    pub quota: Quota,
}

/// A rule's penalty box: a key refused `after` times within `within` is
/// refused outright for `block` (`penalty: { after: 10, within: 1m, block:
/// 5m }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PenaltySpec {
    /// The refusals that block: 1 to [`MAX_PENALTY_AFTER`].
    pub after: u32,
    /// The window they are counted in: at least 1 ms, whole milliseconds,
    /// under 2^42 ms.
    pub within: Duration,
    /// How long a block lasts: more than 0, at most 2^60 ns (36 years).
    pub block: Duration,
}

/// The most refusals a [`PenaltySpec`] can count (`2^20 − 1`, what
/// `limiter-keyed`'s penalty box counts in its state word).
pub const MAX_PENALTY_AFTER: u32 = (1 << 20) - 1;

/// What must stay equal for a reload to update a live limiter in place
/// (see [`RuleSpec::shape`]): compare two shapes with `==`.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape<'a> {
    kind: &'static str,
    key_is_global: bool,
    backend: &'a BackendSpec,
    fixed: Fixed<'a>,
    max_keys: usize,
}

impl RuleSpec {
    /// The part of the rule that a live limiter cannot change: algorithm,
    /// whether keyed, the backend and, for the algorithms without
    /// `set_quota` (sliding window, warm-up, adaptive), all their numbers.
    /// The calendar `quota` is not part of it: its count is kept apart
    /// from the rate's state (see [`RuleSpec::quota`]).
    pub fn shape(&self) -> Shape<'_> {
        Shape {
            kind: self.algorithm.name(),
            key_is_global: self.key.is_global(),
            backend: &self.backend,
            fixed: self.algorithm.fixed(),
            max_keys: self.max_keys,
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
    /// The server's URL: one server (`redis://`, `rediss://`, `unix://`)
    /// or a Sentinel master (`redis+sentinel://`, `rediss+sentinel://`).
    pub url: String,
    /// The prefix of the rule's Redis keys (default `limiter:RULE`).
    pub key_prefix: String,
    /// What to answer while Redis is unavailable.
    pub failure_policy: WhenRedisDown,
    /// The timeout of one Redis call.
    pub timeout: Duration,
    /// TLS settings (only with a TLS URL: `rediss://`, `rediss+sentinel://`).
    pub tls: Option<RedisTlsSpec>,
}

impl RedisSpec {
    /// The URL with its password and `sentinel_password` shown as `***`:
    /// what a listing or a log may print.
    ///
    /// ```
    /// # use limiter_rules::RedisSpec;
    /// # fn spec(url: &str) -> RedisSpec { RedisSpec { url: url.into(), key_prefix: String::new(),
    /// #     failure_policy: Default::default(), timeout: Default::default(), tls: None } }
    /// assert_eq!(spec("redis://app:s3cret@db:6379/0").redacted_url(), "redis://app:***@db:6379/0");
    /// ```
    pub fn redacted_url(&self) -> String {
        redacted(&self.url)
    }
}

/// `url` with its secrets replaced by `***`: the password of the userinfo
/// and the value of a `sentinel_password` parameter. For messages and
/// listings, which must not leak credentials.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match before_query.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (before_query, None),
    };
    let mut out = format!("{scheme}://");
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            match userinfo.split_once(':') {
                Some((user, _)) => out += &format!("{user}:***"),
                None => out += "***", // a lone userinfo is a password (redis://PASSWORD@host)
            }
            out += &format!("@{hosts}");
        }
        None => out += authority,
    }
    if let Some(p) = path {
        out += &format!("/{p}");
    }
    if let Some(q) = query {
        let params: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("sentinel_password") => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect();
        out += &format!("?{}", params.join("&"));
    }
    out
}

/// The `tls` table of a Redis backend: PEM files, read when the rule set
/// is built.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RedisTlsSpec {
    /// The CA that signs the server's certificate (the system's roots
    /// without it).
    pub ca_file: Option<std::path::PathBuf>,
    /// The client certificate (with `key_file`).
    pub cert_file: Option<std::path::PathBuf>,
    /// The client certificate's key (with `cert_file`).
    pub key_file: Option<std::path::PathBuf>,
    /// Accept a server certificate that does not name the host (its chain
    /// is still verified).
    pub skip_hostname_verification: bool,
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

/// What a rule does with a request over its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Refuse it at once (HTTP: `429`); it consumes nothing.
    #[default]
    Reject,
    /// Hold it until its slot if that comes within `max_delay`; refuse it
    /// at once otherwise.
    Delay {
        /// The longest a request is held.
        max_delay: Duration,
    },
}

/// What a Redis rule answers while Redis is unavailable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WhenRedisDown {
    /// Admit every request.
    Open,
    /// Refuse every request.
    Closed,
    /// Decide in this process at `share` of the quota (in `(0, 1]`:
    /// `1/instances`). The default, with `share` 1.
    Local {
        /// The fraction of the quota this instance may use on its own.
        share: f64,
    },
    /// Report the error to the caller.
    Error,
}

impl Default for WhenRedisDown {
    fn default() -> WhenRedisDown {
        WhenRedisDown::Local { share: 1.0 }
    }
}
