//! A drop-in replacement for Envoy's global rate limit service
//! (envoyproxy/ratelimit): the same gRPC API
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`), the same
//! YAML configuration and environment variables, with an exact GCRA
//! decision by default (no boundary bursts, refused requests charge
//! nothing, all descriptors of a request decided together) and a
//! `fixed_window` algorithm whose Redis keys are bit-compatible with theirs.
//!
//! # Layout
//!
//! * [`proto`]: the wire messages (envoy-types' generated code).
//! * [`config`](RuleSet): their YAML, every error with file:line:column.
//! * `matcher`: which rule a descriptor gets ([`RuleSet::find`]).
//!
//! # Decisions
//!
//! * **Protos** come from `envoy-types` ([`proto`]): Envoy's messages and
//!   services and envoyproxy/ratelimit's `RateLimitConfig`, generated from
//!   the official protos and committed there, so the build needs no
//!   `protoc` and no build script.
//! * **Reload** is limiter-reload's, in its directory mode ([`reload`]):
//!   files added, removed or edited under the config directory, ConfigMap
//!   swaps and SIGHUP, coalesced and compared by contents; or the config
//!   is pushed over xDS ([`xds`], `CONFIG_TYPE=GRPC_XDS_SOTW`).
//!
//! See docs/rls.md for running it beside Envoy and migrating.

pub mod backend;
pub mod exporter;
pub mod grpc;
pub mod json;
pub mod otel;
pub mod proto;
pub mod reload;
pub mod server;
pub mod settings;
pub mod stats;
pub mod statsd;
pub mod tls;
pub mod variables;
pub mod window;
pub mod xds;

mod call_trace;
mod config;
mod decide;
mod matcher;
mod service;

pub use config::{ConfigError, ConfigErrors, Fixable, LimitSpec, Pos, Problem, Rule, RuleSet};
pub use matcher::{Matched, OVERRIDE_RULE};
pub use service::{Options, RateLimiter, RequestError};
