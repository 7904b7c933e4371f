//! [`Reader`]: what an algorithm's definition may ask of its rule's
//! fields. The schema walk implements it; each method records its own
//! problem (at the field's position, or at the rule's table for a missing
//! field) and answers `None` for a field that has one, so a definition only
//! combines answers and never builds an error message about a field's type.

use std::time::Duration;

use limiter_core::{Quota, QuotaError};

use crate::units::Rate;

/// The fields of one rule, as an algorithm's definition reads them.
///
/// Every method that can fail records the problem itself. `Option<T>` is
/// `None` after a problem; `Option<Option<T>>` is `Some(None)` for an
/// absent optional field.
pub(crate) trait Reader {
    /// A required rate (`rate`, `min_rate`...): a number per second or a
    /// string such as `"100/s"`.
    fn rate(&mut self, field: &str) -> Option<Rate>;
    /// `rate` with `burst` (default 1) as a core quota.
    fn quota(&mut self) -> Option<(Rate, Quota)>;
    /// An optional whole number from 1 to `u32::MAX`.
    fn count(&mut self, field: &str) -> Option<Option<u32>>;
    /// An optional duration such as `"250ms"`.
    fn duration(&mut self, field: &str) -> Option<Option<Duration>>;
    /// An optional number.
    fn number(&mut self, field: &str) -> Option<Option<f64>>;
    /// An optional string.
    fn string(&mut self, field: &str) -> Option<Option<String>>;
    /// An optional table of names to numbers, in file order (each value
    /// reported at its own position as `field.name`; `expected` describes
    /// the table for a value of another type).
    fn numbers(
        &mut self,
        field: &str,
        expected: &'static str,
    ) -> Option<Option<Vec<(String, f64)>>>;
    /// Records that a required `field` is missing.
    fn missing(&mut self, field: &str);
    /// Records a value `field` cannot take: why, and what it would take.
    fn invalid(&mut self, field: &str, reason: String, expected: String);
    /// Records the core's refusal of the numbers, at `field`.
    fn core_error(&mut self, field: &str, error: QuotaError);
    /// An optional boolean.
    fn boolean(&mut self, field: &str) -> Option<Option<bool>>;
    /// Whether `field` is written in the rule.
    fn present(&mut self, field: &str) -> bool;
    /// Records `limiter-concurrency`'s refusal of the numbers, at `field`.
    fn concurrency_error(&mut self, field: &str, error: limiter_concurrency::ConfigError);
}

/// `value`, or the missing-field problem when it is absent.
pub(crate) fn required<T>(r: &mut dyn Reader, field: &str, value: Option<Option<T>>) -> Option<T> {
    match value? {
        Some(v) => Some(v),
        None => {
            r.missing(field);
            None
        }
    }
}
