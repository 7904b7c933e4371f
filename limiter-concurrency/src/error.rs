//! The errors: a configuration that cannot work, and an acquisition that did
//! not get a permit.

use core::fmt;

use crate::partition_word::{MAX_PARTITIONED_LIMIT, MAX_PARTITIONS};
use crate::word::MAX_LIMIT;

/// A limiter, estimator or partition configuration that cannot work.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// A limit of zero admits nothing: use at least 1.
    ZeroLimit {
        /// Which limit (`"limit"`, `"min_limit"`, …).
        name: &'static str,
    },
    /// A limit above [`MAX_LIMIT`](crate::MAX_LIMIT).
    LimitTooLarge {
        /// Which limit.
        name: &'static str,
        /// The value given.
        value: u64,
    },
    /// The lower bound is above the upper bound.
    MinAboveMax {
        /// The lower bound.
        min: u32,
        /// The upper bound.
        max: u32,
    },
    /// The initial limit lies outside `[min, max]`.
    InitialOutOfBounds {
        /// The initial limit.
        initial: u32,
        /// The lower bound.
        min: u32,
        /// The upper bound.
        max: u32,
    },
    /// A parameter is NaN, infinite or outside the range it must lie in.
    OutOfRange {
        /// The parameter's name.
        name: &'static str,
        /// The value given.
        value: f64,
        /// The range it must lie in, for the message.
        range: &'static str,
    },
    /// A partitioned limiter needs between 1 and
    /// [`MAX_PARTITIONS`] partitions.
    PartitionCount {
        /// How many were given.
        count: usize,
    },
    /// Partition shares are positive fractions that add up to at most 1.
    PartitionShares {
        /// The sum of the shares given.
        sum: f64,
    },
    /// A partitioned limit is at most
    /// [`MAX_PARTITIONED_LIMIT`].
    PartitionedLimitTooLarge {
        /// The value given.
        value: u32,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroLimit { name } => {
                write!(f, "{name} is 0, which admits nothing; use at least 1")
            }
            ConfigError::LimitTooLarge { name, value } => {
                write!(f, "{name} is {value}, above the largest limit {MAX_LIMIT}")
            }
            ConfigError::MinAboveMax { min, max } => {
                write!(
                    f,
                    "min_limit {min} is above max_limit {max}; swap them or widen the range"
                )
            }
            ConfigError::InitialOutOfBounds { initial, min, max } => write!(
                f,
                "the initial limit {initial} lies outside [min_limit {min}, max_limit {max}]"
            ),
            ConfigError::OutOfRange { name, value, range } => {
                write!(f, "{name} is {value}; it must lie in {range}")
            }
            ConfigError::PartitionCount { count } => write!(
                f,
                "{count} partitions given; a partitioned limiter takes 1 to {}",
                MAX_PARTITIONS
            ),
            ConfigError::PartitionShares { sum } => write!(
                f,
                "partition shares must each be above 0 and add up to at most 1; they add up to {sum}"
            ),
            ConfigError::PartitionedLimitTooLarge { value } => write!(
                f,
                "the partitioned limit {value} is above the largest {}",
                MAX_PARTITIONED_LIMIT
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Checks a limit named `name`: `1..=MAX_LIMIT`.
pub(crate) fn check_limit(name: &'static str, value: u32) -> Result<u32, ConfigError> {
    if value == 0 {
        Err(ConfigError::ZeroLimit { name })
    } else if value > MAX_LIMIT {
        Err(ConfigError::LimitTooLarge {
            name,
            value: u64::from(value),
        })
    } else {
        Ok(value)
    }
}

/// Checks that `value` is finite and within `lo..=hi` (`lo_open`: `lo`
/// itself excluded).
pub(crate) fn check_f64(
    name: &'static str,
    value: f64,
    lo: f64,
    lo_open: bool,
    hi: f64,
    range: &'static str,
) -> Result<f64, ConfigError> {
    let above = if lo_open { value > lo } else { value >= lo };
    if value.is_finite() && above && value <= hi {
        Ok(value)
    } else {
        Err(ConfigError::OutOfRange { name, value, range })
    }
}

/// No permit is free now ([`try_acquire`](crate::ConcurrencyLimiter::try_acquire)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoPermit {
    /// The limit when the attempt was made.
    pub limit: u32,
    /// Permits held when the attempt was made.
    pub in_flight: u32,
}

impl fmt::Display for NoPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no permit free: {} of {} in flight",
            self.in_flight, self.limit
        )
    }
}

impl std::error::Error for NoPermit {}

/// A waiting acquisition that did not get a permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireError {
    /// No permit was free and the wait queue already held `capacity`
    /// waiters (a capacity of 0: the limiter never queues). Nothing waited.
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The deadline passed (or had passed on the call) before a permit was
    /// free. Nothing is held.
    Timeout,
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::QueueFull { capacity } => {
                write!(
                    f,
                    "no permit free and the wait queue is full ({capacity} waiting)"
                )
            }
            AcquireError::Timeout => f.write_str("no permit became free before the deadline"),
        }
    }
}

impl std::error::Error for AcquireError {}
