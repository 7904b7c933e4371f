//! [`ResponseFuture`]: the future of one request through the layer, named
//! and pin-projected so that only a wait allocates.
//!
//! | state | when | allocates |
//! |---|---|---|
//! | pass-through | bypassed, allowlisted, or failed open | nothing |
//! | answered | the layer's own response (429, 413, 503, no key) | nothing (the response exists already) |
//! | with headers | granted at once: the inner future, then the grant's headers | nothing |
//! | waiting | a grant whose slot is later, or a backend that decides asynchronously | one box for the wait and the call after it |
//!
//! # Cancel safety
//!
//! Dropping the future while it waits for a slot gives the reservation back
//! through [`Backend::cancel`]: the permits return to the key (or to its
//! next waiter). After the inner service was called the permits are spent.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{Either, Full};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::backend::{Backend, Denial, Grant};
use crate::key::KeyExtractor;
use crate::metrics::Metrics;
use crate::shared::{HeaderNumbers, HeaderWriter, Shared};

/// The body of a response through the layer: the inner service's, or the
/// layer's own (a problem document).
pub type LimitBody<B> = Either<B, Full<Bytes>>;

/// The boxed future of the waiting state.
type Waiting<B, E> = Pin<Box<dyn Future<Output = Result<Response<LimitBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimitService::call`](crate::RateLimitService):
    /// the inner service's future `F` (whose response body is `B` and error
    /// `E`), the layer's own answer, or a wait. See the
    /// [module docs](self) for which allocates.
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, E> {
        Pass {
            #[pin]
            future: F,
        },
        Answered {
            response: Option<Response<Full<Bytes>>>,
        },
        WithHeaders {
            #[pin]
            future: F,
            writer: Arc<HeaderWriter>,
            numbers: HeaderNumbers,
        },
        Waiting {
            future: Waiting<B, E>,
        },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    pub(crate) fn pass(future: F) -> Self {
        ResponseFuture {
            state: State::Pass { future },
        }
    }

    pub(crate) fn answered(response: Response<Full<Bytes>>) -> Self {
        ResponseFuture {
            state: State::Answered {
                response: Some(response),
            },
        }
    }

    /// `future`, then the headers of `numbers` (none without a writer).
    pub(crate) fn with_headers(
        future: F,
        writer: Option<&Arc<HeaderWriter>>,
        numbers: Option<HeaderNumbers>,
    ) -> Self {
        match (writer, numbers) {
            (Some(writer), Some(numbers)) => ResponseFuture {
                state: State::WithHeaders {
                    future,
                    writer: Arc::clone(writer),
                    numbers,
                },
            },
            _ => ResponseFuture::pass(future),
        }
    }

    pub(crate) fn waiting(future: Waiting<B, E>) -> Self {
        ResponseFuture {
            state: State::Waiting { future },
        }
    }
}

impl<F, B, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Pass { .. } => "pass",
            State::Answered { .. } => "answered",
            State::WithHeaders { .. } => "with_headers",
            State::Waiting { .. } => "waiting",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LimitBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Pass { future } => {
                Poll::Ready(ready!(future.poll(cx)).map(|r| r.map(Either::Left)))
            }
            StateProj::Answered { response } => Poll::Ready(Ok(response
                .take()
                .expect("ResponseFuture polled after it completed")
                .map(Either::Right))),
            StateProj::WithHeaders {
                future,
                writer,
                numbers,
            } => {
                let mut response = ready!(future.poll(cx))?.map(Either::Left);
                writer.write(*numbers, response.headers_mut());
                Poll::Ready(Ok(response))
            }
            StateProj::Waiting { future } => future.as_mut().poll(cx),
        }
    }
}

/// What the waiting path starts from.
pub(crate) struct Decided<K, T> {
    pub(crate) key: K,
    pub(crate) cost: u32,
    pub(crate) max_wait: Duration,
    pub(crate) route: Option<Metrics>,
    /// `None`: still to be asked of the backend.
    pub(crate) decision: Option<Result<Grant<T>, Denial>>,
}

/// The waiting path: a decision still to be made (`decision` is `None`),
/// or a grant to wait for; then the inner service.
pub(crate) async fn decide_and_wait<S, B, E, ReqBody, ResBody>(
    shared: Arc<Shared<B, E>>,
    mut inner: S,
    request: Request<ReqBody>,
    decided: Decided<B::Key, B::Ticket>,
) -> Result<Response<LimitBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    B: Backend,
    E: KeyExtractor<Key = B::Key>,
{
    let Decided {
        key,
        cost,
        max_wait,
        route,
        decision,
    } = decided;
    let metrics = route.as_ref().unwrap_or(&shared.metrics);
    let decision = match decision {
        Some(decision) => decision,
        None => shared.backend.decide(&key, cost, max_wait).await,
    };
    let grant = match decision {
        Ok(grant) => grant,
        Err(denial) => match shared.denied(&key, denial, metrics) {
            Some(response) => return Ok(response.map(Either::Right)),
            // Failed open: through, uncounted by the limiter.
            None => return Ok(inner.call(request).await?.map(Either::Left)),
        },
    };
    let numbers = shared.numbers(&key, &grant);
    if !grant.wait.is_zero() {
        delay(&shared, key, grant, metrics).await;
    }
    metrics.allowed.increment(1);
    let mut response = inner.call(request).await?.map(Either::Left);
    if let (Some(writer), Some(numbers)) = (&shared.headers, numbers) {
        writer.write(numbers, response.headers_mut());
    }
    Ok(response)
}

/// Sleeps until the grant's slot; a drop before then gives it back.
async fn delay<B: Backend, E>(
    shared: &Shared<B, E>,
    key: B::Key,
    grant: Grant<B::Ticket>,
    metrics: &Metrics,
) {
    struct Held<'a, B: Backend, E> {
        shared: &'a Shared<B, E>,
        metrics: &'a Metrics,
        held: Option<(B::Key, B::Ticket)>,
    }
    impl<B: Backend, E> Drop for Held<'_, B, E> {
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
    let mut held = Held {
        shared,
        metrics,
        held: Some((key, grant.ticket)),
    };
    tokio::time::sleep(grant.wait).await;
    held.held = None;
}
