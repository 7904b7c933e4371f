//! [`RateLimitLayer`] and its [`RateLimitBuilder`]: the configuration every
//! clone of the layer and of its services shares.
//!
//! Invariant: a layer holds one `Arc` of its configuration and backend;
//! [`Layer::layer`] and `Clone` only copy that pointer. Applying one layer
//! to several routes (or cloning the service per connection, as axum and
//! hyper do) therefore counts every request against the same limiter.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderName;
use http::{Request, Response};
use http_body_util::Full;
use ipnet::IpNet;
use limiter_core::{debt::DEFAULT_MAX_DEBT, debt::MAX_DEBT_LIMIT};
use tower_layer::Layer;
use tower_service::Service;

use crate::backend::Backend;
use crate::future::ResponseFuture;
use crate::headers::{Draft10, HeaderStyle, LayerStyle};
use crate::key::{KeyExtractor, RequestHead};
use crate::metrics::Metrics;
use crate::response::Rejection;
use crate::response_cost::{ResponseCost, ResponseCostFn, ResponseHead, cost_in_header};
use crate::service::RateLimitService;
use crate::shared::{BypassFn, CostFn, HeaderWriter, KeyFn, Mode, RejectionFn, Shared};

/// A tower [`Layer`] that rate-limits HTTP requests through a [`Backend`],
/// keyed by a [`KeyExtractor`].
///
/// All clones, and all services it makes, share one backend and one
/// configuration. The services are infallible in axum's sense: a limited
/// request is a response (`429`, see [`Rejection`]), never an error, so no
/// `HandleErrorLayer` is needed.
///
/// # Examples
///
/// ```
/// use limiter_core::{Quota, RateLimiter};
/// use limiter_tower::{Global, RateLimitLayer};
///
/// let layer = RateLimitLayer::new(RateLimiter::new(Quota::per_second(100)?), Global);
/// // axum: Router::new().route(..).layer(layer)
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimitLayer<B: Backend, E> {
    shared: Arc<Shared<B, E>>,
}

impl<B: Backend, E> Clone for RateLimitLayer<B, E> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: Backend, E> fmt::Debug for RateLimitLayer<B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("name", &self.shared.name)
            .field("mode", &self.shared.mode)
            .field("fail_open", &self.shared.fail_open)
            .finish_non_exhaustive()
    }
}

impl<B: Backend, E: KeyExtractor<Key = B::Key>> RateLimitLayer<B, E> {
    /// A layer with the defaults: [`Mode::Reject`], cost 1, name
    /// `"default"`, [`Draft10`] headers, fail closed.
    pub fn new(backend: B, extractor: E) -> RateLimitLayer<B, E> {
        RateLimitLayer::builder(backend, extractor).finish()
    }

    /// A builder for the other options.
    pub fn builder(backend: B, extractor: E) -> RateLimitBuilder<B, E> {
        RateLimitBuilder {
            backend,
            extractor,
            mode: Mode::Reject,
            name: "default".into(),
            cost: None,
            bypass: None,
            allow_ips: Vec::new(),
            allow_key: None,
            fail_open: false,
            headers: Some(LayerStyle::new(Draft10)),
            on_rejection: None,
            label_routes: false,
            response_cost: None,
            max_debt: DEFAULT_MAX_DEBT,
            #[cfg(feature = "otel")]
            tracer: None,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.shared.backend
    }

    /// Runs one request through this layer around `inner`, which must have
    /// been polled ready: exactly what the call of a [`RateLimitService`]
    /// around `inner` does, without building one. For a router that picks a
    /// layer per request (a rule set): an admitted request allocates
    /// nothing here, and `inner` is cloned only when the request waits (the
    /// ready service goes into the future, its clone stays in `inner`).
    /// The response is in the inner service's body type `ResBody` (see
    /// [`AnswerBody`](crate::AnswerBody)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use bytes::Bytes;
    /// use http_body_util::Full;
    /// use limiter_core::{Quota, RateLimiter};
    /// use limiter_tower::{Global, RateLimitLayer};
    /// use tower::{Service, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = RateLimitLayer::new(RateLimiter::new(Quota::per_second(1)?), Global);
    /// let mut inner = service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"hi"))))
    /// });
    /// inner.ready().await?;
    /// let response = layer.call_ready(&mut inner, http::Request::new(())).await?;
    /// assert_eq!(response.status(), 200);
    /// inner.ready().await?;
    /// let response = layer.call_ready(&mut inner, http::Request::new(())).await?;
    /// assert_eq!(response.status(), 429);
    /// # Ok(())
    /// # }
    /// ```
    pub fn call_ready<S, ReqBody, ResBody>(
        &self,
        inner: &mut S,
        request: Request<ReqBody>,
    ) -> ResponseFuture<S::Future, ResBody, S::Error>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Send + 'static,
        ReqBody: Send + 'static,
        ResBody: crate::AnswerBody + Send + 'static,
    {
        crate::service::limit(&self.shared, inner, request)
    }
}

impl<S, B: Backend, E> Layer<S> for RateLimitLayer<B, E> {
    type Service = RateLimitService<S, B, E>;

    fn layer(&self, inner: S) -> RateLimitService<S, B, E> {
        RateLimitService::new(inner, Arc::clone(&self.shared))
    }
}

/// Why a [`RateLimitBuilder`] refused its options.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The name goes into headers as a quoted string: use 1 to 64 visible
    /// ASCII characters other than `"` and `\`.
    InvalidName {
        /// The name given.
        name: String,
    },
    /// The cap on debt after the response must be above zero and at most
    /// [`MAX_DEBT_LIMIT`] (one day).
    MaxDebtOutOfRange {
        /// The cap given.
        max_debt: Duration,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidName { name } => write!(
                f,
                "the limiter name {name:?} cannot go into a header; use 1 to 64 visible ASCII characters other than '\"' and '\\'"
            ),
            ConfigError::MaxDebtOutOfRange { max_debt } => write!(
                f,
                "a debt cap of {max_debt:?} is out of range; use a cap above zero and at most {MAX_DEBT_LIMIT:?}"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Options of a [`RateLimitLayer`]; [`build`](RateLimitBuilder::build)
/// checks them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_core::Quota;
/// use limiter_keyed::KeyedLimiter;
/// use limiter_tower::{LegacyHeaders, Mode, PeerIp, RateLimitLayer};
///
/// let layer = RateLimitLayer::builder(KeyedLimiter::new(Quota::per_second(5)?), PeerIp::new())
///     .name("per-ip")
///     .mode(Mode::Delay { max_delay: Duration::from_millis(500) })
///     .cost(|head| if head.method() == http::Method::POST { 5 } else { 1 })
///     .bypass(|head| head.uri().path() == "/health")
///     .allow_ips(["10.0.0.0/8".parse()?])
///     .fail_open(true)
///     .headers(LegacyHeaders)
///     .build()?;
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct RateLimitBuilder<B: Backend, E> {
    backend: B,
    extractor: E,
    mode: Mode,
    name: String,
    cost: Option<Box<CostFn>>,
    bypass: Option<Box<BypassFn>>,
    allow_ips: Vec<IpNet>,
    allow_key: Option<Box<KeyFn<B::Key>>>,
    fail_open: bool,
    headers: Option<LayerStyle>,
    on_rejection: Option<Box<RejectionFn>>,
    label_routes: bool,
    response_cost: Option<Box<ResponseCostFn>>,
    max_debt: Duration,
    #[cfg(feature = "otel")]
    tracer: Option<opentelemetry_sdk::trace::SdkTracer>,
}

impl<B: Backend, E> fmt::Debug for RateLimitBuilder<B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitBuilder")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .field("fail_open", &self.fail_open)
            .finish_non_exhaustive()
    }
}

impl<B: Backend, E: KeyExtractor<Key = B::Key>> RateLimitBuilder<B, E> {
    /// [`Mode::Reject`] (the default) or [`Mode::Delay`].
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The limiter's name: the policy name in the headers and the `limiter`
    /// label of the metrics (default `"default"`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How many permits a request costs (default 1). A cost above the burst
    /// is answered `413` (see [`Rejection::OverBurst`]).
    pub fn cost(mut self, cost: impl Fn(&RequestHead<'_>) -> u32 + Send + Sync + 'static) -> Self {
        self.cost = Some(Box::new(cost));
        self
    }

    /// Requests for which `bypass` is true pass uncounted (health checks,
    /// internal callers). Checked before the key is read.
    pub fn bypass(
        mut self,
        bypass: impl Fn(&RequestHead<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.bypass = Some(Box::new(bypass));
        self
    }

    /// Requests whose socket peer lies in one of `nets` pass uncounted.
    pub fn allow_ips(mut self, nets: impl IntoIterator<Item = IpNet>) -> Self {
        self.allow_ips.extend(nets.into_iter().map(|n| n.trunc()));
        self
    }

    /// Requests whose key satisfies `allow` pass uncounted (an allowlist of
    /// API keys, say).
    pub fn allow_key(mut self, allow: impl Fn(&B::Key) -> bool + Send + Sync + 'static) -> Self {
        self.allow_key = Some(Box::new(allow));
        self
    }

    /// When the backend cannot decide: `true` lets the request through,
    /// `false` (the default) answers `503`. Either way
    /// `rate_limit_backend_errors` counts it.
    pub fn fail_open(mut self, fail_open: bool) -> Self {
        self.fail_open = fail_open;
        self
    }

    /// The rate-limit header syntax (default [`Draft10`]).
    pub fn headers(mut self, style: impl HeaderStyle) -> Self {
        self.headers = Some(LayerStyle::new(style));
        self
    }

    /// No rate-limit headers on any response (`Retry-After` on a 429 stays).
    pub fn without_headers(mut self) -> Self {
        self.headers = None;
        self
    }

    /// Replaces the layer's own responses (see [`Rejection::problem`] for
    /// the default). A 429 still gets `Retry-After` and the rate-limit
    /// headers.
    pub fn on_rejection(
        mut self,
        respond: impl Fn(&Rejection) -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Self {
        self.on_rejection = Some(Box::new(respond));
        self
    }

    /// Labels the metrics with the route template too (axum's
    /// `MatchedPath`, `<unmatched>` for requests that matched none): a
    /// bounded label, unlike the key. Costs a registry lookup per request.
    #[cfg(feature = "axum")]
    pub fn label_routes(mut self, label_routes: bool) -> Self {
        self.label_routes = label_routes;
        self
    }

    /// Charges the rest of a request's cost when its response head arrives,
    /// as capped debt on the request's key: `read` gives the request's
    /// **total** cost from the response head (`None`: missing or
    /// malformed, counted in `rate_limit_cost_invalid_total`, nothing
    /// charged); the layer charges the total minus the up-front
    /// [`cost`](RateLimitBuilder::cost) already paid (a total below it
    /// refunds nothing), never past [`max_debt`](RateLimitBuilder::max_debt).
    /// The charge goes through the backend's
    /// [`charge_after`](limiter_core::Decide::charge_after) (async:
    /// `AsyncDecide::charge_after_async`); a backend that cannot carry
    /// debt charges nothing and counts it all as dropped. The crate docs'
    /// "Cost after the response" says why the head and not the body end,
    /// and lists the metrics.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    /// use limiter_tower::{Header, RateLimitLayer};
    ///
    /// // Rows scanned, as the service reports them in an extension.
    /// #[derive(Clone, Copy)]
    /// struct RowsScanned(u64);
    /// let layer = RateLimitLayer::builder(
    ///     KeyedLimiter::new(Quota::per_second(1_000)?.with_burst(1_000)?),
    ///     Header::new(http::header::AUTHORIZATION),
    /// )
    /// .charge_after(|head| head.extensions().get::<RowsScanned>().map(|r| r.0))
    /// .max_debt(Duration::from_secs(30))
    /// .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge_after(
        mut self,
        read: impl Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync + 'static,
    ) -> Self {
        self.response_cost = Some(Box::new(read));
        self
    }

    /// [`charge_after`](RateLimitBuilder::charge_after) with the total cost
    /// in response header `name` ([`cost_in_header`]: one value of ASCII
    /// digits; anything else is malformed).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use http::header::HeaderName;
    /// use limiter_core::Quota;
    /// use limiter_keyed::KeyedLimiter;
    /// use limiter_tower::{Header, RateLimitLayer};
    ///
    /// // 100,000 tokens a minute per API key; the upstream reports the
    /// // tokens a request used in `x-tokens-used`.
    /// let tokens = Quota::per_minute(100_000)?.with_burst(20_000)?;
    /// let layer = RateLimitLayer::builder(KeyedLimiter::new(tokens), Header::new(HeaderName::from_static("x-api-key")))
    ///     .cost_from_response_header(HeaderName::from_static("x-tokens-used"))
    ///     .max_debt(Duration::from_secs(60))
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cost_from_response_header(self, name: HeaderName) -> Self {
        self.charge_after(cost_in_header(name))
    }

    /// The cap on debt after the response (default
    /// [`DEFAULT_MAX_DEBT`], one minute): right after a charge the key's
    /// next permit is at most `max(max_debt, t)` away; the permits above
    /// are dropped and counted in `rate_limit_cost_dropped_total`.
    pub fn max_debt(mut self, max_debt: Duration) -> Self {
        self.max_debt = max_debt;
        self
    }

    /// A span per decision through `tracer` (feature `otel`; see
    /// [`otel`](crate::otel) for the span): continuing the request's
    /// `traceparent`, and handing the inner service the decision span as
    /// its parent. Without this, the tracer of
    /// [`set_default_tracer`](crate::otel::set_default_tracer) at
    /// [`build`](RateLimitBuilder::build), if any.
    #[cfg(feature = "otel")]
    pub fn tracer(mut self, tracer: opentelemetry_sdk::trace::SdkTracer) -> Self {
        self.tracer = Some(tracer);
        self
    }

    /// The layer. Metrics handles are registered now, with the `metrics`
    /// recorder installed at this point.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidName`] for a name that cannot go into a header;
    /// [`ConfigError::MaxDebtOutOfRange`] for a debt cap of zero or above
    /// [`MAX_DEBT_LIMIT`].
    pub fn build(self) -> Result<RateLimitLayer<B, E>, ConfigError> {
        if self.max_debt.is_zero() || self.max_debt > MAX_DEBT_LIMIT {
            return Err(ConfigError::MaxDebtOutOfRange {
                max_debt: self.max_debt,
            });
        }
        let valid = (1..=64).contains(&self.name.len())
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\' || b == b' ');
        if !valid {
            return Err(ConfigError::InvalidName { name: self.name });
        }
        Ok(self.finish())
    }

    fn finish(self) -> RateLimitLayer<B, E> {
        let name: Arc<str> = self.name.into();
        let headers = self.headers.map(|style| {
            Arc::new(HeaderWriter {
                name: Arc::clone(&name),
                style,
            })
        });
        RateLimitLayer {
            shared: Arc::new(Shared {
                backend: self.backend,
                extractor: self.extractor,
                mode: self.mode,
                metrics: Metrics::new(&name),
                name,
                cost: self.cost,
                bypass: self.bypass,
                allow_ips: self.allow_ips,
                allow_key: self.allow_key,
                fail_open: self.fail_open,
                headers,
                on_rejection: self.on_rejection,
                label_routes: self.label_routes,
                warned_missing_peer: AtomicBool::new(false),
                response_cost: self.response_cost.map(|read| ResponseCost {
                    read,
                    max_debt: self.max_debt,
                }),
                #[cfg(feature = "otel")]
                tracer: self
                    .tracer
                    .or_else(|| crate::otel::default_tracer().cloned())
                    .map(Box::new),
            }),
        }
    }
}
