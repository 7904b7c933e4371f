//! `Timed`: the inner service of an `adaptive` rule, timed, so the HTTP
//! layer feeds the rule's policy with the downstream's latency.
//!
//! Only the inner service is timed (from its call to its response), never
//! the time a request was held by the rate limiter. The status says what the
//! sample means ([`outcome_of`]): a 5xx is an overload signal (`Dropped`), a
//! 4xx says nothing about load (`Ignored`), anything else is a latency
//! sample (`Success`). Time is tokio's clock, so paused-time tests drive it.
//! Rules of other algorithms are not wrapped at all.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use limiter_core::adaptive::Completion;
use tower_service::Service;

use crate::RuleClock;
use crate::limiter::RuleLimiter;

/// What a response with `status` says about the downstream's load.
pub(crate) fn outcome_of(status: StatusCode) -> Completion {
    if status.is_server_error() {
        Completion::Dropped
    } else if status.is_client_error() {
        Completion::Ignored
    } else {
        Completion::Success
    }
}

/// An inner service whose latency is recorded into an adaptive rule.
pub(crate) struct Timed<S, C: RuleClock> {
    inner: S,
    /// The adaptive rule to record into.
    rule: Arc<RuleLimiter<C>>,
}

impl<S, C: RuleClock> Timed<S, C> {
    pub(crate) fn new(inner: S, rule: Arc<RuleLimiter<C>>) -> Timed<S, C> {
        Timed { inner, rule }
    }
}

impl<S: Clone, C: RuleClock> Clone for Timed<S, C> {
    fn clone(&self) -> Self {
        Timed {
            inner: self.inner.clone(),
            rule: Arc::clone(&self.rule),
        }
    }
}

impl<S: std::fmt::Debug, C: RuleClock> std::fmt::Debug for Timed<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timed")
            .field("inner", &self.inner)
            .field("rule", &self.rule.name())
            .finish()
    }
}

/// The future of a [`Timed`] service (response
/// body `B`, error `E`): boxed, as only adaptive rules are timed.
pub(crate) type TimedFuture<B, E> =
    Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send + 'static>>;

impl<S, C, ReqBody, ResBody> Service<Request<ReqBody>> for Timed<S, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResBody: 'static,
    C: RuleClock,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = TimedFuture<ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let start = tokio::time::Instant::now();
        let future = self.inner.call(request);
        let rule = Arc::clone(&self.rule);
        Box::pin(async move {
            let response = future.await?;
            rule.record(start.elapsed(), outcome_of(response.status()));
            Ok(response)
        })
    }
}
