//! A real axum server on an ephemeral loopback port with peer addresses
//! recorded, and a real HTTP client (hyper-util's) bound to a chosen
//! loopback address, shared by the server tests.
#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use limiter_core::Quota;

/// Serves `app` on 127.0.0.1:0 with peer addresses recorded.
pub(crate) async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

pub(crate) type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// A client whose connections come from `local`.
pub(crate) fn client_from(local: &str) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(local.parse::<IpAddr>().unwrap()));
    Client::builder(TokioExecutor::new()).build(connector)
}

pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

pub(crate) async fn get_from(
    client: &HttpClient,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut request = Request::get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

pub(crate) fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

pub(crate) fn per_hour(n: u32) -> Quota {
    Quota::per_hour(n).unwrap().with_burst(n).unwrap()
}
