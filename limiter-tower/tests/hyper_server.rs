//! The layer on a plain hyper server (no axum): the server inserts
//! `PeerAddr` for each connection, and the limit is per client address.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use limiter_core::Quota;
use limiter_keyed::KeyedLimiter;
use limiter_tower::{PeerAddr, PeerIp, RateLimitLayer};
use tower::ServiceBuilder;

#[tokio::test]
async fn a_hyper_server_that_records_peers_is_limited_per_client() {
    let layer = RateLimitLayer::new(
        KeyedLimiter::new(Quota::per_hour(1).unwrap()),
        PeerIp::new(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let service = ServiceBuilder::new()
                .map_request(move |mut request: Request<Incoming>| {
                    request.extensions_mut().insert(PeerAddr(peer));
                    request
                })
                .layer(layer.clone())
                .service_fn(|_request: Request<Incoming>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hi"))))
                });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                    .await;
            });
        }
    });

    let status = |local: &'static str| async move {
        let mut connector = HttpConnector::new();
        connector.set_local_address(Some(local.parse().unwrap()));
        let client: Client<_, Empty<Bytes>> =
            Client::builder(TokioExecutor::new()).build(connector);
        let request = Request::get(format!("http://{addr}/"))
            .body(Empty::new())
            .unwrap();
        client.request(request).await.unwrap().status()
    };
    assert_eq!(status("127.0.0.1").await, StatusCode::OK);
    assert_eq!(status("127.0.0.1").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(status("127.0.0.3").await, StatusCode::OK);
}
