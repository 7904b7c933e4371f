//! The gateway on the open internet, through real sockets: every spelling
//! of a path is decided by the rule its normal form names and forwarded in
//! that form; heads without `Host` or over the field limit are refused;
//! an HTTP/1.0 upstream's status line does not leak; a client's broken body
//! is the client's error; silent, half-sent, quiet-h2c and idle connections
//! are closed; the per-client cap holds. Deadlines are configured short
//! (hundreds of ms); tests wait for outcomes, bounded, never for a time.

mod support;

use std::time::Duration;

use limiter_gateway::PathMode;
use limiter_gateway::echo::Echo;
use support::{Rig, header, raw, rule, sample, status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RULES: &str = "\
rate_limits:
  pay:
    algorithm: token_bucket
    rate: 1000
    burst: 1000
    match: { prefix: \"/pay\" }
  free:
    algorithm: token_bucket
    rate: 1000
    burst: 1000
    match: { prefix: \"/free\" }
  admin:
    algorithm: token_bucket
    rate: 1000
    burst: 1000
    match: { prefix: \"/admin\" }
";

fn get(target: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_is_decided_by_the_rule_of_its_normal_form() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    // (request target, rule that decides it, path the upstream gets)
    let table: &[(&str, Option<&str>, &str)] = &[
        ("/pay/x", Some("pay"), "/pay/x"),
        ("//pay/x", Some("pay"), "/pay/x"),
        ("/free/../pay/x", Some("pay"), "/pay/x"),
        ("/%70ay/x", Some("pay"), "/pay/x"),
        ("/./pay/x", Some("pay"), "/pay/x"),
        ("/free/%2e%2e/pay/x", Some("pay"), "/pay/x"),
        ("/free/%2E%2e/pay/x", Some("pay"), "/pay/x"),
        ("/%2e%2e/%2e%2e/pay/x", Some("pay"), "/pay/x"),
        // An encoded slash is a separator, for matching and forwarding.
        ("/free%2F..%2Fpay/x", Some("pay"), "/pay/x"),
        ("/free%2fpay", Some("free"), "/free/pay"),
        // Parameters: ignored for matching, forwarded.
        ("/pay;jsessionid=1/x", Some("pay"), "/pay;jsessionid=1/x"),
        ("/free/..;/admin/x", Some("admin"), "/free/..;/admin/x"),
        ("/pay/x/.", Some("pay"), "/pay/x/"),
        ("/pay/x/%2E", Some("pay"), "/pay/x/"),
        // Upper or lower hex, one byte: the same path.
        ("/%7Efree", None, "/~free"),
        ("/%7efree", None, "/~free"),
        ("/pay%3bx", None, "/pay%3Bx"),
        ("/pay%3Bx", None, "/pay%3Bx"),
        ("/payx", None, "/payx"),
        // Absolute form: the authority is not the path.
        ("http://t//free/../pay/x?q=1", Some("pay"), "/pay/x"),
    ];
    for &(target, want_rule, want_path) in table {
        let response = raw(rig.addr(), &get(target)).await;
        assert_eq!(status(&response), "HTTP/1.1 200", "{target}: {response}");
        assert_eq!(rule(&response), want_rule, "{target}: {response}");
        assert_eq!(header(&response, "x-path"), Some(want_path), "{target}");
    }
    let response = raw(rig.addr(), &get("/pay/%zz")).await;
    assert_eq!(status(&response), "HTTP/1.1 400", "{response}");
    assert!(response.contains("application/problem+json"), "{response}");
    assert_eq!(echo.requests() as usize, table.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reject_mode_refuses_what_rewrite_would_change() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |c| c.paths = PathMode::Reject).await;
    for target in [
        "//pay/x",
        "/free/../pay/x",
        "/%70ay/x",
        "/./pay/x",
        "/pay%2fx",
    ] {
        let response = raw(rig.addr(), &get(target)).await;
        assert_eq!(status(&response), "HTTP/1.1 400", "{target}: {response}");
    }
    for target in ["/pay/x", "/pay;v=1/x"] {
        let response = raw(rig.addr(), &get(target)).await;
        assert_eq!(status(&response), "HTTP/1.1 200", "{target}: {response}");
        assert_eq!(rule(&response), Some("pay"));
    }
    assert_eq!(echo.requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_are_checked_and_the_gateway_speaks_its_own_version() {
    // An HTTP/1.0 upstream, raw.
    let old = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let old_addr = old.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = old.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
            });
        }
    });
    let rig = Rig::start(RULES, &format!("http://{old_addr}"), |_| {}).await;
    let response = raw(rig.addr(), &get("/x")).await;
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.ends_with("ok"), "{response}");

    let before = rig.admin("/metrics").await;
    let count = |m: &str, kind: &str| {
        sample(
            m,
            &format!("gateway_client_errors_total{{kind=\"{kind}\"}}"),
        )
    };
    // HTTP/1.1 without Host, or with two: 400. HTTP/1.0 without: fine.
    let response = raw(rig.addr(), "GET /x HTTP/1.1\r\nConnection: close\r\n\r\n").await;
    assert_eq!(status(&response), "HTTP/1.1 400", "{response}");
    let response = raw(
        rig.addr(),
        "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status(&response), "HTTP/1.1 400", "{response}");
    let response = raw(rig.addr(), "GET /x HTTP/1.0\r\n\r\n").await;
    assert_eq!(response.get(9..12), Some("200"), "{response}");
    // A field over 8 KiB: 431; a target over 8 KiB: 414.
    let big = "v".repeat(9000);
    let response = raw(
        rig.addr(),
        &format!("GET /x HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status(&response), "HTTP/1.1 431", "{response}");
    let response = raw(rig.addr(), &get(&format!("/{big}"))).await;
    assert_eq!(status(&response), "HTTP/1.1 414", "{response}");
    let after = rig.admin("/metrics").await;
    assert_eq!(count(&after, "host") - count(&before, "host"), 2.0);
    assert_eq!(
        count(&after, "header_too_large") - count(&before, "header_too_large"),
        1.0
    );
    assert_eq!(
        count(&after, "target_too_long") - count(&before, "target_too_long"),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_in_use_is_named() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    let rules = limiter_config::RuleSet::load(&rig.file).unwrap();
    let config = limiter_gateway::GatewayConfig::single(rig.addr(), echo.url().parse().unwrap());
    let error = limiter_gateway::Gateway::new(config, rules)
        .start()
        .await
        .expect_err("the address is taken");
    assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
    assert!(
        error.to_string().starts_with(&format!("{}: ", rig.addr())),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_client_body_is_a_client_error_not_an_upstream_one() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    let upstream_errors = |m: &str| {
        ["connect", "timeout", "protocol"]
            .iter()
            .map(|k| {
                sample(
                    m,
                    &format!("gateway_upstream_errors_total{{upstream=\"default\",kind=\"{k}\"}}"),
                )
            })
            .sum::<f64>()
    };
    let client = |m: &str, kind: &str| {
        sample(
            m,
            &format!("gateway_client_errors_total{{kind=\"{kind}\"}}"),
        )
    };
    let before = rig.admin("/metrics").await;
    // An invalid chunk size: 400 (or a closed connection), never a 502.
    // The echo upstream streams the body back as it arrives, so its head
    // may be forwarded before the gateway reads the bad chunk: then the
    // response is cut short (no last chunk), never completed.
    let response = raw(
        rig.addr(),
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
    )
    .await;
    let cut_short = status(&response) == "HTTP/1.1 200" && !response.ends_with("0\r\n\r\n");
    assert!(
        response.is_empty() || status(&response) == "HTTP/1.1 400" || cut_short,
        "{response}"
    );
    // An upload cut short: the client goes away mid-body.
    let mut s = TcpStream::connect(rig.addr()).await.unwrap();
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\npartial")
        .await
        .unwrap();
    // Wait until the upstream has the request (the body is streaming).
    for _ in 0..2000 {
        if echo.requests() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(s);
    let mut after = String::new();
    for _ in 0..2000 {
        after = rig.admin("/metrics").await;
        if client(&after, "body_aborted") > client(&before, "body_aborted") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        client(&after, "body_malformed") - client(&before, "body_malformed"),
        1.0,
        "{after}"
    );
    assert_eq!(
        client(&after, "body_aborted") - client(&before, "body_aborted"),
        1.0,
        "{after}"
    );
    assert_eq!(upstream_errors(&after), upstream_errors(&before), "{after}");
}

/// Reads until the gateway closes (bounded); the bytes it sent.
/// A keep-alive connection that has had one GET answered.
async fn served_once(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before an answer: {head:?}");
        head.extend_from_slice(&buf[..n]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
    s
}

async fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .expect("the gateway closes the connection")
        .ok();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_send_nothing_or_too_little_are_closed() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |c| {
        c.connections.head_timeout = Duration::from_millis(200);
        c.connections.idle_timeout = Duration::from_millis(300);
    })
    .await;
    let before = rig.admin("/metrics").await;
    // Silent: closed without an answer.
    let mut silent = TcpStream::connect(rig.addr()).await.unwrap();
    assert_eq!(until_closed(&mut silent).await, b"");
    // Half a head: 408.
    let mut half = TcpStream::connect(rig.addr()).await.unwrap();
    half.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n")
        .await
        .unwrap();
    let answer = String::from_utf8(until_closed(&mut half).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // The h2c preface and an empty SETTINGS frame, then quiet: closed.
    let mut h2 = TcpStream::connect(rig.addr()).await.unwrap();
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    until_closed(&mut h2).await;
    // Idle after a request: served, then closed.
    let mut idle = TcpStream::connect(rig.addr()).await.unwrap();
    idle.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let answer = String::from_utf8(until_closed(&mut idle).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let after = rig.admin("/metrics").await;
    let timed_out = |m: &str, phase: &str| {
        sample(
            m,
            &format!("gateway_connections_timed_out_total{{phase=\"{phase}\"}}"),
        )
    };
    assert_eq!(timed_out(&after, "head") - timed_out(&before, "head"), 3.0);
    assert_eq!(timed_out(&after, "idle") - timed_out(&before, "idle"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_at_its_connection_cap_is_refused_and_others_are_not() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |c| {
        c.connections.max_per_client = 2;
    })
    .await;
    // Each served once, so the gateway holds both before the third
    // arrives (a connect alone may still wait in another worker's queue).
    let _a = served_once(rig.addr()).await;
    let _b = served_once(rig.addr()).await;
    // The third from the same address is closed at once.
    let mut third = TcpStream::connect(rig.addr()).await.unwrap();
    assert_eq!(until_closed(&mut third).await, b"");
    drop(_a);
    // A slot is free again: served (the drop reaches the gateway first).
    let mut served = false;
    for _ in 0..200 {
        let response = raw(rig.addr(), &get("/x")).await;
        if status(&response) == "HTTP/1.1 200" {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(served);
    let metrics = rig.admin("/metrics").await;
    assert!(
        sample(
            &metrics,
            "gateway_connections_refused_total{reason=\"per_client\"}"
        ) >= 1.0,
        "{metrics}"
    );
}
