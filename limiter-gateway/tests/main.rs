//! Most of the gateway's integration tests in one test binary: each module
//! below was a binary of its own, and each of those compiled and linked the
//! whole proxy stack (hyper, axum, rustls, the rules runtime) again, which made
//! them most of the workspace's test build. Run one module with
//! `cargo test -p limiter-gateway --features testing --test gateway <module>::`.
//!
//! The tests that read the gateway's `/metrics` in this process stay binaries
//! of their own (see Cargo.toml): the Prometheus recorder is process-wide, so
//! in one binary their counters would add up across modules.

mod peers;
mod support;

mod admin_keys;
mod binary;
mod calendar;
mod connections;
mod explain;
mod quiet;
mod reuse;
mod serving;
mod tls;
mod traces;
mod upgrade;
