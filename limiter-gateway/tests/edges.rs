//! Malformed heads never reach the upstream: an invalid, repeated or
//! disagreeing `Host` is answered `400` with a problem document; a head
//! with both `Content-Length` and `Transfer-Encoding`, or a repeated
//! `Content-Length`, is answered `400` and its connection closed, also
//! when it follows a good request on the same connection. The upstream
//! records every byte it receives.

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use support::{Rig, raw, sample, status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RULES: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 1000
    burst: 1000
    match: { prefix: \"/\" }
";

/// An upstream that keeps every byte it receives and answers each read
/// with `200 ok` (the tests send it body-less requests one at a time).
struct Recorder {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<u8>>>,
}

impl Recorder {
    async fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&received);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let keep = Arc::clone(&keep);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = s.read(&mut buf).await {
                        keep.lock().unwrap().extend_from_slice(&buf[..n]);
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if s.write_all(ok).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Recorder { addr, received }
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }
}

fn client_errors(metrics: &str, kind: &str) -> f64 {
    sample(
        metrics,
        &format!("gateway_client_errors_total{{kind=\"{kind}\"}}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_host_is_refused_and_never_forwarded() {
    let upstream = Recorder::start().await;
    let rig = Rig::start(RULES, &format!("http://{}", upstream.addr), |_| {}).await;
    let before = rig.admin("/metrics").await;
    let heads: [&[u8]; 20] = [
        b"GET /x HTTP/1.1\r\nHost: [::1\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: exa mple.com\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a@b.example\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: [::1]x\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a/b\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: example.com:99999x\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: example.com:99999\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: example.com:\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: \r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: :80\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: ex\xc3\xa4mple.com\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: ex%zzample.com\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a.example\r\nHost: a.example\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
        b"GET /x HTTP/1.1\r\n\r\n",
        b"GET /x HTTP/1.0\r\nHost: a b\r\n\r\n",
        b"GET http://a.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n",
        b"GET http://a.example:8080/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
        b"GET http://u@a.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
    ];
    for head in heads {
        let response = raw_bytes(rig.addr(), head).await;
        let what = String::from_utf8_lossy(head);
        // The code alone: an HTTP/1.0 request gets an HTTP/1.0 answer.
        assert_eq!(response.get(9..12), Some("400"), "{what}: {response}");
        assert!(
            response.contains("application/problem+json"),
            "{what}: {response}"
        );
    }
    assert_eq!(upstream.received(), "", "nothing reaches the upstream");
    let after = rig.admin("/metrics").await;
    assert_eq!(
        client_errors(&after, "host") - client_errors(&before, "host"),
        heads.len() as f64
    );
    // Valid forms pass: a port, an IPv6 literal, an absolute form whose
    // authority agrees (case and the default port aside).
    for head in [
        "GET /x HTTP/1.1\r\nHost: example.com:8080\r\nConnection: close\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: [::1]:80\r\nConnection: close\r\n\r\n",
        "GET http://A.example/x HTTP/1.1\r\nHost: a.example:80\r\nConnection: close\r\n\r\n",
    ] {
        let response = raw(rig.addr(), head).await;
        assert_eq!(status(&response), "HTTP/1.1 200", "{head}: {response}");
    }
    assert_eq!(
        upstream.received().matches("GET /x HTTP/1.1\r\n").count(),
        3
    );
}

/// [`raw`] for a head that may not be UTF-8 (ending in an empty line),
/// sent with `Connection: close`.
async fn raw_bytes(addr: SocketAddr, head: &[u8]) -> String {
    let head = [&head[..head.len() - 2], b"Connection: close\r\n\r\n"].concat();
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&head).await.unwrap();
    until_closed(&mut s).await
}

/// What the gateway sends until it closes the connection (bounded: a
/// connection left open fails the test).
async fn until_closed(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    support::within("the gateway closes the connection", s.read_to_end(&mut out))
        .await
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_framing_is_refused_and_the_connection_closed() {
    let upstream = Recorder::start().await;
    let rig = Rig::start(RULES, &format!("http://{}", upstream.addr), |_| {}).await;
    let before = rig.admin("/metrics").await;
    // Keep-alive heads: the gateway, not the client, closes.
    let ambiguous = [
        "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: t\r\ntransfer-encoding: gzip, chunked\r\ncontent-length: 0\r\n\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    ];
    for head in ambiguous {
        let mut s = TcpStream::connect(rig.addr()).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let response = until_closed(&mut s).await;
        assert_eq!(status(&response), "HTTP/1.1 400", "{head}: {response}");
        assert!(
            response.contains("application/problem+json"),
            "{head}: {response}"
        );
    }
    // Lengths that disagree or a list: hyper's own 400, closed as well.
    for head in [
        "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello",
    ] {
        let mut s = TcpStream::connect(rig.addr()).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let response = until_closed(&mut s).await;
        assert_eq!(status(&response), "HTTP/1.1 400", "{head}: {response}");
    }
    assert_eq!(upstream.received(), "", "nothing reaches the upstream");
    // Behind a good request on the same connection: the first is served,
    // the second refused, nothing after it read.
    let mut s = TcpStream::connect(rig.addr()).await.unwrap();
    s.write_all(
        b"GET /first HTTP/1.1\r\nHost: t\r\n\r\n\
          POST /second HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n\
          0\r\n\r\nGET /third HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .await
    .unwrap();
    let response = until_closed(&mut s).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert_eq!(response.matches("HTTP/1.1 ").count(), 2, "{response}");
    assert!(response.contains("HTTP/1.1 400"), "{response}");
    let received = upstream.received();
    assert!(
        received.starts_with("GET /first HTTP/1.1\r\n"),
        "{received}"
    );
    assert!(!received.contains("second") && !received.contains("third"));
    let after = rig.admin("/metrics").await;
    assert_eq!(
        client_errors(&after, "framing") - client_errors(&before, "framing"),
        5.0
    );
}
