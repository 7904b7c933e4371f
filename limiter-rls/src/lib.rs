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
//! * [`run`]: the whole service as the binary runs it, configured by
//!   [`Settings`](settings::Settings) (their environment variables).
//! * [`RateLimitService`]: the decisions, served by [`grpc`] and
//!   [`server`], on a [`CounterStore`](backend::CounterStore) of
//!   [`backend`].
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
//! * **Reload** is limiter-reload's, in its directory mode:
//!   files added, removed or edited under the config directory, ConfigMap
//!   swaps and SIGHUP, coalesced and compared by contents; or the config
//!   is pushed over xDS (`CONFIG_TYPE=GRPC_XDS_SOTW`).
//! * **Traces** are limiter-tower's `otel` (feature `otel`, on by
//!   default), shared with the gateway and the HTTP layer.
//!
//! See docs/rls.md for running it beside Envoy and migrating.

pub mod backend;
pub mod grpc;
pub mod proto;
pub mod server;
pub mod settings;
pub mod stats;

mod call_trace;
mod config;
mod decide;
mod exporter;
mod json;
mod matcher;
mod reload;
mod run;
mod service;
mod statsd;
mod tls;
mod variables;
mod window;
mod xds;

pub use config::{ConfigError, ConfigErrors, Fixable, LimitSpec, Pos, Problem, Rule, RuleSet};
pub use matcher::{Matched, OVERRIDE_RULE};
pub use run::run;
pub use service::{Options, RateLimitService, RequestError};
pub use variables::{VARIABLES, Variable, help};
