//! Most of limiter-config's integration tests in one test binary: each
//! module below was a binary of its own, and each of those compiled and
//! linked axum, hyper, redis and the rules runtime again, which made them
//! most of this crate's test build. Run one module with
//! `cargo test -p limiter-config --test integration <module>::`.
//!
//! Three stay binaries of their own (see Cargo.toml): `allocations` (its
//! counting global allocator), `watch` (it sends SIGHUP to its own process)
//! and `without_redis` (it builds only without the `redis` feature).

mod support;

mod calendar;
mod concurrency;
mod cost;
mod http;
mod operator;
mod overrides;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod redis_endpoints;
mod reload;
mod rotation;
