//! The serving model on real sockets: every worker has its own listener
//! socket on the one port (`SO_REUSEPORT`) and answers, and each keeps its
//! upstream connections alive across requests (an upstream that counts
//! the connections it accepts sees one per worker that served).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use crate::peers::{NO_RULES, gateway};
use crate::support::TempDir;

/// An HTTP/1.1 upstream that counts the connections it accepts:
/// `/chunked` answers a body without a length, `/echo` the request body,
/// anything else `ok`.
async fn counting_upstream() -> (SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // Relaxed: a statistic the test reads after the requests.
            count.fetch_add(1, Ordering::Relaxed);
            let svc = service_fn(|request: Request<Incoming>| async move {
                type Chunks =
                    futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>;
                let body: http_body_util::Either<Full<Bytes>, StreamBody<Chunks>> =
                    match request.uri().path() {
                        "/chunked" => http_body_util::Either::Right(StreamBody::new(
                            futures::stream::iter(vec![
                                Ok(Frame::data(Bytes::from_static(b"ch"))),
                                Ok(Frame::data(Bytes::from_static(b"unked"))),
                            ]),
                        )),
                        "/echo" => {
                            let bytes = request.into_body().collect().await?.to_bytes();
                            http_body_util::Either::Left(Full::new(bytes))
                        }
                        _ => http_body_util::Either::Left(Full::new(Bytes::from_static(b"ok"))),
                    };
                Ok::<_, hyper::Error>(Response::new(body))
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, accepted)
}

fn gateway_file(upstream: SocketAddr, workers: usize) -> String {
    format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = {workers}\n[[upstream]]\nurl = \"http://{upstream}\"\n"
    )
}

/// One keep-alive client connection to `addr`.
async fn connection(addr: SocketAddr) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

async fn exchange(
    send: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: &'static str,
) -> (StatusCode, Bytes) {
    send.ready().await.unwrap();
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "test")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    let response = send.send_request(request).await.unwrap();
    let status = response.status();
    (
        status,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_requests_on_one_connection_use_one_upstream_connection() {
    let (upstream, accepted) = counting_upstream().await;
    let dir = TempDir::new();
    let gw = gateway(dir.path(), NO_RULES, &gateway_file(upstream, 2)).await;
    let mut send = connection(gw.addrs()[0]).await;
    for i in 0..1000 {
        // Every kind of body end: a length, chunked, a HEAD, a request body.
        let (method, path, body, expect): (_, _, _, &[u8]) = match i % 4 {
            0 => ("GET", "/", "", b"ok"),
            1 => ("GET", "/chunked", "", b"chunked"),
            2 => ("HEAD", "/", "", b""),
            _ => ("POST", "/echo", "a request body", b"a request body"),
        };
        let (status, got) = exchange(&mut send, method, path, body).await;
        assert_eq!(status, 200, "request {i} ({method} {path})");
        assert_eq!(&got[..], expect, "request {i} ({method} {path})");
    }
    // Relaxed: read after every exchange has completed.
    assert_eq!(accepted.load(Ordering::Relaxed), 1, "upstream connections");
    gw.shutdown().await;
}

/// The listening sockets on `port` (IPv4, from /proc/net/tcp).
fn listening_sockets(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address is field 1, st field 3; 0A is LISTEN.
            fields.get(1).is_some_and(|a| a.ends_with(&local)) && fields.get(3) == Some(&"0A")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_worker_listens_on_the_port_and_answers() {
    let (upstream, accepted) = counting_upstream().await;
    let dir = TempDir::new();
    let gw = gateway(dir.path(), NO_RULES, &gateway_file(upstream, 4)).await;
    let addr = gw.addrs()[0];
    assert_eq!(listening_sockets(addr.port()), 4, "one socket per worker");
    // 64 connections (the kernel spreads them over the 4 sockets by the
    // client port: all four get some but with odds of 4 x (3/4)^64; a
    // worker that did not serve would leave some unanswered), one request
    // each, in turn: one upstream connection serves them all, each worker
    // whose pool is empty being given it by the one that last used it.
    let mut held = Vec::new();
    for i in 0..64 {
        let mut send = connection(addr).await;
        let (status, got) = exchange(&mut send, "GET", "/", "").await;
        assert_eq!(
            (status.as_u16(), &got[..]),
            (200, &b"ok"[..]),
            "connection {i}"
        );
        held.push(send);
    }
    // Relaxed: read after every exchange has completed.
    assert_eq!(
        accepted.load(Ordering::Relaxed),
        1,
        "one upstream connection for every worker"
    );
    drop(held);
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_is_refused() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = TempDir::new();
    let mut config = limiter_gateway::GatewayConfig::from_toml(
        &dir.path().join("gw.toml"),
        &format!("listen = [\"127.0.0.1:{port}\"]\nworkers = 2\n[[upstream]]\nurl = \"http://127.0.0.1:9\"\n"),
    )
    .unwrap();
    config.timeouts.drain = std::time::Duration::ZERO;
    let rules = limiter_config::RuleSet::load(dir.write("rules.yaml", NO_RULES)).unwrap();
    let error = limiter_gateway::Gateway::new(config, rules)
        .start()
        .await
        .expect_err("the port is taken");
    assert!(error.to_string().contains(&port.to_string()), "{error}");
}
