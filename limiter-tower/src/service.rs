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
//! 5. call the inner service and add the rate-limit headers of the grant;
//! 6. when the layer charges a cost after the response, read it from the
//!    response head and charge the rest to the key as capped debt (see
//!    [`RateLimitBuilder::charge_after`](crate::RateLimitBuilder::charge_after)).
//!
//! Steps 1 to 3 run in `call` itself, and so does step 5 when the backend
//! decides at once ([`AsyncDecide::decide_ready`]) and the grant needs no wait:
//! the inner service that was polled ready is called directly, and the
//! [`ResponseFuture`] is the inner future plus the grant's header numbers
//! (no allocation, no reference count beyond the header writer's). Only a
//! wait, or a backend that decides asynchronously, moves the inner service
//! into a boxed future (leaving a clone for the next `poll_ready`).
//!
//! See [`ResponseFuture`](crate::ResponseFuture) for cancel safety.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tokio::time::Instant;
use tower_service::Service;

use crate::backend::Backend;
use crate::body::AnswerBody;
use crate::charge::Owed;
use crate::future::{Decided, ResponseFuture, decide_and_wait};
use crate::key::{KeyExtractor, RequestHead};
use crate::shared::{Prepared, Shared};

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
    ResBody: AnswerBody + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        limit(&self.shared, &mut self.inner, request)
    }
}

/// One request through a layer's configuration `shared` around `inner`,
/// which was polled ready: the whole of [`RateLimitService::call`], also
/// reached through
/// [`RateLimitLayer::call_ready`](crate::RateLimitLayer::call_ready) by a
/// router that picks a layer per request.
///
/// The decision itself is one call, [`AsyncDecide::decide_ready`] (or
/// `decide_async` in the waiting future): a front end that changes what a
/// rule decides does it in its backend, not here.
///
/// [`AsyncDecide::decide_ready`]: limiter_async::AsyncDecide::decide_ready
// Inlined into its two callers (`call`, `call_ready`): one frame per request.
#[inline]
pub(crate) fn limit<S, B, E, ReqBody, ResBody>(
    shared_arc: &Arc<Shared<B, E>>,
    inner: &mut S,
    mut request: Request<ReqBody>,
) -> ResponseFuture<S::Future, ResBody, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Backend,
    E: KeyExtractor<Key = B::Key>,
    ReqBody: Send + 'static,
    ResBody: AnswerBody + Send + 'static,
{
    let shared = &**shared_arc;
    let head = RequestHead::of(&request);
    // Handles labelled with the route, when routes are labelled; kept here
    // rather than in `Prepared`, which stays a few words.
    let route = shared.route_metrics(&head);
    let metrics = route.as_ref().unwrap_or(&shared.metrics);
    let (key, cost, max_wait) = match shared.prepare(&head, metrics) {
        Prepared::Pass => return ResponseFuture::pass(inner.call(request)),
        Prepared::NoKey(error) => return ResponseFuture::answered(shared.no_key(error)),
        Prepared::Decide {
            key,
            cost,
            max_wait,
        } => (key, cost, max_wait),
    };
    let mut trace = shared.trace(&request);
    let decision = shared.backend.decide_ready(&key, cost, max_wait);
    if let Some(trace) = &mut trace
        && decision.is_some()
    {
        trace.answered();
    }
    // Fast path: a decision made at once, and a request that needs no
    // wait, is answered or passed to the inner service right here.
    let decision = match decision {
        Some(Ok(grant)) if grant.wait.is_zero() => {
            if let Some(trace) = trace {
                trace.admitted(grant.wait, request.headers_mut());
            }
            let numbers = shared.numbers(&grant);
            metrics.allowed.increment(1);
            let future = inner.call(request);
            if shared.response_cost.is_none() {
                return ResponseFuture::with_headers(future, shared.headers.as_ref(), numbers);
            }
            // A cost after the response: the key and the layer are kept
            // (one box) until the head arrives.
            let owed = Box::new(Owed {
                shared: Arc::clone(shared_arc),
                key,
                paid: cost,
                route,
            });
            return ResponseFuture::charging(future, shared.headers.as_ref(), numbers, owed);
        }
        Some(Err(denial)) => {
            if let Some(trace) = trace {
                trace.denied(&denial);
            }
            return match shared.denied(denial, metrics, &request) {
                Some(response) => ResponseFuture::answered(response),
                None => ResponseFuture::pass(inner.call(request)),
            };
        }
        // A grant to wait for: its slot is an instant fixed now, at the
        // decision, so a late first poll of the future cannot push it back.
        Some(Ok(grant)) => Some((Ok(grant), Instant::now())),
        None => None,
    };
    // A wait, or a backend that decides asynchronously: the inner service
    // that was polled ready goes into the future; its clone stays for the
    // next poll_ready.
    let clone = inner.clone();
    let ready = std::mem::replace(inner, clone);
    let decided = Decided {
        key,
        cost,
        max_wait,
        route,
        decision,
        trace,
    };
    ResponseFuture::waiting(Box::pin(decide_and_wait(
        Arc::clone(shared_arc),
        ready,
        request,
        decided,
    )))
}
