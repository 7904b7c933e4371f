//! [`RateLimitService`]: one request's path through the layer.
//!
//! `poll_ready` forwards the inner service's readiness and touches no
//! permit. `call` runs:
//!
//! 1. bypass (predicate, then allowlisted peer): call the inner service,
//!    uncounted;
//! 2. the key (an error is answered: a missing peer address is a `500`
//!    naming the fix, logged once as a `tracing` error); an allowlisted key
//!    bypasses;
//! 3. the cost, then one decision of the backend with `max_wait` zero
//!    ([`Mode::Reject`]) or `max_delay` ([`Mode::Delay`]);
//! 4. a grant whose slot is later than now: sleep until it inside the
//!    response future, the reservation owned by a guard that gives it back
//!    if the future is dropped (the client disconnected);
//! 5. call the inner service and add the rate-limit headers of the grant.
//!
//! Steps 1 to 3 run in `call` itself, and so does step 5 when the backend
//! decides at once ([`Backend::decide_now`]) and the grant needs no wait:
//! the inner service that was polled ready is called directly. Only a wait,
//! or a backend that decides asynchronously, moves the inner service into
//! the response future (leaving a clone for the next `poll_ready`).
//!
//! # Cancel safety
//!
//! Dropping the response future while it sleeps for a slot cancels the
//! reservation through [`Backend::cancel`]: the permits go back to the key
//! (or to its next waiter). After the inner service was called the permits
//! are spent.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, header};
use http_body_util::{Either, Full};
use tower_service::Service;

use crate::backend::{Backend, Denial, Grant, Policy};
use crate::headers::{RateLimitInfo, retry_after_secs};
use crate::ip::{canonical, peer_addr};
use crate::key::{KeyError, KeyExtractor, RequestHead};
use crate::layer::{Mode, Shared};
use crate::metrics::Metrics;
use crate::response::Rejection;

/// The body of a response through the layer: the inner service's, or the
/// layer's own (a problem document).
pub type LimitBody<B> = Either<B, Full<Bytes>>;

/// The future of [`RateLimitService::call`].
pub type ResponseFuture<B, E> =
    Pin<Box<dyn Future<Output = Result<Response<LimitBody<B>>, E>> + Send + 'static>>;

/// The service a [`RateLimitLayer`](crate::RateLimitLayer) wraps around an
/// inner service. Clones share the layer's state.
pub struct RateLimitService<S, B: Backend, E> {
    inner: S,
    shared: Arc<Shared<B, E>>,
}

impl<S, B: Backend, E> RateLimitService<S, B, E> {
    pub(crate) fn new(inner: S, shared: Arc<Shared<B, E>>) -> Self {
        RateLimitService { inner, shared }
    }
}

impl<S: Clone, B: Backend, E> Clone for RateLimitService<S, B, E> {
    fn clone(&self) -> Self {
        RateLimitService {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: std::fmt::Debug, B: Backend, E> std::fmt::Debug for RateLimitService<S, B, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl<S, B, E, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimitService<S, B, E>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Backend,
    E: KeyExtractor<Key = B::Key>,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<LimitBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        let (key, cost, max_wait, route) = match shared.prepare(&RequestHead::of(&request)) {
            Prepared::Pass => return pass(self.inner.call(request)),
            Prepared::Answer(response) => return answer(response),
            Prepared::Decide {
                key,
                cost,
                max_wait,
                route,
            } => (key, cost, max_wait, route),
        };
        let metrics = route.as_ref().unwrap_or(&shared.metrics);
        // Fast path: a decision made at once, and a request that needs no
        // wait, is answered or passed to the inner service right here.
        let decision = match shared.backend.decide_now(&key, cost, max_wait) {
            Some(Ok(grant)) if grant.wait.is_zero() => {
                let numbers = shared.numbers(&key, &grant);
                metrics.allowed.increment(1);
                let future = self.inner.call(request);
                return Box::pin(async move {
                    let mut response = future.await?.map(Either::Left);
                    shared.write_headers(numbers, response.headers_mut());
                    Ok(response)
                });
            }
            Some(Err(denial)) => {
                return match shared.denied(&key, denial, metrics) {
                    Some(response) => answer(response),
                    None => pass(self.inner.call(request)),
                };
            }
            decision => decision,
        };
        // A wait, or a backend that decides asynchronously: the inner
        // service that was polled ready goes into the future; its clone
        // stays for the next poll_ready.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let decided = Decided {
            key,
            cost,
            max_wait,
            route,
            decision,
        };
        Box::pin(shared.handle(inner, request, decided))
    }
}

/// The numbers a grant's rate-limit headers state, kept until the inner
/// service's response exists and then written straight into it.
#[derive(Debug, Clone, Copy)]
struct HeaderNumbers {
    policy: Policy,
    remaining: u32,
    reset: Duration,
}

/// The inner service's response, uncounted and without headers.
fn pass<F, B, E>(future: F) -> ResponseFuture<B, E>
where
    F: Future<Output = Result<Response<B>, E>> + Send + 'static,
{
    Box::pin(async move { Ok(future.await?.map(Either::Left)) })
}

/// The layer's own response.
fn answer<B: Send + 'static, E: Send + 'static>(
    response: Response<Full<Bytes>>,
) -> ResponseFuture<B, E> {
    Box::pin(std::future::ready(Ok(response.map(Either::Right))))
}

/// What the layer decided from the request head alone (synchronously:
/// the future must not hold a borrow of a body that need not be `Sync`).
enum Prepared<K> {
    /// Call the inner service uncounted, without headers (bypassed).
    Pass,
    /// Answer this instead.
    Answer(Response<Full<Bytes>>),
    /// Ask the backend for `cost` permits within `max_wait`.
    Decide {
        key: K,
        cost: u32,
        max_wait: Duration,
        /// Handles labelled with the route, when routes are labelled.
        route: Option<Metrics>,
    },
}

/// What the asynchronous path starts from.
struct Decided<K, T> {
    key: K,
    cost: u32,
    max_wait: Duration,
    route: Option<Metrics>,
    /// `None`: still to be asked of the backend.
    decision: Option<Result<Grant<T>, Denial>>,
}

impl<B: Backend, E: KeyExtractor<Key = B::Key>> Shared<B, E> {
    /// The asynchronous path: a decision still to be made (`decision` is
    /// `None`), or a grant to wait for.
    async fn handle<S, ReqBody, ResBody>(
        self: Arc<Self>,
        mut inner: S,
        request: Request<ReqBody>,
        decided: Decided<B::Key, B::Ticket>,
    ) -> Result<Response<LimitBody<ResBody>>, S::Error>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    {
        let Decided {
            key,
            cost,
            max_wait,
            route,
            decision,
        } = decided;
        let metrics = route.as_ref().unwrap_or(&self.metrics);
        let decision = match decision {
            Some(decision) => decision,
            None => self.backend.decide(&key, cost, max_wait).await,
        };
        let grant = match decision {
            Ok(grant) => grant,
            Err(denial) => match self.denied(&key, denial, metrics) {
                Some(response) => return Ok(response.map(Either::Right)),
                // Failed open: through, uncounted by the limiter.
                None => return Ok(inner.call(request).await?.map(Either::Left)),
            },
        };
        let numbers = self.numbers(&key, &grant);
        if !grant.wait.is_zero() {
            self.delay(key, grant, metrics).await;
        }
        metrics.allowed.increment(1);
        let mut response = inner.call(request).await?.map(Either::Left);
        self.write_headers(numbers, response.headers_mut());
        Ok(response)
    }

    /// What the rate-limit headers of a grant say (`None` without headers),
    /// taken at the decision.
    fn numbers(&self, key: &B::Key, grant: &Grant<B::Ticket>) -> Option<HeaderNumbers> {
        self.headers.as_ref()?;
        Some(HeaderNumbers {
            policy: self.backend.policy(key),
            remaining: grant.remaining,
            // Told when the inner service is called: after the wait.
            reset: grant.reset.saturating_sub(grant.wait),
        })
    }

    /// Writes the rate-limit headers of `numbers` into a response's headers.
    fn write_headers(&self, numbers: Option<HeaderNumbers>, headers: &mut HeaderMap) {
        if let (Some(style), Some(n)) = (self.headers.as_ref(), numbers) {
            let info = RateLimitInfo {
                name: &self.name,
                policy: n.policy,
                remaining: n.remaining,
                reset: n.reset,
            };
            style.write(&info, headers);
        }
    }

    /// Everything that reads the request head: bypass, key, cost.
    fn prepare(&self, head: &RequestHead<'_>) -> Prepared<B::Key> {
        let route = self.route_metrics(head);
        let metrics = route.as_ref().unwrap_or(&self.metrics);
        if self.bypass.as_ref().is_some_and(|bypass| bypass(head)) || self.peer_allowed(head) {
            metrics.bypassed.increment(1);
            return Prepared::Pass;
        }
        let key = match self.extractor.extract(head) {
            Ok(key) => key,
            Err(e) => return Prepared::Answer(self.no_key(e)),
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
            route,
        }
    }

    /// Handles labelled with the request's route template, when the layer
    /// labels routes.
    fn route_metrics(&self, head: &RequestHead<'_>) -> Option<Metrics> {
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

    /// The answer to a denial; `None` to let the request through (a backend
    /// failure under `fail_open`).
    fn denied(
        &self,
        key: &B::Key,
        denial: Denial,
        metrics: &Metrics,
    ) -> Option<Response<Full<Bytes>>> {
        match denial {
            Denial::RateLimited { retry_after } => {
                metrics.rejected.increment(1);
                Some(self.limited(key, retry_after))
            }
            Denial::OverBurst { cost, burst } => {
                metrics.rejected.increment(1);
                Some(self.respond(&Rejection::OverBurst { cost, burst }))
            }
            Denial::Unavailable(error) => {
                metrics.backend_errors.increment(1);
                tracing::warn!(limiter = %self.name, %error, fail_open = self.fail_open, "rate limiter backend failed");
                (!self.fail_open).then(|| self.respond(&Rejection::Unavailable))
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

    /// Sleeps until the grant's slot; a drop before then gives it back.
    async fn delay(&self, key: B::Key, grant: Grant<B::Ticket>, metrics: &Metrics) {
        struct Waiting<'a, B: Backend, E> {
            shared: &'a Shared<B, E>,
            metrics: &'a Metrics,
            held: Option<(B::Key, B::Ticket)>,
        }
        impl<B: Backend, E> Drop for Waiting<'_, B, E> {
            fn drop(&mut self) {
                self.metrics.queue_size.decrement(1.0);
                if let Some((key, ticket)) = self.held.take() {
                    // Refused only for a slot already passed or a key whose
                    // state was evicted: the permits stay spent (strict).
                    let _given_back = self.shared.backend.cancel(&key, ticket);
                }
            }
        }
        metrics.delayed.increment(1);
        metrics.queue_size.increment(1.0);
        metrics.wait_seconds.record(grant.wait.as_secs_f64());
        let mut waiting = Waiting {
            shared: self,
            metrics,
            held: Some((key, grant.ticket)),
        };
        tokio::time::sleep(grant.wait).await;
        waiting.held = None;
    }

    fn no_key(&self, error: KeyError) -> Response<Full<Bytes>> {
        // Relaxed: the flag only keeps the log to one line; nothing is
        // published through it.
        if error == KeyError::MissingPeer && !self.warned_missing_peer.swap(true, Ordering::Relaxed)
        {
            tracing::error!(limiter = %self.name, "{error}");
        }
        self.respond(&Rejection::NoKey(error))
    }

    fn limited(&self, key: &B::Key, retry_after: Duration) -> Response<Full<Bytes>> {
        let mut response = self.respond(&Rejection::RateLimited { retry_after });
        let headers = response.headers_mut();
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from(retry_after_secs(retry_after)),
        );
        if let Some(style) = &self.headers {
            let info = RateLimitInfo {
                name: &self.name,
                policy: self.backend.policy(key),
                remaining: 0,
                reset: retry_after,
            };
            style.write(&info, headers);
        }
        response
    }

    fn respond(&self, rejection: &Rejection) -> Response<Full<Bytes>> {
        match &self.on_rejection {
            Some(respond) => respond(rejection),
            None => rejection.problem(),
        }
    }
}
