//! The gRPC face: `envoy.service.ratelimit.v3.RateLimitService` as a tonic
//! service ([`RateLimitServer`]) and a client ([`RateLimitClient`]) for
//! tests and the benchmark, written as tonic's code generator writes them
//! (a path match, `tonic::server::Grpc::unary` with the prost codec).
//!
//! A request the service refuses to decide answers `INVALID_ARGUMENT`
//! (empty domain or descriptors, an override without a unit); a backend
//! failure under the `error` policy answers `UNAVAILABLE`, which Envoy
//! treats as a failed call (its `failure_mode_deny` decides).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use crate::backend::CounterStore;
use crate::call_trace::CallTrace;
use crate::proto::{RateLimitRequest, RateLimitResponse};
use crate::service::{RateLimitService, RequestError};

/// The method's path.
pub const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The tonic service around a [`RateLimitService`].
#[derive(Debug)]
pub struct RateLimitServer<B> {
    inner: Arc<RateLimitService<B>>,
}

impl<B> Clone for RateLimitServer<B> {
    fn clone(&self) -> Self {
        RateLimitServer {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B> RateLimitServer<B> {
    /// Serves `limiter` (with a span per call when it has a tracer:
    /// `RateLimitService::with_tracer`, feature `otel`).
    pub fn new(limiter: Arc<RateLimitService<B>>) -> RateLimitServer<B> {
        RateLimitServer { inner: limiter }
    }
}

impl<B> NamedService for RateLimitServer<B> {
    const NAME: &'static str = "envoy.service.ratelimit.v3.RateLimitService";
}

// Boxed: a span is hundreds of bytes, which the futures would otherwise
// carry (and copy) on every call, traced or not.
struct ShouldRateLimit<B>(Arc<RateLimitService<B>>, Option<Box<CallTrace>>);

/// A [`RequestError`] as a gRPC status.
pub fn status_of(e: &RequestError) -> Status {
    match e {
        RequestError::Store(_) => Status::unavailable(e.to_string()),
        _ => Status::invalid_argument(e.to_string()),
    }
}

impl<B: CounterStore> UnaryService<RateLimitRequest> for ShouldRateLimit<B> {
    type Response = RateLimitResponse;
    type Future = BoxFuture<Result<Response<RateLimitResponse>, Status>>;

    fn call(&mut self, request: Request<RateLimitRequest>) -> Self::Future {
        let inner = Arc::clone(&self.0);
        let mut trace = self.1.take();
        Box::pin(async move {
            inner
                .answer(request.get_ref(), trace.as_deref_mut())
                .await
                .map(Response::new)
                .map_err(|e| status_of(&e))
        })
    }
}

impl<B: CounterStore, Rb> Service<http::Request<Rb>> for RateLimitServer<B>
where
    Rb: http_body::Body + Send + 'static,
    Rb::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Rb>) -> Self::Future {
        if req.uri().path() == PATH {
            // No tracer: no span, no header read, no allocation.
            #[cfg(feature = "otel")]
            let trace = self
                .inner
                .tracer()
                .map(|t| Box::new(CallTrace::start(t, req.headers())));
            #[cfg(not(feature = "otel"))]
            let trace = None;
            let method = ShouldRateLimit(Arc::clone(&self.inner), trace);
            Box::pin(async move {
                let mut grpc =
                    Grpc::new(ProstCodec::<RateLimitResponse, RateLimitRequest>::default());
                Ok(grpc.unary(method, req).await)
            })
        } else {
            Box::pin(async move {
                let mut response = http::Response::new(Body::default());
                let headers = response.headers_mut();
                headers.insert(
                    Status::GRPC_STATUS,
                    (tonic::Code::Unimplemented as i32).into(),
                );
                headers.insert(
                    http::header::CONTENT_TYPE,
                    tonic::metadata::GRPC_CONTENT_TYPE,
                );
                Ok(response)
            })
        }
    }
}

/// A client of `ShouldRateLimit` over a tonic channel.
#[derive(Debug, Clone)]
pub struct RateLimitClient {
    inner: tonic::client::Grpc<tonic::transport::Channel>,
}

impl RateLimitClient {
    /// A client on `channel`.
    pub fn new(channel: tonic::transport::Channel) -> RateLimitClient {
        RateLimitClient {
            inner: tonic::client::Grpc::new(channel),
        }
    }

    /// Connects to `uri` (`http://127.0.0.1:8081`).
    ///
    /// # Errors
    ///
    /// The connection failed.
    pub async fn connect(uri: String) -> Result<RateLimitClient, tonic::transport::Error> {
        let channel = tonic::transport::Endpoint::from_shared(uri)?
            .connect()
            .await?;
        Ok(RateLimitClient::new(channel))
    }

    /// One call (a [`Request`] carries metadata, such as a `traceparent`).
    ///
    /// # Errors
    ///
    /// The call's status.
    pub async fn should_rate_limit(
        &mut self,
        request: impl tonic::IntoRequest<RateLimitRequest>,
    ) -> Result<RateLimitResponse, Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| Status::unknown(format!("service was not ready: {e}")))?;
        let codec = ProstCodec::<RateLimitRequest, RateLimitResponse>::default();
        let path = http::uri::PathAndQuery::from_static(PATH);
        self.inner
            .unary(request.into_request(), path, codec)
            .await
            .map(Response::into_inner)
    }
}
