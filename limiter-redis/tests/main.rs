//! limiter-redis's integration tests in one test binary: each module below
//! was a binary of its own, and each of those compiled and linked redis,
//! tokio and the limiter again, which made them most of this crate's test
//! build. Every test starts its own servers (limiter-test-support's
//! `RedisServer`, cluster and Sentinel, on free ports and fresh
//! directories), so the modules share nothing but the process. Run one
//! module with `cargo test -p limiter-redis --test integration <module>::`.

mod cache_and_lease;
mod cluster;
mod concurrency;
mod deadline;
mod debt;
mod decide;
mod errors;
mod failures;
mod matches_core;
mod multi;
mod robustness;
mod script;
mod sentinel;
mod take;
mod tls_acl;
mod two_tier;
mod valkey;
