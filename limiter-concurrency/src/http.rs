//! The tower layer: a concurrency limit in front of an HTTP or gRPC service.
//!
//! [`ConcurrencyLimitLayer`] wraps a [`ConcurrencyLimiter`]; every service it
//! makes, and every clone of those (axum clones a route's service per
//! request), shares that one limiter, so one layer on several routes limits
//! them together. A request that finds no permit is answered at once:
//!
//! | protocol | answer |
//! |---|---|
//! | HTTP | `503 Service Unavailable`, `Retry-After`, the workspace's `application/problem+json` document |
//! | gRPC ([`grpc`](ConcurrencyLimitLayer::grpc)) | trailers-only: HTTP 200, `content-type: application/grpc`, `grpc-status: 8` (`RESOURCE_EXHAUSTED`), `grpc-message` |
//!
//! or, with [`wait`](ConcurrencyLimitLayer::wait), waits in the limiter's
//! queue up to a bound first (a full queue or the bound answers as above).
//! The layer sheds by itself: it never makes the inner service "not ready"
//! (which is how a queueing limit needs a separate load-shedder that also
//! sheds for any other reason).
//!
//! A permit is held from admission until the inner service's response head
//! is ready (a streamed body is not counted), then released with an
//! [`Outcome`] for the estimator: the time since admission, classified by
//! status: `429`, `502`, `503`, `504`, a gRPC `grpc-status` of 4
//! (`DEADLINE_EXCEEDED`), 8 (`RESOURCE_EXHAUSTED`) or 14 (`UNAVAILABLE`)
//! in the head, or an error of the inner service, are overload
//! ([`Outcome::Dropped`]); other `4xx` and `5xx` are not a capacity signal
//! ([`Outcome::Ignore`]); everything else is a success with its latency.
//!
//! Metrics (the `metrics` facade, label `limiter` = the layer's name; the
//! handles are registered when the layer is built, so install the recorder
//! first): gauges `concurrency_limit`, `concurrency_in_flight`,
//! `concurrency_min_rtt_seconds`; counter `concurrency_rejected_total`;
//! histogram `concurrency_queue_wait_seconds` (time waited for a permit, in
//! wait mode).
//!
//! Nothing is boxed on the fast path (a permit free at once); the waiting
//! path boxes its acquisition.
//!
//! # The response body
//!
//! The layer answers in the inner service's own body type, as
//! limiter-tower's layer does: around a service of `Response<B>` it is a
//! service of `Response<B>`, its rejections written into `B` through
//! limiter-tower's [`AnswerBody`] (one trait for both layers). Under axum
//! (`axum::body::Body`) a response goes out without axum boxing it again.
//! Around a tonic service (`tonic::body::Body`, under
//! `Server::builder().layer(..)`) turn on this crate's feature `tonic`,
//! which implements the trait for tonic's body. A body that cannot carry
//! an answer (hyper's `Incoming`) is mapped into `Either::Left` below the
//! layer: see [`AnswerBody`].
//!
//! # With a rate limit
//!
//! A rate limit per client outside, a concurrency limit inside, in one
//! axum stack (axum runs the last `.layer` first, so a client over its
//! rate never takes a concurrency permit):
//!
//! ```
//! use axum::{Router, routing::get};
//! use limiter_concurrency::http::ConcurrencyLimitLayer;
//! use limiter_concurrency::{Bounds, ConcurrencyLimiter, Gradient2};
//! use limiter_core::Quota;
//! use limiter_keyed::KeyedLimiter;
//! use limiter_tower::{PeerIp, RateLimitLayer};
//!
//! async fn search() -> &'static str { "results" }
//! async fn items() -> &'static str { "items" }
//!
//! let concurrency =
//!     ConcurrencyLimiter::adaptive(Gradient2::new(Bounds::new(20, 4, 500)?)).build()?;
//! let app: Router = Router::new()
//!     .route("/search", get(search))
//!     .route("/items", get(items))
//!     .layer(ConcurrencyLimitLayer::new("api", concurrency)) // inner: protects the service
//!     .layer(RateLimitLayer::new(KeyedLimiter::new(Quota::per_second(50)?), PeerIp::new())); // outer: per client
//! // axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())
//! # let _ = app;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, ready};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Full;
use limiter_tower::AnswerBody;
use metrics::{Counter, Gauge, Histogram};
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

use crate::{AcquireError, ConcurrencyLimiter, Outcome, OwnedPermit};

/// Which protocol's rejection the layer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http,
    Grpc,
}

#[derive(Debug)]
struct Metrics {
    limit: Gauge,
    in_flight: Gauge,
    min_rtt: Gauge,
    rejected: Counter,
    queue_wait: Histogram,
}

#[derive(Debug)]
struct Config {
    limiter: ConcurrencyLimiter,
    wait: Option<Duration>,
    retry_after: Duration,
    protocol: Protocol,
    metrics: Metrics,
}

impl Config {
    fn publish(&self) {
        self.metrics.limit.set(f64::from(self.limiter.limit()));
        self.metrics
            .in_flight
            .set(f64::from(self.limiter.in_flight()));
        if let Some(rtt) = self.limiter.min_rtt() {
            self.metrics.min_rtt.set(rtt.as_secs_f64());
        }
    }

    /// The in-flight gauge now (on admission and rejection, so it moves
    /// while requests are running, not only when they finish).
    fn publish_in_flight(&self) {
        self.metrics
            .in_flight
            .set(f64::from(self.limiter.in_flight()));
    }

    fn reject(&self) -> Response<Full<Bytes>> {
        self.metrics.rejected.increment(1);
        self.publish_in_flight();
        match self.protocol {
            Protocol::Http => overloaded(
                self.retry_after,
                self.limiter.limit(),
                self.limiter.in_flight(),
            ),
            Protocol::Grpc => resource_exhausted(),
        }
    }
}

/// The HTTP rejection: the workspace's problem document (with the limit
/// and the in-flight count as members) and `Retry-After` in whole seconds,
/// rounded up.
fn overloaded(retry_after: Duration, limit: u32, in_flight: u32) -> Response<Full<Bytes>> {
    let secs = retry_after.as_nanos().div_ceil(1_000_000_000).max(1);
    let mut response = limiter_tower::problem::Problem::new(StatusCode::SERVICE_UNAVAILABLE)
        .detail("the concurrency limit is reached; retry later")
        .member("limit", u64::from(limit))
        .member("in_flight", u64::from(in_flight))
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}

/// The gRPC rejection: a trailers-only response with `RESOURCE_EXHAUSTED`,
/// written by limiter-tower's gRPC answers.
fn resource_exhausted() -> Response<Full<Bytes>> {
    limiter_tower::grpc::trailers_only(
        limiter_tower::grpc::RESOURCE_EXHAUSTED,
        "concurrency limit reached",
        None,
    )
}

/// How a response head counts for the estimator.
fn classify<B>(response: &Response<B>, latency: Duration) -> Outcome {
    if let Some(status) = response.headers().get("grpc-status") {
        return match status.as_bytes() {
            b"4" | b"8" | b"14" => Outcome::Dropped(latency),
            b"0" => Outcome::Success(latency),
            _ => Outcome::Ignore,
        };
    }
    match response.status() {
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => Outcome::Dropped(latency),
        s if s.is_client_error() || s.is_server_error() => Outcome::Ignore,
        _ => Outcome::Success(latency),
    }
}

/// The metric families' HELP texts (for the installed recorder).
fn describe() {
    metrics::describe_gauge!(
        "concurrency_limit",
        "The concurrency limit in force (moved by the estimator of an adaptive limiter)."
    );
    metrics::describe_gauge!(
        "concurrency_in_flight",
        "Requests holding a concurrency permit, as of the last admission, rejection or completion."
    );
    metrics::describe_gauge!(
        "concurrency_min_rtt_seconds",
        metrics::Unit::Seconds,
        "The estimator's no-load (minimum) round-trip time."
    );
    metrics::describe_counter!(
        "concurrency_rejected_total",
        "Requests refused because no concurrency permit was free (after the wait, in wait mode)."
    );
    metrics::describe_histogram!(
        "concurrency_queue_wait_seconds",
        metrics::Unit::Seconds,
        "Time a request waited in the queue for a concurrency permit (wait mode)."
    );
}

/// A tower layer that limits the concurrency of the services it wraps to
/// one shared [`ConcurrencyLimiter`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_concurrency::{Bounds, ConcurrencyLimiter, Gradient2, QueueOrder};
/// use limiter_concurrency::http::ConcurrencyLimitLayer;
///
/// let limiter = ConcurrencyLimiter::adaptive(Gradient2::new(Bounds::new(20, 4, 500)?))
///     .queue(64, QueueOrder::Lifo)
///     .build()?;
/// let layer = ConcurrencyLimitLayer::new("api", limiter).wait(Duration::from_millis(50));
/// // axum: Router::new().route(...).route(...).layer(layer)
/// # let _ = layer;
/// # Ok::<(), limiter_concurrency::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ConcurrencyLimitLayer {
    config: Arc<Config>,
}

impl ConcurrencyLimitLayer {
    /// A layer named `name` (the metrics' `limiter` label) over `limiter`:
    /// rejects at once when no permit is free, HTTP, `Retry-After: 1`.
    pub fn new(name: &str, limiter: ConcurrencyLimiter) -> ConcurrencyLimitLayer {
        describe();
        let label = [("limiter", name.to_owned())];
        let metrics = Metrics {
            limit: metrics::gauge!("concurrency_limit", &label),
            in_flight: metrics::gauge!("concurrency_in_flight", &label),
            min_rtt: metrics::gauge!("concurrency_min_rtt_seconds", &label),
            rejected: metrics::counter!("concurrency_rejected_total", &label),
            queue_wait: metrics::histogram!("concurrency_queue_wait_seconds", &label),
        };
        let config = Config {
            limiter,
            wait: None,
            retry_after: Duration::from_secs(1),
            protocol: Protocol::Http,
            metrics,
        };
        config.publish();
        ConcurrencyLimitLayer {
            config: Arc::new(config),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> ConcurrencyLimitLayer {
        match Arc::get_mut(&mut self.config) {
            Some(c) => f(c),
            None => {
                let c = &*self.config;
                let mut copy = Config {
                    limiter: c.limiter.clone(),
                    wait: c.wait,
                    retry_after: c.retry_after,
                    protocol: c.protocol,
                    metrics: Metrics {
                        limit: c.metrics.limit.clone(),
                        in_flight: c.metrics.in_flight.clone(),
                        min_rtt: c.metrics.min_rtt.clone(),
                        rejected: c.metrics.rejected.clone(),
                        queue_wait: c.metrics.queue_wait.clone(),
                    },
                };
                f(&mut copy);
                self.config = Arc::new(copy);
            }
        }
        self
    }

    /// Waits in the limiter's queue up to `bound` before rejecting (the
    /// queue's capacity and order are the limiter's); a bound no instant can
    /// hold (`Duration::MAX`) waits as long as the queue does.
    pub fn wait(self, bound: Duration) -> ConcurrencyLimitLayer {
        self.edit(|c| c.wait = Some(bound))
    }

    /// The `Retry-After` of the HTTP rejection (rounded up to whole
    /// seconds, at least 1).
    pub fn retry_after(self, retry_after: Duration) -> ConcurrencyLimitLayer {
        self.edit(|c| c.retry_after = retry_after)
    }

    /// Rejects as a gRPC server does: trailers-only `RESOURCE_EXHAUSTED`.
    pub fn grpc(self) -> ConcurrencyLimitLayer {
        self.edit(|c| c.protocol = Protocol::Grpc)
    }

    /// The limiter every service of this layer shares.
    pub fn limiter(&self) -> &ConcurrencyLimiter {
        &self.config.limiter
    }
}

impl<S> Layer<S> for ConcurrencyLimitLayer {
    type Service = ConcurrencyLimit<S>;

    fn layer(&self, inner: S) -> ConcurrencyLimit<S> {
        ConcurrencyLimit {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service of [`ConcurrencyLimitLayer`]. Clones share the limiter.
#[derive(Debug, Clone)]
pub struct ConcurrencyLimit<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for ConcurrencyLimit<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    ResB: AnswerBody,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> ResponseFuture<S, ReqB> {
        let config = Arc::clone(&self.config);
        let state = match config.limiter.try_acquire_owned() {
            Ok(permit) => {
                config.publish_in_flight();
                State::Running {
                    future: self.inner.call(request),
                    permit: Some(permit),
                    start: Instant::now(),
                }
            }
            Err(_) => match config.wait {
                None => State::Rejected,
                Some(bound) => {
                    // The ready service goes with the request; this one
                    // keeps a fresh clone (tower's clone-and-swap).
                    let clone = self.inner.clone();
                    let ready = core::mem::replace(&mut self.inner, clone);
                    let limiter = config.limiter.clone();
                    let since = Instant::now();
                    State::Waiting {
                        acquire: Box::pin(async move {
                            // A bound no instant can hold is no bound.
                            match since.checked_add(bound) {
                                Some(until) => limiter.acquire_owned_until(until).await,
                                None => limiter.acquire_owned().await,
                            }
                        }),
                        inner: Some((ready, request)),
                        since,
                    }
                }
            },
        };
        ResponseFuture { state, config }
    }
}

type AcquireFuture = Pin<Box<dyn Future<Output = Result<OwnedPermit, AcquireError>> + Send>>;

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<S, ReqB>
    where
        S: Service<Request<ReqB>>,
    {
        Waiting {
            acquire: AcquireFuture,
            inner: Option<(S, Request<ReqB>)>,
            since: Instant,
        },
        Running {
            #[pin]
            future: S::Future,
            permit: Option<OwnedPermit>,
            start: Instant,
        },
        Rejected,
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`ConcurrencyLimit`].
    ///
    /// # Cancel safety
    ///
    /// Dropping it releases the permit it holds, or leaves the queue.
    pub struct ResponseFuture<S, ReqB>
    where
        S: Service<Request<ReqB>>,
    {
        #[pin]
        state: State<S, ReqB>,
        config: Arc<Config>,
    }
}

impl<S, ReqB> core::fmt::Debug for ResponseFuture<S, ReqB>
where
    S: Service<Request<ReqB>>,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S, ReqB, ResB> Future for ResponseFuture<S, ReqB>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: AnswerBody,
{
    type Output = Result<Response<ResB>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Waiting {
                    acquire,
                    inner,
                    since,
                } => {
                    let got = ready!(acquire.as_mut().poll(cx));
                    this.config
                        .metrics
                        .queue_wait
                        .record(since.elapsed().as_secs_f64());
                    let (Ok(permit), Some((mut service, request))) = (got, inner.take()) else {
                        this.state.set(State::Rejected);
                        continue;
                    };
                    this.config.publish_in_flight();
                    let future = service.call(request);
                    this.state.set(State::Running {
                        future,
                        permit: Some(permit),
                        start: Instant::now(),
                    });
                }
                StateProj::Running {
                    future,
                    permit,
                    start,
                } => {
                    let result = ready!(future.poll(cx));
                    let latency = start.elapsed();
                    let outcome = match &result {
                        Ok(response) => classify(response, latency),
                        Err(_) => Outcome::Dropped(latency),
                    };
                    if let Some(p) = permit.take() {
                        p.finish(outcome);
                    }
                    this.config.publish();
                    return Poll::Ready(result);
                }
                StateProj::Rejected => {
                    return Poll::Ready(Ok(this.config.reject().map(ResB::from_answer)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        let d = Duration::from_millis(7);
        let with = |s: u16| Response::builder().status(s).body(()).unwrap();
        assert_eq!(classify(&with(200), d), Outcome::Success(d));
        assert_eq!(classify(&with(503), d), Outcome::Dropped(d));
        assert_eq!(classify(&with(429), d), Outcome::Dropped(d));
        assert_eq!(classify(&with(404), d), Outcome::Ignore);
        assert_eq!(classify(&with(500), d), Outcome::Ignore);
        let grpc = |g: &'static str| {
            Response::builder()
                .header("grpc-status", g)
                .body(())
                .unwrap()
        };
        assert_eq!(classify(&grpc("8"), d), Outcome::Dropped(d));
        assert_eq!(classify(&grpc("0"), d), Outcome::Success(d));
        assert_eq!(classify(&grpc("3"), d), Outcome::Ignore);
    }

    #[test]
    fn rejections() {
        let r = overloaded(Duration::from_millis(1500), 4, 4);
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let g = resource_exhausted();
        assert_eq!(g.status(), 200);
        assert_eq!(g.headers()["grpc-status"], "8");
        assert_eq!(g.headers()[header::CONTENT_TYPE], "application/grpc");
    }
}
