//! Most of limiter-tower's integration tests in one test binary: each
//! module below was a binary of its own, and each of those compiled and
//! linked axum, hyper, tonic and the layer again, which made them most of
//! this crate's test build. Run one module with
//! `cargo test -p limiter-tower --all-features --test integration <module>::`.
//!
//! `allocations` stays a binary of its own (see Cargo.toml): its counting
//! global allocator would be every module's allocator.

mod support {
    pub(crate) mod http;
}

mod algorithms;
mod cost_after;
#[cfg(feature = "tonic")]
mod grpc;
mod hyper_server;
mod observability;
mod oneshot;
mod policy;
mod redis;
mod server;
#[cfg(feature = "otel")]
mod traces;
