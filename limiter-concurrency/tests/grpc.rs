//! The gRPC flavour against a real tonic server and client on loopback: a
//! call that finds no permit gets `RESOURCE_EXHAUSTED` as the client sees
//! it, and the call holding the permit completes. The layer around a tonic
//! service answers in tonic's own body type (the feature `tonic`).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use hyper::body::Body as _;
use limiter_concurrency::ConcurrencyLimiter;
use limiter_concurrency::http::ConcurrencyLimitLayer;
use tokio::sync::watch;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::UnaryService;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Status};
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

/// `test.Echo/Echo` (the only method; served without a router): answers
/// with the request once the test opens `gate` (sends `true`).
#[derive(Debug, Clone)]
struct Echo {
    gate: watch::Receiver<bool>,
}

struct Handler {
    gate: watch::Receiver<bool>,
}

impl UnaryService<Bytes> for Handler {
    type Response = Bytes;
    type Future = BoxFuture<Result<tonic::Response<Bytes>, Status>>;
    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let mut gate = self.gate.clone();
        Box::pin(async move {
            gate.wait_for(|&open| open)
                .await
                .expect("the test holds the gate");
            Ok(tonic::Response::new(request.into_inner()))
        })
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
        let handler = Handler {
            gate: self.gate.clone(),
        };
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(BytesCodec);
            Ok(grpc.unary(handler, request).await)
        })
    }
}

async fn call(addr: std::net::SocketAddr, body: &'static [u8]) -> Result<Bytes, Status> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .expect("valid uri")
        .connect()
        .await
        .expect("connects");
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.expect("ready");
    let path = PathAndQuery::from_static("/test.Echo/Echo");
    client
        .unary(
            tonic::Request::new(Bytes::from_static(body)),
            path,
            BytesCodec,
        )
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_a_permit_gets_resource_exhausted() {
    let limiter = ConcurrencyLimiter::new(1).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // The first call is held in the handler until the second was refused:
    // however slow a loaded machine makes the second, the first still holds
    // the permit then.
    let (open, gate) = watch::channel(false);
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .layer(ConcurrencyLimitLayer::new("grpc", limiter.clone()).grpc())
            .serve_with_incoming(Echo { gate }, TcpIncoming::from(listener)),
    );
    let holder = tokio::spawn(call(addr, b"first"));
    // Wait (bounded: a call that never gets its permit fails the test)
    // until the first call holds the permit.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while limiter.in_flight() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline && !holder.is_finished(),
            "the first call never held the permit"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let shed = call(addr, b"second").await.expect_err("no permit");
    assert_eq!(shed.code(), Code::ResourceExhausted);
    assert_eq!(shed.message(), "concurrency limit reached");
    open.send(true).unwrap();
    assert_eq!(holder.await.unwrap().unwrap(), Bytes::from_static(b"first"));
    assert_eq!(limiter.in_flight(), 0);
    server.abort();
}

#[tokio::test]
async fn the_layer_answers_in_tonics_own_body() {
    let limiter = ConcurrencyLimiter::new(1).unwrap();
    let (_open, gate) = watch::channel(false);
    let service = ConcurrencyLimitLayer::new("grpc", limiter.clone())
        .grpc()
        .layer(Echo { gate });
    let _held = limiter.try_acquire_owned().unwrap();
    // The layered service is a service of tonic's body, as the one it wraps
    // (nothing for tonic to box again); its answer is tonic's empty body.
    let response: http::Response<tonic::body::Body> = service
        .oneshot(http::Request::new(tonic::body::Body::empty()))
        .await
        .unwrap();
    assert_eq!(response.headers()["grpc-status"], "8");
    assert!(response.body().is_end_stream());
}
