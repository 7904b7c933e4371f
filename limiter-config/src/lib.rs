//! Rate-limit rules from a YAML or TOML file: checked precisely, built into
//! limiters, routed over HTTP, and reloaded hot without losing state.
//!
//! # Which item do I use
//!
//! | you want | use |
//! |---|---|
//! | the limiters of a file, by name | [`RuleSet::load`], then [`RuleSet::get`] (a [`RuleLimiter`]: `take().await`, `try_acquire_key(..)`) |
//! | to check a file (CI, an editor) | [`check_file`] (from `limiter-rules`, which needs no runtime), or `limiter check FILE` (`limiter-cli`) |
//! | the rules applied to HTTP requests by route and method | [`RuleSet::layer`] ([`RulesLayer`], on `limiter-tower`) |
//! | to apply an edited file | [`RuleSet::reload`], [`RuleSet::watch`] (the file watcher), [`RuleSet::reload_with`] (watch and SIGHUP, on `limiter-reload`), `limiter watch FILE` |
//! | what a request would get now, by which rule and key, consuming nothing | [`RuleSet::explain`] |
//! | what went wrong, where, and the fix | [`ConfigErrors`] / [`ConfigError`] / [`Problem`] |
//!
//! # Example: seed 004's file
//!
//! ```
//! use std::time::Duration;
//! use limiter_config::{Algorithm, KeyPart, Mode, RuleSet, check_str, Format};
//!
//! let yaml = "\
//! rate_limits:
//!   api_gateway:
//!     algorithm: token_bucket
//!     rate: 5000
//!     burst: 10000
//!   order_service:
//!     algorithm: leaky_bucket
//!     rate: 800
//!   payment_gateway:
//!     algorithm: token_bucket
//!     rate: 100
//!     burst: 200
//!     per_ip: true
//! ";
//! let rules = check_str("seed.yaml".as_ref(), yaml, Format::Yaml)?;
//! let q = rules[0].algorithm.quota().unwrap();
//! assert_eq!((q.period_nanos(), q.burst()), (200_000, 10_000)); // 5000/s, burst 10000
//! let order = &rules[1];
//! assert_eq!(order.algorithm.quota().unwrap().period_nanos(), 1_250_000); // 800/s, burst 1
//! assert_eq!(order.mode, Mode::Delay { max_delay: Duration::from_secs(1) });
//! assert_eq!(rules[2].key.parts, [KeyPart::Ip]);
//! # Ok::<(), limiter_config::ConfigErrors>(())
//! ```
//!
//! # Guarantees
//!
//! * **Every problem at once, each with file, line, column, rule, field and
//!   fix.** Unknown fields are errors. Numbers go through the core's
//!   constructors, so nothing the limiter cannot represent gets past the
//!   check (see `validate`).
//! * **Reloads keep state.** A changed rate or burst reaches the live
//!   limiter through `set_quota` (every key of a keyed rule too): a drained
//!   limiter stays drained. A changed algorithm, key kind or backend
//!   replaces that rule's limiter. A file with problems changes nothing.
//! * **Atomic for readers.** A request or a [`RuleSet::snapshot`] sees one
//!   whole rule set.
//!
//! `docs/config.md` has the schema, the mapping from nginx, Traefik and
//! Envoy, and which algorithm for which scene.
//!
//! # Crates
//!
//! Reading and checking a file is `limiter-rules` (serde and the format
//! crates only; every item of it is re-exported here); this crate is the
//! runtime: limiters, the HTTP router, reload. The `limiter` command is
//! `limiter-cli`. Features: `axum` (default) makes `key: route` read axum's
//! matched route template.
//!
//! Modules, each using only those before it: `key` (a rule's key, encoded),
//! `calendar` (a rule's calendar `quota` on the wall clock), `live` (a rule's
//! limiter state), `error` ([`RuleError`]), `limiter` ([`RuleLimiter`]),
//! `acquire` (its library methods), `backend` (the rule as a
//! `limiter-tower` backend and key), `latency`, `layer` (a rule's
//! `limiter-tower` layer), `snapshot` ([`Snapshot`], [`ReloadReport`]),
//! `overrides` (per-key quotas from the file and the admin API),
//! `build` (a reload, rule by rule), `ruleset` ([`RuleSet`]), `http`
//! ([`RulesLayer`]), `watch`.

mod acquire;
mod backend;
mod build;
mod calendar;
mod error;
mod explain;
mod http;
mod key;
mod key_quotas;
mod latency;
mod layer;
mod limiter;
mod live;
mod local;
mod overrides;
mod ruleset;
mod snapshot;
mod store;
mod watch;

pub use error::RuleError;
pub use explain::{ExplainRequest, Explanation, QuotaReading, Verdict};
pub use http::{RulesLayer, RulesService};
pub use key::RuleKeyText;
pub use limiter::{PENALIZED, RuleLimiter, SHADOW_DELAYED, SHADOW_REJECTED};
pub use limiter_rules::{
    ALGORITHMS, Algorithm, BackendSpec, CalendarQuota, ConfigError, ConfigErrors, ControllerSpec,
    CostSpec, DEFAULT_MAX_DELAY, DEFAULT_MAX_KEYS, Format, HeaderSpec, KeyOverride, KeyPart,
    KeySpec, MAX_OVERRIDES, MAX_PENALTY_AFTER, MatchSpec, Matcher, Mode, PathMatch, PenaltySpec,
    Period, Pos, Problem, Rate, RedisSpec, RouteTable, RuleSpec, Shape, WhenRedisDown, check_file,
    check_quota_str, check_str, parse_duration,
};
pub use overrides::{KeyQuota, OverrideRefusal, QuotaSource};
pub use ruleset::{CONFIG_ERRORS, CONFIG_GENERATION, RuleSet};
pub use snapshot::{ReloadReport, Snapshot};
pub use watch::Watcher;

/// The clocks a rule set can run on: any core [`Clock`](limiter_core::Clock)
/// that can be cloned into each limiter (every clock of the workspace).
pub trait RuleClock: limiter_core::Clock + Clone + 'static {}

impl<C: limiter_core::Clock + Clone + 'static> RuleClock for C {}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
