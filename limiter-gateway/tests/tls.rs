//! TLS termination and TLS/h2 upstreams on real sockets, with a CA the test
//! makes: ALPN `h2` and `http/1.1` on the listener, `X-Forwarded-Proto:
//! https`, the certificate reloaded when its files change (a bad pair
//! keeps the one in force) and, without watching, only on `SIGHUP`, a
//! silent client cut at the handshake timeout, a second gateway as the
//! upstream over h2c, TLS with h2, and TLS with HTTP/1.1 (its `Via` names
//! the version it received), and `protocol = "auto"` framing each request
//! for the protocol the upstream picked (no `Host` over h2).

use crate::peers;
use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use limiter_config::RuleSet;
use limiter_gateway::Running;
use limiter_gateway::echo::Echo;
use limiter_reload::Reloader;
use peers::{NO_RULES, TestCa, der, gateway, presented, reporting_tls_upstream};
use rustls::pki_types::ServerName;
use support::TempDir;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

async fn tls_connect(
    ca: &TestCa,
    addr: std::net::SocketAddr,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    ca.client(alpn)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake")
}

/// GET `path` over `tls` with HTTP/1.1 or h2 by its ALPN; (version, body).
async fn get(tls: tokio_rustls::client::TlsStream<TcpStream>, path: &str) -> (Version, String) {
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let request = Request::get(format!("https://localhost{path}"))
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = if h2 {
        let (mut send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        let mut request = request;
        request.headers_mut().remove("host");
        send.send_request(request).await.unwrap()
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut request = request;
        *request.uri_mut() = path.parse().unwrap();
        send.send_request(request).await.unwrap()
    };
    let version = response.version();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (version, String::from_utf8(body.to_vec()).unwrap())
}

fn tls_gateway_file(upstream: &str, extra: &str) -> String {
    format!(
        "admin = \"127.0.0.1:0\"\n[tls]\nlisten = [\"127.0.0.1:0\"]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n{extra}\n[[upstream]]\nurl = \"{upstream}\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpn_h2_and_http11_and_forwarded_proto() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let ca = TestCa::new("alpn CA");
    let (cert, key) = ca.leaf("gateway");
    dir.write("cert.pem", &cert);
    dir.write("key.pem", &key);
    let gw = gateway(dir.path(), NO_RULES, &tls_gateway_file(&echo.url(), "")).await;
    let addr = gw.tls_addrs()[0];

    let tls = tls_connect(&ca, addr, &[b"h2", b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (version, body) = get(tls, "/headers").await;
    assert_eq!(version, Version::HTTP_2);
    assert!(body.contains("x-forwarded-proto: https"), "{body}");
    assert!(body.contains("proto=https"), "{body}");
    assert!(body.contains("via: 2 limiter-gateway"), "{body}");

    let tls = tls_connect(&ca, addr, &[b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (version, body) = get(tls, "/headers").await;
    assert_eq!(version, Version::HTTP_11);
    assert!(body.contains("via: 1.1 limiter-gateway"), "{body}");

    // A client of another CA is refused at the handshake.
    let other = TestCa::new("other CA");
    let tcp = TcpStream::connect(addr).await.unwrap();
    assert!(
        other
            .client(&[b"http/1.1"])
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .is_err()
    );
    gw.shutdown().await;
}

/// `gw` with its files reloaded by [`limiter_gateway::watch`], as the
/// binary does (on file changes only when `watch_files`: `--no-watch`).
fn watched(dir: &TempDir, gw: Running, watch_files: bool) -> (Arc<Running>, Reloader) {
    let rules = RuleSet::load(dir.path().join("rules.yaml")).unwrap();
    let gw = Arc::new(gw);
    let reloader = limiter_gateway::watch(&rules, None, &gw, watch_files).unwrap();
    (gw, reloader)
}

/// Stops watching, then shuts `gw` down.
async fn shut(gw: Arc<Running>, reloader: Reloader) {
    drop(reloader);
    Arc::into_inner(gw).unwrap().shutdown().await;
}

/// A new pair, written as a deploy tool does: new files renamed over.
fn replace_pair(dir: &TempDir, cert: &str, key: &str) {
    dir.write("key.pem.new", key);
    dir.write("cert.pem.new", cert);
    std::fs::rename(dir.path().join("key.pem.new"), dir.path().join("key.pem")).unwrap();
    std::fs::rename(dir.path().join("cert.pem.new"), dir.path().join("cert.pem")).unwrap();
}

/// Handshakes until `addr` presents `cert` (bounded: 20 s).
async fn until_presented(ca: &TestCa, addr: std::net::SocketAddr, cert: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while presented(&tls_connect(ca, addr, &[b"http/1.1"]).await) != der(cert) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_reloads_on_change_and_a_bad_pair_keeps_the_old() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let ca = TestCa::new("reload CA");
    let (first, key) = ca.leaf("first");
    dir.write("cert.pem", &first);
    dir.write("key.pem", &key);
    let gw = gateway(dir.path(), NO_RULES, &tls_gateway_file(&echo.url(), "")).await;
    let (gw, reloader) = watched(&dir, gw, true);
    let addr = gw.tls_addrs()[0];
    assert_eq!(
        presented(&tls_connect(&ca, addr, &[b"http/1.1"]).await),
        der(&first)
    );

    let (second, key2) = ca.leaf("second");
    replace_pair(&dir, &second, &key2);
    until_presented(&ca, addr, &second).await;

    // A key that does not match the certificate: refused, the second stays.
    let (_, other_key) = ca.leaf("unrelated");
    dir.write("key.pem", &other_key);
    let error = gw.reload_tls().unwrap_err();
    assert!(error.contains("key.pem"), "{error}");
    assert_eq!(
        presented(&tls_connect(&ca, addr, &[b"http/1.1"]).await),
        der(&second)
    );
    // Garbage: the same.
    dir.write("cert.pem", "not a certificate");
    assert!(gw.reload_tls().is_err());
    let (_, body) = get(tls_connect(&ca, addr, &[b"http/1.1"]).await, "/headers").await;
    assert!(body.contains("x-forwarded-proto: https"));
    shut(gw, reloader).await;
}

/// `--no-watch`: a replaced pair is not picked up by itself (checked well
/// after a watched reload would have served it: docs/gateway.md gives the
/// reload time), and `SIGHUP` puts it in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_watching_a_replaced_certificate_waits_for_sighup() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let ca = TestCa::new("no-watch CA");
    let (first, key) = ca.leaf("first");
    dir.write("cert.pem", &first);
    dir.write("key.pem", &key);
    let gw = gateway(dir.path(), NO_RULES, &tls_gateway_file(&echo.url(), "")).await;
    let (gw, reloader) = watched(&dir, gw, false);
    let addr = gw.tls_addrs()[0];
    let (second, key2) = ca.leaf("second");
    replace_pair(&dir, &second, &key2);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        presented(&tls_connect(&ca, addr, &[b"http/1.1"]).await),
        der(&first),
        "reloaded without a watch"
    );
    // The reloader's handler is installed: SIGHUP to this process reloads
    // (other tests' reloaders only compare their unchanged files).
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    until_presented(&ca, addr, &second).await;
    assert_eq!(reloader.reloads(), 1);
    shut(gw, reloader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_is_cut_at_the_handshake_timeout() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let ca = TestCa::new("silent CA");
    let (cert, key) = ca.leaf("gateway");
    dir.write("cert.pem", &cert);
    dir.write("key.pem", &key);
    let file = tls_gateway_file(&echo.url(), "handshake_timeout = \"200ms\"");
    let file = file.replace("key = \"key.pem\"\n\n", "key = \"key.pem\"\n");
    let gw = gateway(dir.path(), NO_RULES, &file).await;
    let mut tcp = TcpStream::connect(gw.tls_addrs()[0]).await.unwrap();
    let mut buf = [0u8; 16];
    // The gateway closes it; without the timeout this read would wait for ever.
    let read = tokio::time::timeout(Duration::from_secs(30), tcp.read(&mut buf))
        .await
        .expect("the gateway closed the silent connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    gw.shutdown().await;
}

/// Gateway A (plain) → gateway B (the upstream, TLS or plain) → echo. B's
/// `Via` entry names the HTTP version A spoke to it.
async fn via_through(upstream_scheme: &str, protocol: &str) -> String {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let ca = TestCa::new("upstream CA");
    let (cert, key) = ca.leaf("upstream");
    dir.write("cert.pem", &cert);
    dir.write("key.pem", &key);
    let ca_file = dir.write("ca.pem", &ca.pem);
    let b_file = format!(
        "listen = [\"127.0.0.1:0\"]\n{}",
        tls_gateway_file(&echo.url(), "")
    );
    let b_dir = TempDir::new();
    std::fs::copy(dir.path().join("cert.pem"), b_dir.path().join("cert.pem")).unwrap();
    std::fs::copy(dir.path().join("key.pem"), b_dir.path().join("key.pem")).unwrap();
    let b = gateway(b_dir.path(), NO_RULES, &b_file).await;
    let target = match upstream_scheme {
        "https" => format!("https://localhost:{}", b.tls_addrs()[0].port()),
        _ => format!("http://{}", b.addrs()[0]),
    };
    let a_file = format!(
        "listen = [\"127.0.0.1:0\"]\n[[upstream]]\nname = \"via-{upstream_scheme}-{protocol}\"\nurl = \"{target}\"\nprotocol = \"{protocol}\"\nca = \"{}\"\n",
        ca_file.display()
    );
    let a = gateway(dir.path(), NO_RULES, &a_file).await;
    let response = support::client()
        .request(
            Request::get(format!("http://{}/headers", a.addrs()[0]))
                .body(support::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = support::text(response).await;
    a.shutdown().await;
    b.shutdown().await;
    body.lines()
        .find_map(|l| l.strip_prefix("via: "))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_over_h2c_tls_h2_and_tls_http1() {
    assert_eq!(
        via_through("http", "h2").await,
        "1.1 limiter-gateway, 2 limiter-gateway"
    );
    assert_eq!(
        via_through("https", "h2").await,
        "1.1 limiter-gateway, 2 limiter-gateway"
    );
    assert_eq!(
        via_through("https", "auto").await,
        "1.1 limiter-gateway, 2 limiter-gateway"
    );
    assert_eq!(
        via_through("https", "http1").await,
        "1.1 limiter-gateway, 1.1 limiter-gateway"
    );
    assert_eq!(
        via_through("http", "http1").await,
        "1.1 limiter-gateway, 1.1 limiter-gateway"
    );
}

/// `protocol = "auto"` against an upstream that picks h2 and one that
/// speaks HTTP/1.1 only: over h2 no `Host` goes beside `:authority` (the
/// URL's), over HTTP/1.1 the client's `Host` goes as it came; the first
/// request (before any connection was pooled) is framed right too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_frames_each_request_for_the_protocol_the_upstream_picked() {
    let dir = TempDir::new();
    let ca = TestCa::new("auto CA");
    let (cert, key) = ca.leaf("upstream");
    let ca_file = dir.write("ca.pem", &ca.pem);
    let alpns: [&[&[u8]]; 2] = [&[b"h2", b"http/1.1"], &[b"http/1.1"]];
    for alpn in alpns {
        let upstream = reporting_tls_upstream(&cert, &key, alpn).await;
        let authority = format!("localhost:{}", upstream.port());
        let file = format!(
            "listen = [\"127.0.0.1:0\"]\n[[upstream]]\nurl = \"https://{authority}\"\nprotocol = \"auto\"\nca = \"{}\"\n",
            ca_file.display()
        );
        let gw = gateway(dir.path(), NO_RULES, &file).await;
        let expected = if alpn.len() == 2 {
            format!("HTTP/2.0 authority={authority} host=-")
        } else {
            "HTTP/1.1 authority=- host=client.example".to_owned()
        };
        for _ in 0..3 {
            let response = support::client()
                .request(
                    Request::get(format!("http://{}/x", gw.addrs()[0]))
                        .header("host", "client.example")
                        .body(support::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            assert_eq!(support::text(response).await, expected);
        }
        gw.shutdown().await;
    }
}
