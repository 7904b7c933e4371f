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

use crate::RuleClock;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body_util::Either;
use limiter_tower::{LimitBody, RateLimitService};
use tower_layer::Layer;
use tower_service::Service;

use crate::backend::RuleBackend;
use crate::key::RuleKey;
use crate::latency::Timed;
use crate::layer::RoutedLayer;
use crate::ruleset::RuleSet;
use crate::snapshot::Routed;

/// A tower [`Layer`] routing requests to the rules of a [`RuleSet`].
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
    ResBody: Send + 'static,
{
    type Response = Response<LimitBody<ResBody>>;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, S::Error>> + Send + 'static>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The service polled ready goes to the call; a clone stays for the
        // next poll_ready.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let snapshot = self.rules.current();
        let path = request.uri().path();
        match snapshot.routed_rule(request.method(), path) {
            Some(Routed {
                layer: RoutedLayer::Rate(layer),
                rule,
            }) => {
                // Only an adaptive rule's inner service is timed.
                let adaptive = rule.is_adaptive().then(|| Arc::clone(rule));
                let timed = Timed::new(inner, adaptive);
                let mut service: RateLimitService<Timed<S, C>, RuleBackend<C>, RuleKey> =
                    layer.layer(timed);
                Box::pin(service.call(request))
            }
            // A concurrency rule: its permit is held until the inner
            // service's response is ready, then finished with the latency
            // and status (limiter-concurrency's layer).
            Some(Routed {
                layer: RoutedLayer::Concurrency(layer),
                ..
            }) => Box::pin(layer.layer(inner).call(request)),
            None => {
                let mut inner = inner;
                let future = inner.call(request);
                Box::pin(async move { Ok(future.await?.map(Either::Left)) })
            }
        }
    }
}
