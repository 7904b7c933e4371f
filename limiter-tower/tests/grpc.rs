//! gRPC calls through the layer, with a real tonic server and client on
//! loopback: a refused call is `RESOURCE_EXHAUSTED` with the exact wait as
//! `google.rpc.RetryInfo` (decoded by tonic-types) and the rate-limit
//! headers as metadata; a failed backend is `UNAVAILABLE`; a plain HTTP
//! request to the same layer still gets its `429`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use http_body_util::BodyExt as _;
use limiter_core::{ManualClock, Quota, RateLimiter};
use limiter_keyed::{KeyedLimiter, WhenFull};
use limiter_tower::{Global, Header, RateLimitLayer};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::UnaryService;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Status};
use tonic_types::StatusExt as _;
use tower::{Layer, ServiceExt};

/// Messages as raw bytes: no codegen needed.
#[derive(Debug, Clone, Copy, Default)]
struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;
    fn encoder(&mut self) -> BytesCodec {
        BytesCodec
    }
    fn decoder(&mut self) -> BytesCodec {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// `test.Echo/Echo`, served without a router.
#[derive(Debug, Clone, Copy)]
struct Echo;

impl UnaryService<Bytes> for Echo {
    type Response = Bytes;
    type Future = BoxFuture<Result<tonic::Response<Bytes>, Status>>;
    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        Box::pin(async move { Ok(tonic::Response::new(request.into_inner())) })
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Echo {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(BytesCodec);
            Ok(grpc.unary(Echo, request).await)
        })
    }
}

/// A tonic server of [`Echo`] behind `layer` on a loopback port.
async fn serve<L>(layer: L) -> SocketAddr
where
    L: Layer<Echo> + Clone + Send + Sync + 'static,
    L::Service: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower::Service<http::Request<tonic::body::Body>>>::Future: Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .serve_with_incoming(Echo, TcpIncoming::from(listener)),
    );
    addr
}

/// One call to `test.Echo/Echo` as `user` (metadata `x-user`).
async fn call(addr: SocketAddr, user: &'static str) -> Result<Bytes, Status> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(20))
        .connect()
        .await
        .expect("connects");
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let mut request = tonic::Request::new(Bytes::from_static(b"hi"));
    request
        .metadata_mut()
        .insert("x-user", user.parse().unwrap());
    client
        .unary(
            request,
            PathAndQuery::from_static("/test.Echo/Echo"),
            BytesCodec,
        )
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_is_resource_exhausted_with_its_wait() {
    // The clock stands still: the wait is exactly the period.
    let quota = Quota::with_period(Duration::from_millis(1500))
        .unwrap()
        .with_burst(1)
        .unwrap();
    let layer = RateLimitLayer::new(RateLimiter::with_clock(quota, ManualClock::new()), Global);
    let addr = serve(layer.clone()).await;

    assert_eq!(call(addr, "a").await.unwrap(), "hi");
    let status = call(addr, "a").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "rate limit exceeded; retry in 1500 ms");
    let retry = status
        .get_details_retry_info()
        .expect("RetryInfo in the details");
    assert_eq!(retry.retry_delay, Some(Duration::from_millis(1500)));

    // The same layer, a plain HTTP request: the problem document's 429,
    // with the same rate-limit headers the call had as metadata.
    let response = layer
        .layer(Echo)
        .oneshot(http::Request::new(tonic::body::Body::empty()))
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert!(!response.headers().contains_key("grpc-status"));
    let metadata = status.metadata();
    assert_eq!(metadata.get("retry-after").unwrap(), "2");
    for name in ["retry-after", "ratelimit", "ratelimit-policy"] {
        assert_eq!(
            metadata.get(name).unwrap().as_bytes(),
            response.headers()[name].as_bytes(),
            "{name}"
        );
    }
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(body.starts_with(br#"{"type":"about:blank","title":"Too Many Requests""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_backend_is_unavailable() {
    // One key at most, new keys refused: the second user's decision fails.
    let table = KeyedLimiter::builder(Quota::per_hour(1).unwrap())
        .clock(ManualClock::new())
        .max_keys(1)
        .when_full(WhenFull::RejectNewKeys)
        .build()
        .unwrap();
    let key = Header::new(http::HeaderName::from_static("x-user"));
    let addr = serve(RateLimitLayer::new(table, key)).await;

    assert_eq!(call(addr, "a").await.unwrap(), "hi");
    let status = call(addr, "b").await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(
        status.message(),
        "the rate limiter is unavailable; try again later"
    );
    assert!(status.details().is_empty());
    let status = call(addr, "a").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
}

/// A gRPC head over HTTP/2, through `tower::ServiceExt::oneshot`.
fn grpc_request() -> http::Request<tonic::body::Body> {
    let mut request = http::Request::new(tonic::body::Body::empty());
    *request.version_mut() = http::Version::HTTP_2;
    request.headers_mut().insert(
        "content-type",
        http::HeaderValue::from_static("application/grpc+proto"),
    );
    request
}

#[tokio::test]
async fn grpc_answers_pass_over_on_rejection_and_over_burst_has_no_wait() {
    let quota = Quota::with_period(Duration::from_secs(1))
        .unwrap()
        .with_burst(2)
        .unwrap();
    let service =
        RateLimitLayer::builder(RateLimiter::with_clock(quota, ManualClock::new()), Global)
            .cost(|_| 3)
            .on_rejection(|_| http::Response::new(http_body_util::Full::new(Bytes::from("custom"))))
            .build()
            .unwrap()
            .layer(Echo);
    let response = service.clone().oneshot(grpc_request()).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/grpc");
    assert_eq!(response.headers()["grpc-status"], "8");
    assert!(!response.headers().contains_key("grpc-status-details-bin"));
    assert!(!response.headers().contains_key("retry-after"));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(body.is_empty());
    // The same head over HTTP/1.1 is not gRPC: the user's answer.
    let mut http1 = grpc_request();
    *http1.version_mut() = http::Version::HTTP_11;
    let response = service.oneshot(http1).await.unwrap();
    assert!(!response.headers().contains_key("grpc-status"));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "custom");
}
