//! limiter-rls's integration tests in one test binary: each module below
//! was a binary of its own, and each of those compiled and linked tonic,
//! the Envoy protos, redis and the service again, which made them most of
//! this crate's test build. Every module runs the `limiter-rls` binary,
//! Envoy or redis-server as child processes, or the service in process on
//! its own state, so nothing here needs the test process to itself. Run one
//! module with `cargo test -p limiter-rls --test integration <module>::`.

mod support;

mod binary;
mod cluster;
mod config_errors;
mod envoy;
mod envoy_redis;
mod flags;
mod grpc_tls;
mod matching;
mod quiet;
mod quota_mode;
mod redis_deadline;
mod redis_endpoints;
mod redis_reset;
mod reload;
mod semantics;
mod shutdown;
mod their_scripts;
mod traces;
mod xds;
