//! Upstream connections stay open across clients that come and go: after
//! the warm-up, the gateway opens no new one, even when clients leave with
//! a request in flight (before its response head, or in the middle of its
//! body): the exchange is finished and its connection kept (module
//! `upstream::local`, "salvage").

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::peers::{NO_RULES, gateway};
use crate::support::{TempDir, sample};

/// The gate's phase: `/hold/N` and `/stream/N` wait for phase `N`.
type Phase = watch::Sender<u32>;

/// An upstream that counts the connections it accepts and the requests it
/// is holding: `/hold/N` answers `done` once the phase is `N`;
/// `/stream/N` sends its head and `a` at once, then `b` once the phase is
/// `N`; anything else `ok`.
async fn phased_upstream() -> (SocketAddr, Arc<AtomicU64>, Arc<AtomicU64>, Phase) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let holding = Arc::new(AtomicU64::new(0));
    let (phase, gate) = watch::channel(0u32);
    let (count, held) = (Arc::clone(&accepted), Arc::clone(&holding));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // Relaxed: statistics the test polls or reads after the answers.
            count.fetch_add(1, Ordering::Relaxed);
            let (gate, held) = (gate.clone(), Arc::clone(&held));
            let svc = service_fn(move |request: Request<Incoming>| {
                let (mut gate, held) = (gate.clone(), Arc::clone(&held));
                async move {
                    let path = request.uri().path().to_owned();
                    let wait = |p: &str| p.rsplit('/').next().and_then(|n| n.parse::<u32>().ok());
                    type Frames =
                        futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>;
                    let body: Frames = if path.starts_with("/hold/") {
                        let n = wait(&path).unwrap();
                        held.fetch_add(1, Ordering::Relaxed);
                        let _ = gate.wait_for(|&p| p >= n).await;
                        Box::pin(futures::stream::iter([Ok(Frame::data(
                            Bytes::from_static(b"done"),
                        ))]))
                    } else if path.starts_with("/stream/") {
                        let n = wait(&path).unwrap();
                        held.fetch_add(1, Ordering::Relaxed);
                        let first =
                            futures::stream::iter([Ok(Frame::data(Bytes::from_static(b"a")))]);
                        let rest = futures::stream::once(async move {
                            let _ = gate.wait_for(|&p| p >= n).await;
                            Ok(Frame::data(Bytes::from_static(b"b")))
                        });
                        Box::pin(futures::StreamExt::chain(first, rest))
                    } else {
                        Box::pin(futures::stream::iter([Ok(Frame::data(
                            Bytes::from_static(b"ok"),
                        ))]))
                    };
                    Ok::<_, Infallible>(Response::new(StreamBody::new(body)))
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, accepted, holding, phase)
}

type Client = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn connection(addr: SocketAddr) -> Client {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

async fn get(send: &mut Client, path: &str) -> Bytes {
    send.ready().await.unwrap();
    let request = Request::get(path)
        .header("host", "test")
        .body(Empty::new())
        .unwrap();
    let response = send.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.into_body().collect().await.unwrap().to_bytes()
}

fn counter(family: &str) -> f64 {
    let text = limiter_gateway::metrics_handle().render();
    sample(&text, &format!("{family}{{upstream=\"reuse\"}}"))
}

/// Polls `what` (bounded) until it reads `n`.
async fn until(what: &str, n: f64, read: impl Fn() -> f64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while read() != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {} and never {n}",
            read()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One request per client connection held at the upstream at once: as
/// many upstream connections busy together.
async fn all_at_once(clients: &mut [Client], holding: &AtomicU64, phase: &Phase, n: u32) {
    let before = holding.load(Ordering::Relaxed) as f64;
    let count = clients.len() as f64;
    let path = format!("/hold/{n}");
    let requests = clients.iter_mut().map(|c| get(c, &path));
    let all = futures::future::join_all(requests);
    let opened = async {
        until("requests held at the upstream", before + count, || {
            holding.load(Ordering::Relaxed) as f64
        })
        .await;
        phase.send_replace(n);
    };
    let (answers, ()) = tokio::join!(all, opened);
    for body in answers {
        assert_eq!(&body[..], b"done");
    }
}

/// A raw client that sends `GET path`, waits until the upstream holds
/// `held` requests and `seen` is in the answer, then shuts its side down
/// and waits for the gateway to close its own (the gateway has then
/// dropped the request).
async fn leave(gateway: SocketAddr, path: &str, holding: &AtomicU64, held: f64, seen: &[u8]) {
    let mut stream = TcpStream::connect(gateway).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    until("requests held at the upstream", held, || {
        holding.load(Ordering::Relaxed) as f64
    })
    .await;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.is_empty() && !got.windows(seen.len()).any(|w| w == seen) {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the gateway closed before {seen:?}");
        got.extend_from_slice(&buf[..n]);
    }
    stream.shutdown().await.unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(20), async {
        while stream.read(&mut buf).await.unwrap_or(0) > 0 {}
    });
    rest.await
        .expect("the gateway closes a connection its client left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_come_and_go_open_no_upstream_connection_after_warm_up() {
    let (upstream, accepted, holding, phase) = phased_upstream().await;
    let dir = TempDir::new();
    let file = format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 1\n[[upstream]]\nname = \"reuse\"\nurl = \"http://{upstream}\"\n"
    );
    let gw = gateway(dir.path(), NO_RULES, &file).await;
    let addr = gw.addrs()[0];
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(connection(addr).await);
    }
    // Warm-up: four exchanges at once need four upstream connections.
    all_at_once(&mut clients, &holding, &phase, 1).await;
    let opened = "gateway_upstream_connections_opened_total";
    assert_eq!(counter(opened), 4.0, "warm-up");

    // Many requests on the four client connections, at most four at once.
    let loops = clients.iter_mut().map(|c| async move {
        for _ in 0..100 {
            assert_eq!(&get(c, "/").await[..], b"ok");
        }
    });
    futures::future::join_all(loops).await;

    // Clients that leave before the head, and in the middle of the body.
    leave(addr, "/hold/2", &holding, 5.0, b"").await;
    leave(addr, "/hold/2", &holding, 6.0, b"").await;
    // The first chunk, `a`, as the gateway frames it.
    leave(addr, "/stream/2", &holding, 7.0, b"1\r\na\r\n").await;
    leave(addr, "/stream/2", &holding, 8.0, b"1\r\na\r\n").await;
    phase.send_replace(2);
    until("connections kept", 4.0, || {
        counter("gateway_upstream_connections_kept_total")
    })
    .await;

    // Four at once again, and new clients: still the same four.
    all_at_once(&mut clients, &holding, &phase, 3).await;
    let mut fresh = connection(addr).await;
    assert_eq!(&get(&mut fresh, "/").await[..], b"ok");
    assert_eq!(counter(opened), 4.0, "opened after the warm-up");
    // Relaxed: read after every exchange has completed.
    assert_eq!(accepted.load(Ordering::Relaxed), 4, "the upstream's count");
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_clients_split_differently_over_the_workers_open_no_upstream_connection() {
    let (upstream, accepted, holding, phase) = phased_upstream().await;
    let dir = TempDir::new();
    let file = format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 2\n[[upstream]]\nname = \"split\"\nurl = \"http://{upstream}\"\n"
    );
    let gw = gateway(dir.path(), NO_RULES, &file).await;
    let addr = gw.addrs()[0];
    // Each round a new set of eight clients (new ports: the kernel splits
    // them over the two workers' sockets anew), back to back, eight
    // requests at once: a worker given more clients than last round needs
    // the other's idle connections, within far less than a second.
    for round in 1..=8 {
        let mut clients = Vec::new();
        for _ in 0..8 {
            clients.push(connection(addr).await);
        }
        all_at_once(&mut clients, &holding, &phase, round).await;
        // Relaxed: read after the round's exchanges have completed.
        assert_eq!(accepted.load(Ordering::Relaxed), 8, "after round {round}");
    }
    let text = limiter_gateway::metrics_handle().render();
    let opened = "gateway_upstream_connections_opened_total{upstream=\"split\"}";
    assert_eq!(sample(&text, opened), 8.0);
    gw.shutdown().await;
}
