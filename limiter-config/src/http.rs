//! [`RulesLayer`]: the HTTP router over a [`RuleSet`]: each request goes
//! through the rule that matches its route and method, with that rule's
//! key, mode, allowlist and headers, by `limiter-tower`'s layer.
//!
//! Per request: one read of the snapshot in force through the `ArcSwap`'s
//! guard (so a request sees one rule set, old or new, never a mix, and no
//! reference count is touched), the most specific routed rule (one walk of
//! the path in the snapshot's `RouteTable`, whatever the number of rules),
//! then that rule's `RateLimitLayer` around the inner service, timed only
//! for an adaptive rule. A request no rule
//! matches goes to the inner service unlimited. A rule without `match` is
//! never routed (it is for library use).
//!
//! Each snapshot holds one `RateLimitLayer` per routed rule, built when the
//! snapshot is, around the rule's live limiter: building is a few
//! allocations and the limiter state is shared, so a reload that changes a
//! rule's mode or headers rebuilds the layer and keeps the state.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use limiter_tower::{AnswerBody, ResponseFuture};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::RuleClock;
use crate::latency::{Timed, TimedFuture};
use crate::layer::RoutedLayer;
use crate::ruleset::RuleSet;

/// A tower [`Layer`] routing requests to the rules of a [`RuleSet`].
///
/// Its service answers in the inner service's body type, its rules' own
/// answers (429, 413, 503) included: see [`AnswerBody`] for the body types
/// that can carry them (axum's among them) and for one that cannot.
///
/// # Examples
///
/// ```
/// use limiter_config::RuleSet;
///
/// # let dir = std::env::temp_dir().join(format!("limiter-config-layer-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let path = dir.join("rules.yaml");
/// std::fs::write(&path, "rate_limits:\n  orders:\n    algorithm: token_bucket\n    rate: 100\n    burst: 20\n    per_ip: true\n    match: { route: \"/orders/{id}\", methods: [GET] }\n")?;
/// let rules = RuleSet::load(&path)?;
/// let app = axum::Router::<()>::new()
///     .route("/orders/{id}", axum::routing::get(|| async { "order" }))
///     .layer(rules.layer());
/// // axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())
/// # let _ = app;
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct RulesLayer<C: RuleClock> {
    rules: RuleSet<C>,
}

impl<C: RuleClock> RuleSet<C> {
    /// The HTTP layer over these rules (it follows reloads).
    pub fn layer(&self) -> RulesLayer<C> {
        RulesLayer {
            rules: self.clone(),
        }
    }
}

impl<S, C: RuleClock> Layer<S> for RulesLayer<C> {
    type Service = RulesService<S, C>;

    fn layer(&self, inner: S) -> RulesService<S, C> {
        RulesService {
            inner,
            rules: self.rules.clone(),
        }
    }
}

/// The service of a [`RulesLayer`].
#[derive(Debug, Clone)]
pub struct RulesService<S, C: RuleClock> {
    inner: S,
    rules: RuleSet<C>,
}

impl<S, C, ReqBody, ResBody> Service<Request<ReqBody>> for RulesService<S, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    C: RuleClock,
    ReqBody: Send + 'static,
    ResBody: AnswerBody + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RulesFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let snapshot = self.rules.current();
        let Some(routed) = snapshot.routed_rule(request.method(), request.uri().path()) else {
            return RulesFuture::unrouted(self.inner.call(request));
        };
        let layer = match &routed.layer {
            RoutedLayer::Rate(layer) => layer,
            // A concurrency rule: its permit is held until the inner
            // service's response is ready, then finished with the latency
            // and status (limiter-concurrency's layer, which owns the
            // ready service: a clone stays for the next poll_ready). Its
            // future holds the permit and the service, so it is boxed.
            RoutedLayer::Concurrency(layer) => {
                // Its own answers (503) are written into the inner
                // service's body type by the layer itself (`AnswerBody`).
                let clone = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, clone);
                return RulesFuture::boxed(Box::pin(layer.layer(ready).call(request)));
            }
        };
        if !routed.rule.is_adaptive() {
            // The rule's layer around the inner service that was polled
            // ready: no service built, nothing cloned, nothing boxed.
            return RulesFuture::limited(layer.call_ready(&mut self.inner, request));
        }
        // An adaptive rule times its inner service: the ready service
        // goes into the timer, a clone stays for the next poll_ready.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let mut timed = Timed::new(ready, Arc::clone(&routed.rule));
        RulesFuture::timed(layer.call_ready(&mut timed, request))
    }
}

pin_project! {
    /// The future of [`RulesService`]: the inner service's future `F`
    /// (response body `B`, error `E`) through the request's rule, or alone
    /// when no rule matches. Named, so a request that no rule matches, or
    /// that its rule admits or refuses at once, allocates nothing of its
    /// own; see [`ResponseFuture`] for what does, and for cancel safety.
    pub struct RulesFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, E> {
        Unrouted {
            #[pin]
            future: F,
        },
        Limited {
            #[pin]
            future: ResponseFuture<F, B, E>,
        },
        Timed {
            #[pin]
            future: ResponseFuture<TimedFuture<B, E>, B, E>,
        },
        Boxed {
            future: BoxedFuture<B, E>,
        },
    }
}

/// A concurrency rule's future: it holds its permit and the inner service.
type BoxedFuture<B, E> = Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>;

impl<F, B, E> RulesFuture<F, B, E> {
    fn boxed(future: BoxedFuture<B, E>) -> Self {
        RulesFuture {
            state: State::Boxed { future },
        }
    }

    fn unrouted(future: F) -> Self {
        RulesFuture {
            state: State::Unrouted { future },
        }
    }

    fn limited(future: ResponseFuture<F, B, E>) -> Self {
        RulesFuture {
            state: State::Limited { future },
        }
    }

    fn timed(future: ResponseFuture<TimedFuture<B, E>, B, E>) -> Self {
        RulesFuture {
            state: State::Timed { future },
        }
    }
}

impl<F, B, E> std::fmt::Debug for RulesFuture<F, B, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Unrouted { .. } => "unrouted",
            State::Limited { .. } => "limited",
            State::Timed { .. } => "timed",
            State::Boxed { .. } => "concurrency",
        };
        f.debug_struct("RulesFuture")
            .field("state", &state)
            .finish()
    }
}

impl<F, B, E> Future for RulesFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: AnswerBody,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Unrouted { future } => future.poll(cx),
            StateProj::Limited { future } => future.poll(cx),
            StateProj::Timed { future } => future.poll(cx),
            StateProj::Boxed { future } => future.as_mut().poll(cx),
        }
    }
}
