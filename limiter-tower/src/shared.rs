//! [`Shared`]: the configuration and backend that a layer and every service
//! it makes share, and everything decided from a request head alone
//! (bypass, key, cost) or from a decision alone (the answer to a denial,
//! the numbers of a grant's headers).
//!
//! Nothing here allocates on the path of an admitted or rejected request
//! except the layer's own response (its body and header values): the
//! metrics handles are registered when the layer is built (unless routes
//! are labelled), and header numbers are plain values until they are
//! written into the response.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Response, header};
use http_body_util::Full;
use ipnet::IpNet;

use limiter_core::{Denial, Grant, Policy};

use crate::backend::Backend;
use crate::headers::{LayerStyle, RateLimitInfo, retry_after_value};
use crate::ip::{canonical, peer_addr};
use crate::key::{KeyError, KeyExtractor, RequestHead};
use crate::metrics::Metrics;
use crate::otel::span::DecisionTrace;
use crate::response::Rejection;

/// What the layer does with a request that does not conform now.
///
/// # Examples
///
/// nginx's `limit_req rate=10r/s burst=5 delay=2` (3 at once, 3 more held,
/// the rest refused): a burst of `delay + 1` and a delay of
/// `(burst − delay) · t`.
///
/// ```
/// use std::time::Duration;
/// use limiter_core::{Quota, RateLimiter};
/// use limiter_tower::{Global, Mode, RateLimitLayer};
///
/// let limiter = RateLimiter::new(Quota::per_second(10)?.with_burst(3)?);
/// let layer = RateLimitLayer::builder(limiter, Global)
///     .mode(Mode::Delay { max_delay: Duration::from_millis(300) })
///     .build()?;
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Answer `429` at once; the request consumes nothing.
    #[default]
    Reject,
    /// Reserve the request's slot if it comes within `max_delay`, sleep
    /// until it inside the response future, then call the inner service;
    /// answer `429` (consuming nothing) if the slot is later. A client that
    /// disconnects while delayed gives its slot back.
    Delay {
        /// The longest a request is held.
        max_delay: Duration,
    },
}

pub(crate) type CostFn = dyn Fn(&RequestHead<'_>) -> u32 + Send + Sync;
pub(crate) type BypassFn = dyn Fn(&RequestHead<'_>) -> bool + Send + Sync;
pub(crate) type KeyFn<K> = dyn Fn(&K) -> bool + Send + Sync;
pub(crate) type RejectionFn = dyn Fn(&Rejection) -> Response<Full<Bytes>> + Send + Sync;

/// The configuration and backend that a layer and all its services share.
pub(crate) struct Shared<B: Backend, E> {
    pub(crate) backend: B,
    pub(crate) extractor: E,
    pub(crate) mode: Mode,
    pub(crate) name: Arc<str>,
    pub(crate) cost: Option<Box<CostFn>>,
    pub(crate) bypass: Option<Box<BypassFn>>,
    pub(crate) allow_ips: Vec<IpNet>,
    pub(crate) allow_key: Option<Box<KeyFn<B::Key>>>,
    pub(crate) fail_open: bool,
    /// `None`: no rate-limit headers.
    pub(crate) headers: Option<Arc<HeaderWriter>>,
    pub(crate) on_rejection: Option<Box<RejectionFn>>,
    pub(crate) metrics: Metrics,
    /// Whether metrics carry a `route` label.
    pub(crate) label_routes: bool,
    /// Whether the missing-peer error was logged (it is logged once).
    pub(crate) warned_missing_peer: AtomicBool,
    /// The cost after the response, when the layer charges one.
    pub(crate) response_cost: Option<crate::response_cost::ResponseCost>,
    /// The tracer of the decision spans; `None`: no span. Boxed: one
    /// pointer, whose test is all a request pays without a tracer.
    #[cfg(feature = "otel")]
    pub(crate) tracer: Option<Box<opentelemetry_sdk::trace::SdkTracer>>,
}

/// The rate-limit header syntax and the policy name it writes: what a
/// response future needs to finish a grant's response, shared by pointer.
pub(crate) struct HeaderWriter {
    pub(crate) name: Arc<str>,
    pub(crate) style: LayerStyle,
}

impl HeaderWriter {
    /// Writes the rate-limit headers of `numbers` into `headers`.
    pub(crate) fn write(&self, numbers: HeaderNumbers, headers: &mut HeaderMap) {
        let info = RateLimitInfo {
            name: &self.name,
            policy: numbers.policy,
            remaining: numbers.remaining,
            reset: numbers.reset,
        };
        self.style.write(&info, headers);
    }

    /// Writes a refusal's `Retry-After` and rate-limit headers: nothing
    /// left, more after `retry_after`.
    pub(crate) fn refusal(&self, retry_after: Duration, policy: Policy, headers: &mut HeaderMap) {
        let info = RateLimitInfo {
            name: &self.name,
            policy,
            remaining: 0,
            reset: retry_after,
        };
        self.style.write_refusal(&info, headers);
    }
}

/// The numbers a grant's rate-limit headers state, kept until the inner
/// service's response exists and then written straight into it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeaderNumbers {
    pub(crate) policy: Policy,
    pub(crate) remaining: u32,
    pub(crate) reset: Duration,
}

/// What the layer decided from the request head alone (synchronously:
/// the future must not hold a borrow of a body that need not be `Sync`).
/// Small (no response, no metrics handles), so that returning it copies a
/// few words.
pub(crate) enum Prepared<K> {
    /// Call the inner service uncounted, without headers (bypassed).
    Pass,
    /// No key could be read: answer [`Shared::no_key`] of this.
    NoKey(KeyError),
    /// Ask the backend for `cost` permits within `max_wait`.
    Decide {
        key: K,
        cost: u32,
        max_wait: Duration,
    },
}

impl<B: Backend, E: KeyExtractor<Key = B::Key>> Shared<B, E> {
    /// Everything that reads the request head: bypass, key, cost; a bypass
    /// is counted in `metrics` (the route's handles, when routes are
    /// labelled: see [`Shared::route_metrics`]).
    // Inlined into `limit`, its one caller: the `Prepared` it returns is
    // built in place, not copied back.
    #[inline]
    pub(crate) fn prepare(&self, head: &RequestHead<'_>, metrics: &Metrics) -> Prepared<B::Key> {
        if self.bypass.as_ref().is_some_and(|bypass| bypass(head)) || self.peer_allowed(head) {
            metrics.bypassed.increment(1);
            return Prepared::Pass;
        }
        let key = match self.extractor.extract(head) {
            Ok(key) => key,
            Err(e) => return Prepared::NoKey(e),
        };
        if self.allow_key.as_ref().is_some_and(|allow| allow(&key)) {
            metrics.bypassed.increment(1);
            return Prepared::Pass;
        }
        let cost = self.cost.as_ref().map_or(1, |cost| cost(head));
        let max_wait = match self.mode {
            Mode::Reject => Duration::ZERO,
            Mode::Delay { max_delay } => max_delay,
        };
        Prepared::Decide {
            key,
            cost,
            max_wait,
        }
    }

    /// The span of this request's decision: `None` without a tracer (and
    /// always without the feature `otel`, where the type is empty).
    // Inlined: without a tracer it is one test of a field; the span is
    // started out of line (`DecisionTrace::start` is cold).
    #[inline]
    pub(crate) fn trace<R>(&self, request: &http::Request<R>) -> Option<DecisionTrace> {
        #[cfg(feature = "otel")]
        {
            let tracer = self.tracer.as_deref()?;
            Some(DecisionTrace::start(tracer, &self.name, request.headers()))
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = request;
            None
        }
    }

    /// What the rate-limit headers of a grant say (`None` without headers),
    /// taken at the decision.
    // Inlined: without headers it is one test, not a call.
    #[inline]
    pub(crate) fn numbers(&self, grant: &Grant<B::Ticket>) -> Option<HeaderNumbers> {
        self.headers.as_ref()?;
        Some(HeaderNumbers {
            policy: grant.policy,
            remaining: grant.headroom.remaining,
            // Told when the inner service is called: after the wait.
            reset: grant.headroom.refill_in.saturating_sub(grant.wait),
        })
    }

    /// Handles labelled with the request's route template, when the layer
    /// labels routes.
    pub(crate) fn route_metrics(&self, head: &RequestHead<'_>) -> Option<Metrics> {
        if !self.label_routes {
            return None;
        }
        #[cfg(feature = "axum")]
        let route = head
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .map_or(crate::key::Route::UNMATCHED, |p| p.as_str());
        #[cfg(not(feature = "axum"))]
        let route = {
            let _ = head;
            "<unmatched>"
        };
        Some(Metrics::with_route(&self.name, route))
    }

    /// The answer to a denial of `request`; `None`
    /// to let the request through (a backend failure under `fail_open`).
    /// A gRPC call gets gRPC's answer ([`crate::grpc`]).
    pub(crate) fn denied<R>(
        &self,
        denial: Denial,
        metrics: &Metrics,
        request: &http::Request<R>,
    ) -> Option<Response<Full<Bytes>>> {
        let grpc = crate::grpc::is_grpc(request);
        match denial {
            Denial::RateLimited {
                retry_after,
                policy,
            } => {
                metrics.rejected.increment(1);
                Some(self.limited(retry_after, policy, grpc))
            }
            Denial::OverBurst { cost, burst, .. } => {
                metrics.rejected.increment(1);
                Some(self.respond(&Rejection::OverBurst { cost, burst }, grpc))
            }
            Denial::Unavailable(error) => {
                metrics.backend_errors.increment(1);
                tracing::warn!(limiter = %self.name, %error, fail_open = self.fail_open, "rate limiter backend failed");
                (!self.fail_open).then(|| self.respond(&Rejection::Unavailable, grpc))
            }
            // A denial of a kind this layer does not know: unavailable.
            other => {
                metrics.backend_errors.increment(1);
                tracing::warn!(limiter = %self.name, error = %other, fail_open = self.fail_open, "rate limiter backend failed");
                (!self.fail_open).then(|| self.respond(&Rejection::Unavailable, grpc))
            }
        }
    }

    fn peer_allowed(&self, head: &RequestHead<'_>) -> bool {
        !self.allow_ips.is_empty()
            && peer_addr(head).is_some_and(|peer| {
                let ip = canonical(peer.ip());
                self.allow_ips.iter().any(|net| net.contains(&ip))
            })
    }

    pub(crate) fn no_key(&self, error: KeyError) -> Response<Full<Bytes>> {
        // Relaxed: the flag only keeps the log to one line; nothing is
        // published through it.
        if error == KeyError::MissingPeer && !self.warned_missing_peer.swap(true, Ordering::Relaxed)
        {
            tracing::error!(limiter = %self.name, "{error}");
        }
        self.respond(&Rejection::NoKey(error), false)
    }

    fn limited(&self, retry_after: Duration, policy: Policy, grpc: bool) -> Response<Full<Bytes>> {
        let mut response = self.respond(&Rejection::RateLimited { retry_after }, grpc);
        let headers = response.headers_mut();
        match &self.headers {
            Some(writer) => writer.refusal(retry_after, policy, headers),
            None => {
                headers.insert(header::RETRY_AFTER, retry_after_value(retry_after));
            }
        }
        response
    }

    /// The layer's answer: gRPC's to a gRPC call, else the user's
    /// `on_rejection` or the problem document.
    fn respond(&self, rejection: &Rejection, grpc: bool) -> Response<Full<Bytes>> {
        if grpc && let Some(response) = rejection.grpc() {
            return response;
        }
        match &self.on_rejection {
            Some(respond) => respond(rejection),
            None => rejection.problem(),
        }
    }
}
