//! Rate-limit rule files, read and checked: a YAML or TOML file in, the
//! rules as understood ([`RuleSpec`]) or every problem of the file out,
//! each with its file, line, column, rule, field and fix.
//!
//! This crate needs serde and the format crates only (no async runtime, no
//! HTTP stack, no Redis client, no file watcher), so a CI job or an editor
//! plugin can check a rule file without building the limiters.
//! `limiter-config` builds the limiters, the HTTP router and hot reload on
//! top of it and re-exports every public item here.
//!
//! # Which item do I use
//!
//! | you want | use |
//! |---|---|
//! | to check a file | [`check_file`], [`check_str`] (or the `limiter check FILE` command of `limiter-cli`) |
//! | what went wrong, where, and the fix | [`ConfigErrors`] / [`ConfigError`] / [`Problem`] |
//! | the rules as understood | [`RuleSpec`], [`Algorithm`], [`KeySpec`], [`MatchSpec`], ... |
//! | which rule (or upstream) a request path belongs to | [`RouteTable`] over [`MatchSpec`]s |
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use limiter_rules::{Format, KeyPart, Mode, check_str};
//!
//! let yaml = "\
//! rate_limits:
//!   order_service:
//!     algorithm: leaky_bucket
//!     rate: 800
//!   payment_gateway:
//!     algorithm: token_bucket
//!     rate: 100
//!     burst: 200
//!     per_ip: true
//! ";
//! let rules = check_str("rules.yaml".as_ref(), yaml, Format::Yaml)?;
//! assert_eq!(rules[0].algorithm.quota().unwrap().period_nanos(), 1_250_000); // 800/s
//! assert_eq!(rules[0].mode, Mode::Delay { max_delay: Duration::from_secs(1) });
//! assert_eq!(rules[1].key.parts, [KeyPart::Ip]);
//! # Ok::<(), limiter_rules::ConfigErrors>(())
//! ```
//!
//! # Guarantees
//!
//! * **Every problem at once**, in file order, each with file, line,
//!   column, rule, field and fix. Unknown fields are errors, listed against
//!   the fields that rule's algorithm allows.
//! * **Nothing the limiter cannot represent gets past the check**: numbers
//!   go through `limiter-core`'s own constructors (on a `ManualClock`, so
//!   nothing runs), and their [`QuotaError`](limiter_core::QuotaError) text
//!   is the fix. Building a limiter from a [`RuleSpec`] cannot fail on the
//!   numbers.
//! * **The order of rules never decides**: two rules that some request could
//!   match at the same precedence are refused ([`Problem::AmbiguousMatch`]).
//!
//! Modules: `source` (file text to a positioned tree), `units` (rates,
//! durations), `algorithm` (one definition per algorithm: its fields, their
//! checks, its defaults; how to add one is in its docs), `validate` (the
//! schema walk, which names no algorithm), `schema` (the rules as
//! understood), `routes` and `route_table` (matching, precedence,
//! ambiguity, the lookup), `error`.
//!
//! # Adding an algorithm
//!
//! One file in `src/algorithm/` with its definition and its field checks,
//! its variant in [`Algorithm`] (the compiler lists the arms to add, all in
//! `src/algorithm/mod.rs`), and the arm that builds its limiter in
//! `limiter-config`; the steps are in the `algorithm` module's docs.

mod algorithm;
mod error;
mod route_table;
mod routes;
mod schema;
mod source;
mod units;
mod validate;

use std::path::Path;

pub use algorithm::{ALGORITHMS, Algorithm, ControllerSpec, EstimatorSpec, QueueSpec};
pub use error::{ConfigError, ConfigErrors, Fixable, Problem};
pub use limiter_calendar::{CalendarQuota, Period};
pub use limiter_concurrency::{Bounds, QueueOrder};
pub use route_table::RouteTable;
pub use routes::Matcher;
pub use schema::{
    BackendSpec, CostSpec, DEFAULT_MAX_DELAY, DEFAULT_MAX_KEYS, HeaderSpec, KeyOverride, KeyPart,
    KeySpec, MAX_OVERRIDES, MAX_PENALTY_AFTER, MatchSpec, Mode, PathMatch, PenaltySpec, RedisSpec,
    RedisTlsSpec, RuleSpec, Shape, WhenRedisDown,
};
pub use source::{Format, Node, Pos, SyntaxError, Value, parse as parse_tree};
pub use units::{Rate, parse_duration};

/// Reads and checks `path`: the rules as understood, or every problem.
///
/// # Errors
///
/// [`ConfigErrors`]: every problem of the file, in file order.
///
/// # Examples
///
/// ```
/// use limiter_rules::{Problem, check_file};
///
/// # let dir = std::env::temp_dir().join(format!("limiter-rules-check-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("bad.yaml");
/// std::fs::write(&path, "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: 0\n    burst: 0\n")?;
/// let errors = check_file(&path).unwrap_err();
/// assert_eq!(errors.errors().len(), 2); // both, not just the first
/// assert_eq!((errors.errors()[0].pos.line, errors.errors()[0].pos.column), (4, 11));
/// assert!(matches!(errors.errors()[1].problem, Problem::ZeroBurst));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_file(path: &Path) -> Result<Vec<RuleSpec>, ConfigErrors> {
    let one = |problem| {
        ConfigErrors(vec![ConfigError {
            file: path.to_path_buf(),
            pos: Pos { line: 1, column: 1 },
            rule: None,
            field: None,
            problem,
        }])
    };
    let format = Format::of(path).ok_or_else(|| one(Problem::UnknownFormat))?;
    let text = std::fs::read_to_string(path).map_err(|e| {
        one(Problem::Io {
            message: e.to_string(),
        })
    })?;
    check_str(path, &text, format)
}

/// Checks `text` as the contents of `path` in `format`.
///
/// # Errors
///
/// As [`check_file`].
pub fn check_str(path: &Path, text: &str, format: Format) -> Result<Vec<RuleSpec>, ConfigErrors> {
    let root = source::parse(text, format).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: path.to_path_buf(),
            pos: e.pos,
            rule: None,
            field: None,
            problem: Problem::Syntax { message: e.message },
        }])
    })?;
    validate::validate(path, &root).map_err(ConfigErrors)
}

/// Checks `text` (JSON, or YAML) as one quota, `{"rate": "100/s", "burst":
/// 20}`: the fields and checks of a rule's `rate` and `burst` and of an
/// entry of `overrides:` (the body of the admin API's
/// `PUT /rules/{rule}/keys/{key}`). `path` names the text in errors.
///
/// # Errors
///
/// [`ConfigErrors`]: every problem, each at its line and column.
///
/// # Examples
///
/// ```
/// use limiter_core::Quota;
/// use limiter_rules::check_quota_str;
///
/// let (_, quota) = check_quota_str("body".as_ref(), r#"{"rate": "100/s", "burst": 20}"#)?;
/// assert_eq!(quota, Quota::per_second(100)?.with_burst(20)?);
/// let e = check_quota_str("body".as_ref(), r#"{"rate": 0}"#).unwrap_err();
/// assert!(e.to_string().starts_with("body:1:10: field `rate`: invalid rate: 0 permits admit nothing; fix: "));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_quota_str(
    path: &Path,
    text: &str,
) -> Result<(Rate, limiter_core::Quota), ConfigErrors> {
    let root = source::parse(text, Format::Yaml).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: path.to_path_buf(),
            pos: e.pos,
            rule: None,
            field: None,
            problem: Problem::Syntax { message: e.message },
        }])
    })?;
    validate::quota_table(path, &root).map_err(ConfigErrors)
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
