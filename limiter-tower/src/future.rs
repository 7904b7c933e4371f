//! [`ResponseFuture`]: the future of one request through the layer, named
//! and pin-projected so that only a wait allocates.
//!
//! | state | when | allocates |
//! |---|---|---|
//! | pass-through | bypassed, allowlisted, or failed open | nothing |
//! | answered | the layer's own response (429, 413, 503, no key) | nothing (the response exists already) |
//! | with headers | granted at once: the inner future, then the grant's headers | nothing |
//! | charging | granted at once by a layer with a cost after the response: as with headers, then the charge | one box for the key until the head |
//! | settling | the charge of a backend that decides asynchronously (Redis), awaited before the response is handed on | one box for the charge |
//! | waiting | a grant whose slot is later, or a backend that decides asynchronously | one box for the wait and the call after it |
//!
//! # Cancel safety
//!
//! Dropping the future while it waits for a slot gives the reservation back
//! through [`AsyncDecide::cancel`](limiter_async::AsyncDecide::cancel): the permits return to the key (or to its
//! next waiter). After the inner service was called the permits are spent.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use limiter_async::{CancelGrant, SlotWait, WakeUp};
use limiter_core::{Denial, Grant};

use crate::backend::Backend;
use crate::body::AnswerBody;
use crate::charge::{Charging, Settle};
use crate::key::KeyExtractor;
use crate::metrics::Metrics;
use crate::otel::span::DecisionTrace;
use crate::response_cost::ResponseHead;
use crate::shared::{HeaderNumbers, HeaderWriter, Shared};

/// The boxed future of the waiting state.
type Waiting<B, E> = Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimitService::call`](crate::RateLimitService):
    /// the inner service's future `F` (whose response body is `B` and error
    /// `E`), the layer's own answer (in `B`, see [`AnswerBody`]), or a
    /// wait. The
    /// only state that allocates is the wait (a grant whose slot is later,
    /// or a backend that decides asynchronously): one box for the wait and
    /// the call after it. Dropping it while it waits gives the grant back.
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
        Charging {
            #[pin]
            future: F,
            writer: Option<Arc<HeaderWriter>>,
            numbers: Option<HeaderNumbers>,
            owed: Option<Box<dyn Settle>>,
        },
        Settling {
            charge: Charging,
            response: Option<Response<B>>,
        },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    #[inline]
    pub(crate) fn pass(future: F) -> Self {
        ResponseFuture {
            state: State::Pass { future },
        }
    }

    #[inline]
    pub(crate) fn answered(response: Response<Full<Bytes>>) -> Self {
        ResponseFuture {
            state: State::Answered {
                response: Some(response),
            },
        }
    }

    /// `future`, then the headers of `numbers` (none without a writer).
    #[inline]
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

    /// `future`, then the headers of `numbers`, then the charge `owed`
    /// from its response head.
    pub(crate) fn charging(
        future: F,
        writer: Option<&Arc<HeaderWriter>>,
        numbers: Option<HeaderNumbers>,
        owed: Box<dyn Settle>,
    ) -> Self {
        ResponseFuture {
            state: State::Charging {
                future,
                writer: writer.cloned(),
                numbers,
                owed: Some(owed),
            },
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
            State::Charging { .. } => "charging",
            State::Settling { .. } => "settling",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: AnswerBody,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Pass { future } => future.poll(cx),
            StateProj::Answered { response } => Poll::Ready(Ok(response
                .take()
                .expect("ResponseFuture polled after it completed")
                .map(B::from_answer))),
            StateProj::WithHeaders {
                future,
                writer,
                numbers,
            } => {
                let mut response = ready!(future.poll(cx))?;
                writer.write(*numbers, response.headers_mut());
                Poll::Ready(Ok(response))
            }
            StateProj::Waiting { future } => future.as_mut().poll(cx),
            StateProj::Charging {
                future,
                writer,
                numbers,
                owed,
            } => {
                let mut response = ready!(future.poll(cx))?;
                if let (Some(writer), Some(numbers)) = (writer.as_ref(), *numbers) {
                    writer.write(numbers, response.headers_mut());
                }
                let head = ResponseHead::of(&response);
                let Some(mut charge) = owed.take().and_then(|owed| owed.settle(&head)) else {
                    return Poll::Ready(Ok(response));
                };
                if charge.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Ok(response));
                }
                state.set(State::Settling {
                    charge,
                    response: Some(response),
                });
                Poll::Pending
            }
            StateProj::Settling { charge, response } => {
                ready!(charge.as_mut().poll(cx));
                Poll::Ready(Ok(response
                    .take()
                    .expect("ResponseFuture polled after it completed")))
            }
        }
    }
}

/// What the waiting path starts from.
pub(crate) struct Decided<K, T> {
    pub(crate) key: K,
    pub(crate) cost: u32,
    pub(crate) max_wait: Duration,
    pub(crate) route: Option<Metrics>,
    /// The decision and the instant it was made at; `None`: still to be
    /// asked of the backend.
    pub(crate) decision: Option<(Result<Grant<T>, Denial>, Instant)>,
    /// The decision's span, when the layer traces.
    pub(crate) trace: Option<DecisionTrace>,
}

/// The waiting path: a decision still to be made (`decision` is `None`),
/// or a grant to wait for; then the inner service.
pub(crate) async fn decide_and_wait<S, B, E, ReqBody, ResBody>(
    shared: Arc<Shared<B, E>>,
    mut inner: S,
    mut request: Request<ReqBody>,
    decided: Decided<B::Key, B::Ticket>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: AnswerBody,
    B: Backend,
    E: KeyExtractor<Key = B::Key>,
{
    let Decided {
        key,
        cost,
        max_wait,
        route,
        decision,
        mut trace,
    } = decided;
    let metrics = route.as_ref().unwrap_or(&shared.metrics);
    let (decision, decided_at) = match decision {
        Some(decided) => decided,
        None => {
            if let Some(trace) = &mut trace {
                trace.asking();
            }
            let decision = shared.backend.decide_async(&key, cost, max_wait).await;
            if let Some(trace) = &mut trace {
                trace.answered();
            }
            // The remote decision was made before its reply: its slot
            // counted from now is never early.
            (decision, Instant::now())
        }
    };
    let grant = match decision {
        Ok(grant) => grant,
        Err(denial) => {
            if let Some(trace) = trace {
                trace.denied(&denial);
            }
            match shared.denied(denial, metrics, &request) {
                Some(response) => return Ok(response.map(ResBody::from_answer)),
                // Failed open: through, uncounted by the limiter.
                None => return inner.call(request).await,
            }
        }
    };
    let numbers = shared.numbers(&grant);
    let wait = grant.wait;
    if !wait.is_zero() {
        delay(&shared, &key, grant, decided_at, metrics).await;
    }
    if let Some(trace) = trace {
        trace.admitted(wait, request.headers_mut());
    }
    metrics.allowed.increment(1);
    let mut response = inner.call(request).await?;
    if let (Some(writer), Some(numbers)) = (&shared.headers, numbers) {
        writer.write(numbers, response.headers_mut());
    }
    shared
        .charge_response(&key, &ResponseHead::of(&response), cost, metrics)
        .await;
    Ok(response)
}

/// Waits for the grant's slot on the workspace's one wait
/// ([`SlotWait`]): the absolute deadline `decided_at + grant.wait` (the
/// instant of the decision, not of this future's first poll), the precise
/// wake-up, and a refund of the grant if the future is dropped first.
async fn delay<B: Backend, E>(
    shared: &Shared<B, E>,
    key: &B::Key,
    grant: Grant<B::Ticket>,
    decided_at: Instant,
    metrics: &Metrics,
) {
    /// Keeps the queue gauge right however the wait ends.
    struct Queued<'a>(&'a Metrics);
    impl Drop for Queued<'_> {
        fn drop(&mut self) {
            self.0.queue_size.decrement(1.0);
        }
    }
    metrics.delayed.increment(1);
    metrics.queue_size.increment(1.0);
    metrics.wait_seconds.record(grant.wait.as_secs_f64());
    let _queued = Queued(metrics);
    let window = grant.policy.window();
    let refund = CancelGrant {
        decider: &shared.backend,
        key,
        ticket: grant.ticket,
    };
    // At its slot the grant is used: the returned refund is dropped unused.
    let deadline = decided_at.checked_add(grant.wait);
    let _used = match deadline {
        Some(deadline) => {
            let wait = deadline.saturating_duration_since(Instant::now());
            SlotWait::until(deadline, wait, WakeUp::Precise, window, refund).await
        }
        // A slot beyond what the clock can name: as far as it goes.
        None => SlotWait::after(grant.wait, WakeUp::Precise, window, refund).await,
    };
}
