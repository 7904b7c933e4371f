//! Rate limiting for tower HTTP services (axum, hyper, tonic): one
//! [`RateLimitLayer`] over any limiter, shared by every clone, that waits
//! when asked to, tells the client the truth in its headers, and keys
//! clients in ways they cannot spoof.
//!
//! # Which type do I use
//!
//! | you want | use |
//! |---|---|
//! | one limit for the whole service | [`RateLimitLayer::new`]`(RateLimiter::new(quota), `[`Global`]`)` |
//! | a limit per client that connects directly | a [`KeyedLimiter`](limiter_keyed::KeyedLimiter) with [`PeerIp`] |
//! | a limit per client behind your load balancer | a `KeyedLimiter` with [`ClientIp`] and the balancer's CIDRs |
//! | a limit per API key, per user and route | [`Header`], [`Extension`], `(Extension::<User>::new(), Route)` |
//! | to hold requests briefly instead of rejecting them (nginx `burst`/`delay`) | [`Mode::Delay`] |
//! | health checks and internal callers unlimited | [`RateLimitBuilder::bypass`], [`RateLimitBuilder::allow_ips`] |
//! | expensive requests to count more | [`RateLimitBuilder::cost`] |
//! | a cost known only from the response (tokens, rows) charged as debt | [`RateLimitBuilder::cost_from_response_header`], [`RateLimitBuilder::charge_after`] |
//! | one quota per key shared by every instance of the service | `RedisBackend` (feature `redis`) |
//! | any algorithm of limiter-core (sliding window, warm-up, priority, adaptive, composites) | pass it: every `Decide` is a [`Backend`] |
//! | a limiter of your own (a remote store) | implement `Decider` and `Decide`, or limiter-async's `AsyncDecide` |
//!
//! # What a client sees
//!
//! A request that conforms goes to the inner service; its response gets
//! `RateLimit-Policy` and `RateLimit` (draft-10, see [`Draft10`]) from the
//! same decision. A request that does not conform gets `429` with
//! `Retry-After` in whole seconds rounded up (at least 1) and an RFC 9457
//! problem document, and consumes nothing. A request costing more than the
//! burst gets `413` (it could never conform). See [`Rejection`] for all the
//! layer's own responses.
//!
//! # Example
//!
//! ```
//! use std::net::SocketAddr;
//! use limiter_core::Quota;
//! use limiter_keyed::KeyedLimiter;
//! use limiter_tower::{PeerIp, RateLimitLayer};
//!
//! let per_ip = KeyedLimiter::new(Quota::per_second(10)?.with_burst(20)?);
//! let app = axum::Router::<()>::new()
//!     .route("/", axum::routing::get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(per_ip, PeerIp::new()));
//! // axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//! # let _ = app;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Problem documents
//!
//! [`problem`] is the RFC 9457 writer every response of the layer (and of
//! the crates built on it) goes through: any status, typed extension
//! members, a JSON escaper that is correct for any text.
//!
//! # Features
//!
//! * `axum` (default): [`PeerIp`] and [`ClientIp`] read axum's
//!   `ConnectInfo<SocketAddr>`, and [`Route`] reads `MatchedPath`.
//!   Without it, insert [`PeerAddr`] into each request.
//! * `redis`: [`RedisBackend`], the layer over a
//!   [`RedisLimiter`](limiter_redis::RedisLimiter), so every instance of a
//!   service shares one quota per key.

mod backend;
mod charge;
mod client_ip;
mod future;
mod headers;
mod ip;
mod key;
pub mod key_encoding;
mod layer;
mod metrics;
pub mod problem;
#[cfg(feature = "redis")]
mod redis_backend;
mod response;
mod service;
mod shared;

pub use backend::Backend;
pub use charge::{ResponseHead, cost_in_header};
pub use client_ip::ClientIp;
pub use future::{LimitBody, ResponseFuture};
pub use headers::{Draft10, HeaderStyle, LegacyHeaders, NoHeaders, RateLimitInfo};
pub use ip::{PeerAddr, PeerIp, PrefixError};
#[cfg(feature = "axum")]
pub use key::Route;
pub use key::{Extension, Global, Header, KeyError, KeyExtractor, Or, RequestHead};
pub use layer::{ConfigError, RateLimitBuilder, RateLimitLayer};
/// The decision seam's types, as the layer uses them (limiter-core's).
pub use limiter_core::{Denial, Grant, Policy};
#[cfg(feature = "redis")]
pub use redis_backend::RedisBackend;
pub use response::Rejection;
pub use service::RateLimitService;
pub use shared::Mode;
