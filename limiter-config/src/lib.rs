//! Rate-limit rules from files.
mod source;
pub use source::{Format, Pos};
