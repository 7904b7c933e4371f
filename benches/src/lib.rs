//! Shared pieces of the benchmarks: the subjects under test, the Mutex GCRA
//! baseline, and the timing loops, used both by the criterion benches
//! (`benches/`) and by the `compare` summary runner (`src/bin/compare.rs`).
//!
//! # What is measured
//!
//! Every subject is reduced to "try to take one permit, say whether it was
//! admitted" (`Fn() -> bool`), built under the same quota for every
//! implementation:
//!
//! * the **allow** quota never limits (10^9 permits a second, a burst of
//!   10^9), so every call takes the admission path and writes the state;
//! * the **deny** quota (one permit an hour, burst 1) is drained by one
//!   permit during setup, so every timed call is refused.
//!
//! The timing loops count the admissions and the callers assert, outside the
//! timed part, that every implementation admitted exactly the expected number
//! (all for allow, none for deny): all subjects did the same work.
//!
//! Times are wall-clock nanoseconds per operation from `std::time::Instant`
//! around a batch; contention runs report the slowest of the threads, which
//! start together behind a barrier. Only ratios measured in one run mean
//! anything on a shared machine; see `docs/benchmarks.md`.

pub mod async_paths;
pub mod concurrency_bench;
pub mod concurrency_sim;
pub mod floors;
pub mod measure;
pub mod mutex_gcra;
pub mod pacing;
pub mod pacing_burst1;
pub mod subjects;
