//! The errors of a rule file: each names the file, line and column, the
//! rule, the field, what is wrong and what to change.
//!
//! A file is checked completely before anything is built, and every problem
//! found becomes one [`ConfigError`]; [`ConfigErrors`] holds them all, in
//! file order. [`Problem`] is the part a caller can match on.

use std::fmt;
use std::path::PathBuf;

use limiter_core::QuotaError;

use crate::algorithm::ALGORITHMS;

use crate::source::Pos;

/// What is wrong, as a variant a caller (or a test) can match on. The
/// Display text says what is wrong; [`Problem::fix`] says what to change.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    /// The file could not be read.
    Io {
        /// The operating system's message.
        message: String,
    },
    /// The file's extension is not `.yaml`, `.yml` or `.toml`.
    UnknownFormat,
    /// The file is not valid YAML or TOML.
    Syntax {
        /// The parser's message.
        message: String,
    },
    /// A field the schema does not have (a typo is never ignored).
    UnknownField {
        /// The field as written.
        found: String,
        /// The fields allowed here.
        expected: Vec<&'static str>,
    },
    /// A required field is absent.
    MissingField,
    /// A value of the wrong type (a list where a number belongs...).
    WrongType {
        /// What the field takes.
        expected: &'static str,
        /// What the file has.
        found: &'static str,
    },
    /// An algorithm this crate does not have.
    UnknownAlgorithm {
        /// The algorithm as written.
        found: String,
    },
    /// A rate of zero, a negative rate or an unreadable rate string.
    InvalidRate {
        /// Why.
        reason: String,
    },
    /// A burst (or limit) of zero.
    ZeroBurst,
    /// The numbers cannot be represented: the core's [`QuotaError`].
    Quota(QuotaError),
    /// A concurrency limiter or estimator refuses the numbers:
    /// `limiter-concurrency`'s error.
    Concurrency(limiter_concurrency::ConfigError),
    /// A duration such as `"250ms"` that does not parse or is out of range.
    InvalidDuration {
        /// Why.
        reason: String,
    },
    /// A `key` that is not one of the known kinds.
    UnknownKeyKind {
        /// The key part as written.
        found: String,
    },
    /// A Redis URL that does not parse.
    InvalidRedisUrl {
        /// The redis crate's message.
        message: String,
    },
    /// A CIDR that does not parse.
    InvalidCidr {
        /// The text as written.
        found: String,
    },
    /// Two rules match the same route and method; neither would be chosen
    /// predictably.
    AmbiguousMatch {
        /// The other rule.
        other: String,
        /// What both match.
        overlap: String,
    },
    /// A cost after the response on an algorithm that cannot carry GCRA
    /// debt (only `token_bucket` and `leaky_bucket` can).
    DebtUnsupported {
        /// The rule's algorithm.
        algorithm: &'static str,
    },
    /// A value outside what the field accepts (an enumeration, a range).
    InvalidValue {
        /// Why.
        reason: String,
        /// What would be accepted.
        expected: String,
    },
}

impl Problem {
    /// What to change to fix it.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_rules::Problem;
    ///
    /// let p = Problem::UnknownAlgorithm { found: "token-bucket".into() };
    /// assert!(p.fix().contains("token_bucket"));
    /// ```
    pub fn fix(&self) -> String {
        match self {
            Problem::Io { .. } => "check the path and its permissions".into(),
            Problem::UnknownFormat => "name the file *.yaml, *.yml or *.toml".into(),
            Problem::Syntax { .. } => "correct the syntax at this position".into(),
            Problem::UnknownField { expected, .. } => {
                format!("remove it or use one of: {}", expected.join(", "))
            }
            Problem::MissingField => "add this field".into(),
            Problem::WrongType { expected, .. } => format!("write {expected}"),
            Problem::UnknownAlgorithm { .. } => {
                format!("use one of: {}", ALGORITHMS.join(", "))
            }
            Problem::InvalidRate { .. } => "write a number of permits per second above 0, or a string such as \"100/s\", \"6000/min\", \"1/h\"".into(),
            Problem::ZeroBurst => "use at least 1".into(),
            Problem::Quota(e) => e.to_string(),
            Problem::Concurrency(e) => e.to_string(),
            Problem::InvalidDuration { .. } => {
                "write a duration such as \"250ms\", \"2s\", \"1m\", \"1h\" (units ns, us, ms, s, m, h, d)".into()
            }
            Problem::UnknownKeyKind { .. } => {
                "use global, ip, route, header:NAME, or a list of ip, route and header:NAME parts".into()
            }
            Problem::InvalidRedisUrl { .. } => {
                "write a URL such as \"redis://127.0.0.1:6379/\"".into()
            }
            Problem::InvalidCidr { .. } => {
                "write an address or network such as \"10.0.0.0/8\" or \"2001:db8::/32\"".into()
            }
            Problem::AmbiguousMatch { other, .. } => format!(
                "give the two rules different routes or disjoint methods, or remove `match` from one (`{other}` stays)"
            ),
            Problem::DebtUnsupported { .. } => "use algorithm token_bucket or leaky_bucket (local, keyed or on Redis), or remove `cost.response_header`".into(),
            Problem::InvalidValue { expected, .. } => format!("use {expected}"),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Io { message } => write!(f, "cannot read the file: {message}"),
            Problem::UnknownFormat => f.write_str("unknown file format"),
            Problem::Syntax { message } => write!(f, "syntax error: {message}"),
            Problem::UnknownField { found, .. } => write!(f, "unknown field `{found}`"),
            Problem::MissingField => f.write_str("missing"),
            Problem::WrongType { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            Problem::UnknownAlgorithm { found } => write!(f, "unknown algorithm `{found}`"),
            Problem::InvalidRate { reason } => write!(f, "invalid rate: {reason}"),
            Problem::ZeroBurst => f.write_str("0 admits nothing"),
            Problem::Quota(_) => f.write_str("the limiter cannot represent these numbers"),
            Problem::Concurrency(_) => {
                f.write_str("the concurrency limiter cannot work with these numbers")
            }
            Problem::InvalidDuration { reason } => write!(f, "invalid duration: {reason}"),
            Problem::UnknownKeyKind { found } => write!(f, "unknown key kind `{found}`"),
            Problem::InvalidRedisUrl { message } => write!(f, "invalid Redis URL: {message}"),
            Problem::InvalidCidr { found } => write!(f, "`{found}` is not an address or network"),
            Problem::AmbiguousMatch { other, overlap } => {
                write!(f, "matches {overlap} as rule `{other}` does")
            }
            Problem::DebtUnsupported { algorithm } => write!(
                f,
                "a cost after the response is charged as GCRA debt, which a `{algorithm}` rule cannot carry"
            ),
            Problem::InvalidValue { reason, .. } => f.write_str(reason),
        }
    }
}

/// One problem of a rule file, with where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// The line and column of the value (or of the key, for an unknown or
    /// missing field: of its table).
    pub pos: Pos,
    /// The rule it belongs to, if any.
    pub rule: Option<String>,
    /// The field, as a dotted path within the rule (`redis.url`), if any.
    pub field: Option<String>,
    /// What is wrong.
    pub problem: Problem,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.file.display(), self.pos)?;
        match (&self.rule, &self.field) {
            (Some(rule), Some(field)) => write!(f, "rule `{rule}`, field `{field}`: ")?,
            (Some(rule), None) => write!(f, "rule `{rule}`: ")?,
            (None, Some(field)) => write!(f, "field `{field}`: ")?,
            (None, None) => {}
        }
        write!(f, "{}; fix: {}", self.problem, self.problem.fix())
    }
}

impl std::error::Error for ConfigError {}

/// Every problem of a file, in file order (at least one).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The problems.
    pub fn errors(&self) -> &[ConfigError] {
        &self.0
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
