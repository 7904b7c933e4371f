//! Rate-limit rules from a YAML or TOML file: checked precisely, built into
//! limiters, routed over HTTP, and reloaded hot without losing state.
//!
//! # Which item do I use
//!
//! | you want | use |
//! |---|---|
//! | the limiters of a file, by name | [`RuleSet::load`], then [`RuleSet::get`] (a [`RuleLimiter`]: `take().await`, `try_acquire_key(..)`) |
//! | to check a file (CI, an editor) | [`check_file`], or the `limiter check FILE` binary |
//! | the rules applied to HTTP requests by route and method | [`RuleSet::layer`] ([`RulesLayer`], on `limiter-tower`) |
//! | to apply an edited file | [`RuleSet::reload`], [`RuleSet::watch`] (the file watcher), [`RuleSet::reload_with`] (watch and SIGHUP, on `limiter-reload`), `limiter watch FILE` |
//! | what went wrong, where, and the fix | [`ConfigErrors`] / [`ConfigError`] / [`Problem`] |
//!
//! # Example: seed 004's file
//!
//! ```
//! use std::time::Duration;
//! use limiter_config::{Algorithm, KeyPart, RuleSet, check_str, Format};
//! use limiter_tower::Mode;
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
//! Envoy, and which algorithm for which scene. Modules: `source` (file to
//! positioned tree), `units` (rates, durations), `validate` (the schema
//! check), `schema` (the rules as understood), `routes` (matching and
//! ambiguity), `keyed`, `live` (a rule's limiter state), `limiter`, `ruleset`, `build` (a reload, rule by rule), `watch`, `backend`, `latency` and `http`
//! (the tower half).

mod backend;
mod build;
mod error;
mod http;
mod keyed;
mod latency;
mod limiter;
mod live;
mod routes;
mod ruleset;
mod schema;
mod source;
mod units;
mod validate;
mod watch;

pub use backend::{RuleBackend, RuleKey, RuleTicket};
pub use error::{ALGORITHMS, ConfigError, ConfigErrors, Problem};
pub use http::{RulesLayer, RulesService};
pub use keyed::{KeyedRule, KeysFull};
pub use latency::Timed;
pub use limiter::{RuleError, RuleLimiter};
pub use ruleset::{
    CONFIG_ERRORS, CONFIG_GENERATION, ReloadReport, RuleSet, Snapshot, check_file, check_str,
};
pub use schema::{
    AdaptivePolicySpec, Algorithm, BackendSpec, DEFAULT_MAX_DELAY, DEFAULT_MAX_KEYS, HeaderSpec,
    KeyPart, KeySpec, MatchSpec, PathMatch, RedisSpec, RuleSpec,
};
pub use source::{Format, Pos};
pub use units::{Rate, parse_duration};
pub use watch::Watcher;

/// The clocks a rule set can run on: any core [`Clock`](limiter_core::Clock)
/// that can be cloned into each limiter (every clock of the workspace).
pub trait RuleClock: limiter_core::Clock + Clone + 'static {}

impl<C: limiter_core::Clock + Clone + 'static> RuleClock for C {}
