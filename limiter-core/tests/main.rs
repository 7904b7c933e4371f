//! limiter-core's integration tests in one test binary: each module below
//! was a binary of its own, and each of those compiled and linked proptest
//! and the limiter again. The modules share nothing but the process: every
//! test makes its own limiters and clocks. Run one module with
//! `cargo test -p limiter-core --test integration <module>::`.

mod algorithm_models;
mod composite;
mod differential;
mod headroom;
mod memory;
mod metered;
mod priority;
mod public_api;
mod rate_limiter;
mod refunds;
mod sliding_window;
mod stress;
mod warm_up;
