//! Connection limits on real sockets, each with a gateway of its own: an
//! HTTP/2 connection closed when it idles after a request, one whose
//! client never answers the keep-alive pings, a listener at its
//! `max_per_listener` cap (newcomers wait in the backlog, the admin
//! listener answers, a freed slot serves the waiting one) and the header
//! count limit (`431`). Deadlines are configured short; the tests wait for
//! outcomes, bounded, never for a time (except the one check that a
//! waiting connection got no answer, which can only fail if the cap does
//! not hold).

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use limiter_gateway::echo::Echo;
use support::Rig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const RULES: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 1000
    burst: 1000
    match: { prefix: \"/\" }
";

/// Reads until the gateway closes the connection (bounded).
async fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .expect("the gateway closes the connection")
        .ok();
    out
}

fn status(response: &str) -> &str {
    response.get(..12).unwrap_or(response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_connection_idle_after_a_request_is_closed() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |c| {
        c.connections.head_timeout = Duration::from_millis(300);
        c.connections.idle_timeout = Duration::from_millis(300);
        // No ping within the test: the idle deadline alone closes it.
        c.connections.h2_ping_interval = Duration::from_secs(600);
    })
    .await;
    let stream = TcpStream::connect(rig.addr()).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake::<_, _, Empty<Bytes>>(
        TokioExecutor::new(),
        TokioIo::new(stream),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(conn);
    let response = send
        .send_request(
            Request::get(format!("http://{}/x", rig.addr()))
                .body(Empty::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap();
    // Served; now quiet: the gateway ends the connection.
    tokio::time::timeout(Duration::from_secs(20), conn)
        .await
        .expect("the idle h2 connection is closed")
        .unwrap()
        .ok();
    assert_eq!(echo.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_client_that_never_answers_pings_is_closed() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |c| {
        // Head and idle deadlines far away: only the ping timeout can
        // close the connection within the test.
        c.connections.head_timeout = Duration::from_secs(600);
        c.connections.idle_timeout = Duration::from_secs(600);
        c.connections.h2_ping_interval = Duration::from_millis(100);
        c.connections.h2_ping_timeout = Duration::from_millis(200);
    })
    .await;
    let mut s = TcpStream::connect(rig.addr()).await.unwrap();
    // The preface and an empty SETTINGS frame; then nothing, not even the
    // PING acknowledgements.
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let bytes = until_closed(&mut s).await;
    // The frames the gateway sent: a PING (type 6) without the ACK flag.
    let mut frames = Vec::new();
    let mut rest = bytes.as_slice();
    while rest.len() >= 9 {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        frames.push((rest[3], rest[4]));
        rest = &rest[(9 + len).min(rest.len())..];
    }
    assert!(
        frames
            .iter()
            .any(|&(kind, flags)| kind == 6 && flags & 1 == 0),
        "no PING among {frames:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_at_its_cap_holds_newcomers_while_the_admin_listener_answers() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |c| {
        c.connections.max_per_listener = 2;
        c.connections.max_per_client = 0;
    })
    .await;
    // Two kept-alive connections, each served once, fill the listener.
    // (Served first: with one socket per worker the kernel does not accept
    // in connect order, so two silent connections might not be the two
    // that hold the slots.)
    let mut a = TcpStream::connect(rig.addr()).await.unwrap();
    let mut b = TcpStream::connect(rig.addr()).await.unwrap();
    for (s, served) in [(&mut a, 1), (&mut b, 2)] {
        s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while echo.requests() < served {
            assert!(std::time::Instant::now() < deadline, "not served");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // A third connects (the kernel's backlog) and sends a whole request.
    let mut third = TcpStream::connect(rig.addr()).await.unwrap();
    third
        .write_all(b"GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    // Saturated: the admin listener answers.
    for _ in 0..3 {
        assert_eq!(rig.admin("/healthz").await, "ok\n");
    }
    // The third is not served while the two hold the listener.
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut byte)).await;
    assert!(early.is_err(), "answered beyond the cap: {early:?}");
    assert_eq!(echo.requests(), 2);
    // One slot frees: the waiting connection is accepted and served.
    drop(a);
    let answer = String::from_utf8(until_closed(&mut third).await).unwrap();
    assert_eq!(status(&answer), "HTTP/1.1 200", "{answer}");
    assert_eq!(echo.requests(), 3);
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_header_fields_than_max_headers_is_431() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |c| {
        c.connections.max_headers = 6;
    })
    .await;
    let request = |extra: usize| {
        let mut head = String::from("GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
        for i in 0..extra {
            head.push_str(&format!("X-F{i}: v\r\n"));
        }
        head.push_str("\r\n");
        head
    };
    let addr = rig.addr();
    let send = |head: String| async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&until_closed(&mut s).await).into_owned()
    };
    // 6 fields (Host, Connection and 4 more): served.
    let ok = send(request(4)).await;
    assert_eq!(status(&ok), "HTTP/1.1 200", "{ok}");
    // 7 fields: 431, and the upstream never sees it.
    let refused = send(request(5)).await;
    assert_eq!(status(&refused), "HTTP/1.1 431", "{refused}");
    assert_eq!(echo.requests(), 1);
}
