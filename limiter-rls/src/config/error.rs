//! The errors of a config directory: each names the file, line and column,
//! what is wrong and what to change, written by limiter-rules' located
//! error (the same lines as a rule file's errors).
//!
//! A file is checked completely and every problem found becomes one
//! [`ConfigError`]; [`ConfigErrors`] holds them all, files in name order and
//! each file's problems in file order. [`Problem`] is the part a caller can
//! match on. envoyproxy/ratelimit stops at the first problem of the first
//! file; the checks themselves are the same ones.

use std::fmt;
use std::path::PathBuf;

use limiter_rules::Fixable;

/// What is wrong, as a variant a caller (or a test) can match on. The
/// Display text says what is wrong; [`Problem::fix`] says what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// The file or directory could not be read.
    Io {
        /// The operating system's message.
        message: String,
    },
    /// The file is not valid YAML.
    Syntax {
        /// The parser's message.
        message: String,
    },
    /// A field envoyproxy/ratelimit does not have.
    UnknownField {
        /// The field as written.
        found: String,
        /// The fields allowed here.
        expected: &'static [&'static str],
    },
    /// A value of the wrong type.
    WrongType {
        /// What the field takes.
        expected: &'static str,
        /// What the file has.
        found: &'static str,
    },
    /// `domain` is absent or empty.
    EmptyDomain,
    /// The same domain in two files.
    DuplicateDomain {
        /// The domain.
        domain: String,
        /// The file that declared it first.
        first: PathBuf,
    },
    /// A descriptor without a `key`.
    EmptyKey,
    /// Two descriptors with the same key and value under one parent.
    DuplicateDescriptor {
        /// The composite key, `domain.key_value.key2`.
        composite: String,
    },
    /// A `unit` that is not second, minute, hour, day, week, month or year.
    InvalidUnit {
        /// The unit as written (empty when absent).
        found: String,
    },
    /// `unlimited: true` with a `unit`.
    UnitWithUnlimited,
    /// `requests_per_unit` is negative or above 2^32 - 1.
    RequestsOutOfRange {
        /// The value as written.
        found: i128,
    },
    /// A `replaces` entry without a `name`.
    EmptyReplaces,
    /// A `replaces` entry naming its own rate limit.
    ReplacesItself {
        /// The name.
        name: String,
    },
    /// `share_threshold` on a value without `*`.
    ShareThresholdWithoutWildcard {
        /// The `key_value` as written.
        key: String,
    },
}

impl Fixable for Problem {
    fn fix(&self) -> String {
        match self {
            Problem::Io { .. } => "check that the path exists and is readable".into(),
            Problem::Syntax { .. } => "fix the YAML at this position".into(),
            Problem::UnknownField { expected, .. } => {
                format!("use one of: {}", expected.join(", "))
            }
            Problem::WrongType { expected, .. } => format!("write {expected} here"),
            Problem::EmptyDomain => "add `domain: <name>` at the top of the file".into(),
            Problem::DuplicateDomain { first, .. } => format!(
                "merge this file's descriptors into {} or rename the domain",
                first.display()
            ),
            Problem::EmptyKey => "give the descriptor a `key`".into(),
            Problem::DuplicateDescriptor { .. } => {
                "merge the two descriptors or give them different values".into()
            }
            Problem::InvalidUnit { .. } => {
                "use second, minute, hour, day, week, month or year".into()
            }
            Problem::UnitWithUnlimited => "remove `unit` (or `unlimited: true`)".into(),
            Problem::RequestsOutOfRange { .. } => {
                "use a whole number from 0 (block all) to 4294967295".into()
            }
            Problem::EmptyReplaces => "write `- name: <rate limit name>`".into(),
            Problem::ReplacesItself { .. } => "name another rate limit in `replaces`".into(),
            Problem::ShareThresholdWithoutWildcard { .. } => {
                "end the value with `*` or remove `share_threshold`".into()
            }
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Io { message } => write!(f, "cannot read: {message}"),
            Problem::Syntax { message } => write!(f, "not valid YAML: {message}"),
            Problem::UnknownField { found, .. } => write!(f, "unknown field `{found}`"),
            Problem::WrongType { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            Problem::EmptyDomain => f.write_str("the file has no domain"),
            Problem::DuplicateDomain { domain, first } => write!(
                f,
                "duplicate domain '{domain}' (already in {})",
                first.display()
            ),
            Problem::EmptyKey => f.write_str("descriptor has an empty key"),
            Problem::DuplicateDescriptor { composite } => {
                write!(f, "duplicate descriptor composite key '{composite}'")
            }
            Problem::InvalidUnit { found } if found.is_empty() => {
                f.write_str("the rate limit has no unit")
            }
            Problem::InvalidUnit { found } => write!(f, "invalid rate limit unit '{found}'"),
            Problem::UnitWithUnlimited => {
                f.write_str("should not specify rate limit unit when unlimited")
            }
            Problem::RequestsOutOfRange { found } => {
                write!(f, "requests_per_unit {found} is out of range")
            }
            Problem::EmptyReplaces => f.write_str("an empty replaces entry"),
            Problem::ReplacesItself { name } => {
                write!(f, "replaces names its own rate limit '{name}'")
            }
            Problem::ShareThresholdWithoutWildcard { key } => {
                write!(f, "share_threshold on '{key}', which has no wildcard value")
            }
        }
    }
}

/// One problem in one file, with its position: limiter-rules' located
/// error, written `file:line:column: problem; fix: …` (`rule` and `field`
/// stay `None`; the position says where).
pub type ConfigError = limiter_rules::ConfigError<Problem>;

/// Every problem found in a config directory (never empty), files in name
/// order.
pub type ConfigErrors = limiter_rules::ConfigErrors<Problem>;
