//! The loom models in one test binary: each module below was a binary of
//! its own, and each of those compiled and linked loom and the limiters
//! again (in the loom build, where `--cfg loom` rebuilds every crate). Each
//! model explores its own `loom::model`, so the modules share nothing but
//! the process; `broken_variants` stays a binary of its own (Cargo.toml),
//! as it flips a process-wide switch the other models would see. Every
//! module compiles only under `cfg(loom)`; run one with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p loom-tests --test models <module>::`.

mod adaptive_claim;
mod calendar;
mod concurrency_acquire;
mod concurrency_partitions;
mod concurrency_wait;
mod gcra_cancel;
mod gcra_reserve;
mod gcra_set_quota;
mod gcra_try_acquire;
mod keyed_set_quota;
mod manual_clock;
mod metered;
mod priority;
mod quota_setter_lock;
mod refunds;
mod sliding_window;
mod warm_up;
