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
//! | a limiter of your own (a remote store) | implement `Decide`, or limiter-async's `AsyncDecide` |
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
//! # Response body
//!
//! The layer answers in the inner service's own body type: around a
//! service of `Response<B>` it is a service of `Response<B>`, its own
//! responses written into `B` through [`AnswerBody`] (implemented for
//! axum's `Body`, tonic's `Body` with the feature `tonic`, `Full<Bytes>`,
//! `Either<B, Full<Bytes>>` and the boxed bodies). Under axum, whose
//! handlers answer `axum::body::Body`, the response goes out as it is,
//! without axum boxing it again. For a body that cannot carry a document
//! (hyper's `Incoming`), map it into `Either::Left` below the layer: see
//! [`AnswerBody`]'s module.
//!
//! # Cost after the response
//!
//! A request is admitted on its up-front cost
//! ([`RateLimitBuilder::cost`](crate::RateLimitBuilder::cost), default 1);
//! when the inner service's **response head** arrives, the layer reads the
//! request's total cost from it
//! ([`RateLimitBuilder::cost_from_response_header`] or
//! [`RateLimitBuilder::charge_after`]) and charges the key the rest as
//! capped GCRA debt ([`Decide::charge_after`](limiter_core::Decide::charge_after)
//! through the backend seam), so its later requests wait until it is paid.
//!
//! [`RateLimitBuilder::cost_from_response_header`]: crate::RateLimitBuilder::cost_from_response_header
//! [`RateLimitBuilder::charge_after`]: crate::RateLimitBuilder::charge_after
//!
//! ## What is charged
//!
//! The response states the request's **total** cost; the layer charges
//! `total − up-front` (the up-front cost was paid at admission). A total
//! below the up-front cost refunds nothing. The charge is capped by
//! [`max_debt`](crate::RateLimitBuilder::max_debt): right after it, the
//! key's next permit is at most `max(max_debt, t)` away, whatever the
//! response said; the permits above the cap are dropped and counted.
//!
//! ## Head, not body end
//!
//! The charge is made when the response head arrives, before its body is
//! sent: a cost in a header is known then, the charge is in place before
//! the client can send its next request (so that request sees the debt),
//! and a client that stops reading the body cannot skip it. A cost known
//! only at the end of the body (HTTP trailers, a streamed count) is not
//! supported: put it in a header, or charge it yourself with the backend's
//! `charge_after` when the stream ends.
//!
//! ## Metrics
//!
//! | name | meaning |
//! |---|---|
//! | `rate_limit_cost_invalid_total` | responses whose cost was missing or malformed: nothing charged |
//! | `rate_limit_cost_charged_total` | permits charged as debt after responses |
//! | `rate_limit_cost_dropped_total` | permits above the cap (or on a backend that cannot carry debt), not charged |
//!
//! A charge the backend could not make (Redis unreachable) is counted in
//! `rate_limit_backend_errors_total` and logged; the response goes through.
//!
//! ## Backends
//!
//! In memory (`RateLimiter`, `KeyedLimiter`) the charge is made in the
//! response future's poll that sees the head, without allocating beyond
//! the one box that keeps the key until then. On Redis it is one script
//! call, awaited before the response is handed on (one round trip, under
//! the limiter's call timeout). A backend that cannot carry debt (sliding
//! window, warm-up, ...) charges nothing: the whole charge is counted as
//! dropped.
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
//! * `redis`: `RedisBackend`, the layer over a
//!   `limiter_redis::RedisLimiter` (plain names: without the feature
//!   neither exists to link to), so every instance of a
//!   service shares one quota per key.
//! * `tonic`: [`AnswerBody`] for `tonic::body::Body`, so the layer goes
//!   around a tonic service (`Server::builder().layer(..)`) as it is. The
//!   dependency is tonic's body type alone, none of its features.

mod backend;
mod body;
mod charge;
mod client_ip;
mod future;
pub mod grpc;
mod headers;
mod ip;
mod key;
pub mod key_encoding;
mod layer;
mod metrics;
pub mod otel;
pub mod problem;
#[cfg(feature = "redis")]
mod redis_backend;
mod response;
mod response_cost;
mod service;
mod shared;

pub use backend::Backend;
pub use body::AnswerBody;
pub use client_ip::ClientIp;
pub use future::ResponseFuture;
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
pub use response_cost::{ResponseHead, cost_in_header};
pub use service::RateLimitService;
pub use shared::Mode;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
