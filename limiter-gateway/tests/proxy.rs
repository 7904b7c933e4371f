//! Proxying on real sockets: a test upstream, the gateway and a client, on
//! ephemeral loopback ports. Bodies stream intact both ways, hop-by-hop
//! headers stop at the gateway, forwarding headers are appended, and a
//! failing upstream becomes 502 or 504 with a problem document.

mod support;

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use limiter_gateway::echo::{Echo, pattern, pattern_byte};
use support::{ChannelBody, Rig, client, empty, pattern_body, refusing_address, text};
use tokio::sync::{mpsc, oneshot};

const NO_RULES: &str = "rate_limits: {}\n";
const BIG: u64 = 64 * 1024 * 1024;

/// Reads `body` and checks every byte against the pattern; returns the
/// length. Calls `first` once `threshold` bytes have arrived.
async fn check_pattern(
    mut body: Incoming,
    threshold: u64,
    mut first: Option<oneshot::Sender<()>>,
) -> u64 {
    let mut offset = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.expect("body frame");
        if let Ok(data) = frame.into_data() {
            for (i, b) in data.iter().enumerate() {
                let at = offset + i as u64;
                assert_eq!(*b, pattern_byte(at), "byte {at} differs");
            }
            offset += data.len() as u64;
            if offset >= threshold
                && let Some(tx) = first.take()
            {
                let _ = tx.send(());
            }
        }
    }
    offset
}

async fn echo_rig() -> (Echo, Rig) {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(NO_RULES, &echo.url(), |_| {}).await;
    (echo, rig)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_body_with_length_streams_both_ways_intact() {
    let (_echo, rig) = echo_rig().await;
    let request = Request::post(rig.url("/echo"))
        .body(pattern_body(BIG, true))
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // The upstream saw the length, not a re-chunked body.
    assert_eq!(response.headers()["x-req-length"], BIG.to_string());
    assert_eq!(response.headers()["x-req-te"], "none");
    assert_eq!(response.headers()["content-length"], BIG.to_string());
    assert_eq!(
        check_pattern(response.into_body(), u64::MAX, None).await,
        BIG
    );

    // And a generated response of that size with its length.
    let request = Request::get(rig.url(&format!("/gen/{BIG}")))
        .body(empty())
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.headers()["content-length"], BIG.to_string());
    assert_eq!(
        check_pattern(response.into_body(), u64::MAX, None).await,
        BIG
    );
}

/// The chunked request is sent in two parts: the second only after the
/// echo of the first has come back through the gateway. A gateway that
/// buffered either body whole would never deliver that echo, and the test
/// would stop at its bound instead of passing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_chunked_body_streams_both_ways_without_buffering() {
    let (_echo, rig) = echo_rig().await;
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let (first_tx, first_rx) = oneshot::channel();
    const FIRST: u64 = 1024 * 1024;
    let sender = tokio::spawn(async move {
        let frame = 64 * 1024;
        let mut offset = 0u64;
        while offset < FIRST {
            tx.send(pattern(offset, frame)).await.unwrap();
            offset += frame as u64;
        }
        first_rx
            .await
            .expect("the first MiB came back before the rest was sent");
        while offset < BIG {
            tx.send(pattern(offset, frame)).await.unwrap();
            offset += frame as u64;
        }
    });
    let request = Request::post(rig.url("/echo"))
        .body(support::ClientBody::Right(ChannelBody(rx)))
        .unwrap();
    let run = async {
        let response = client().request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["x-req-length"], "none");
        assert_eq!(response.headers()["x-req-te"], "chunked");
        assert!(response.headers().get("content-length").is_none());
        check_pattern(response.into_body(), FIRST, Some(first_tx)).await
    };
    let received = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the echo streamed back while the request was still being sent");
    assert_eq!(received, BIG);
    sender.await.unwrap();

    let request = Request::get(rig.url(&format!("/gen/{BIG}?chunked")))
        .body(empty())
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert!(response.headers().get("content-length").is_none());
    assert_eq!(
        check_pattern(response.into_body(), u64::MAX, None).await,
        BIG
    );
}

#[tokio::test]
async fn hop_by_hop_headers_stop_and_forwarding_headers_are_appended() {
    let (_echo, rig) = echo_rig().await;
    let request = Request::get(rig.url("/headers"))
        .header("connection", "keep-alive, x-secret")
        .header("x-secret", "1")
        .header("keep-alive", "timeout=5")
        .header("te", "trailers")
        .header("proxy-connection", "keep-alive")
        .header("upgrade", "websocket")
        .header("x-end-to-end", "kept")
        .header("x-forwarded-for", "198.51.100.7")
        .header("forwarded", "for=198.51.100.7")
        .body(empty())
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // Response direction: the upstream's hop-by-hop headers are gone.
    assert!(response.headers().get("x-up").is_none());
    assert!(response.headers().get("keep-alive").is_none());
    assert_ne!(
        response.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"x-up"[..])
    );
    assert_eq!(response.headers()["x-end-to-end"], "1");
    let seen = text(response).await;
    let header = |name: &str| -> Vec<&str> {
        seen.lines()
            .filter_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(": ")))
            .collect()
    };
    for gone in [
        "x-secret",
        "keep-alive",
        "te",
        "proxy-connection",
        "upgrade",
    ] {
        assert!(
            header(gone).is_empty(),
            "{gone} reached the upstream:\n{seen}"
        );
    }
    // hyper's client adds its own `connection: keep-alive` at most.
    assert!(
        header("connection").iter().all(|v| *v == "keep-alive"),
        "{seen}"
    );
    assert_eq!(header("x-end-to-end"), ["kept"]);
    assert_eq!(header("x-forwarded-for"), ["198.51.100.7, 127.0.0.1"]);
    assert_eq!(header("x-forwarded-proto"), ["http"]);
    let host = format!("\"{}\"", rig.addr());
    assert_eq!(
        header("forwarded"),
        [format!("for=198.51.100.7, for=127.0.0.1;proto=http;host={host}").as_str()]
    );
    assert_eq!(header("via"), ["1.1 limiter-gateway"]);
    // Host: the client's, unchanged.
    assert_eq!(header("host"), [rig.addr().to_string().as_str()]);
}

async fn problem_of(response: hyper::Response<Incoming>) -> (StatusCode, String) {
    let status = response.status();
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    (status, text(response).await)
}

#[tokio::test]
async fn a_refused_connection_is_502_with_a_problem_document() {
    let (closed, _refusing) = refusing_address();
    let rig = Rig::start(NO_RULES, &format!("http://{closed}"), |_| {}).await;
    let response = client()
        .request(Request::get(rig.url("/x")).body(empty()).unwrap())
        .await
        .unwrap();
    let (status, body) = problem_of(response).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(
        body,
        "{\"type\":\"about:blank\",\"title\":\"Bad Gateway\",\"status\":502,\"detail\":\"upstream default: connection failed\"}"
    );
    let metrics = rig.admin("/metrics").await;
    assert!(
        support::sample(
            &metrics,
            "gateway_upstream_errors_total{upstream=\"default\",kind=\"connect\"}"
        ) >= 1.0,
        "{metrics}"
    );
}

#[tokio::test]
async fn no_response_head_within_the_request_timeout_is_504() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(NO_RULES, &echo.url(), |c| {
        c.timeouts.request = Duration::from_millis(200);
    })
    .await;
    let response = client()
        .request(Request::get(rig.url("/slow")).body(empty()).unwrap())
        .await
        .unwrap();
    let (status, body) = problem_of(response).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
    assert!(body.contains("\"status\":504"), "{body}");
    assert!(body.contains("no response within 200ms"), "{body}");
    // The gateway keeps serving after a timeout.
    let response = client()
        .request(Request::get(rig.url("/hold/0")).body(empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(text(response).await, "held");
}

/// h2c with prior knowledge to the gateway; HTTP/1.1 to the upstream, the
/// client's `:authority` as `Host`.
#[tokio::test]
async fn an_h2c_client_is_served_and_forwarded_over_http1() {
    let (_echo, rig) = echo_rig().await;
    let h2: hyper_util::client::legacy::Client<_, support::ClientBody> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build(hyper_util::client::legacy::connect::HttpConnector::new());
    let response = h2
        .request(Request::get(rig.url("/headers")).body(empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), http::Version::HTTP_2);
    let seen = text(response).await;
    assert!(seen.contains("via: 2 limiter-gateway\n"), "{seen}");
    assert!(seen.contains(&format!("host: {}\n", rig.addr())), "{seen}");
}

/// Two upstreams: the longest prefix wins, the base path is prepended, and
/// `rewrite_host` sends the upstream's authority.
#[tokio::test]
async fn requests_go_to_the_upstream_of_the_longest_prefix() {
    let one = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let two = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let two_url = format!("{}/base", two.url());
    let rig = Rig::start(NO_RULES, &one.url(), |c| {
        c.upstreams.push(limiter_gateway::Upstream {
            name: "two".into(),
            url: two_url.parse().unwrap(),
            prefix: "/two".into(),
            rewrite_host: true,
            pool: Default::default(),
        });
    })
    .await;
    let get = |path: &str| client().request(Request::get(rig.url(path)).body(empty()).unwrap());
    let response = get("/two/x?q=1").await.unwrap();
    assert_eq!(response.headers()["x-path"], "/base/two/x");
    let response = get("/twox").await.unwrap();
    assert_eq!(response.headers()["x-path"], "/twox");
    assert_eq!((one.requests(), two.requests()), (1, 1));
    // rewrite_host: upstream two sees its own authority as Host.
    let seen = text(get("/two/headers").await.unwrap()).await;
    assert_eq!(two.requests(), 2);
    assert!(seen.contains(&format!("host: {}\n", two.addr())), "{seen}");
}

/// An upstream whose accept queue is full (it never accepts): the kernel
/// drops further SYNs, so the connect hangs until the connect timeout: 504.
#[tokio::test]
async fn no_connection_within_the_connect_timeout_is_504() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    // Fill the accept queue (backlog 1 holds up to 2 on Linux).
    let mut fillers = Vec::new();
    for _ in 0..3 {
        if let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            fillers.push(s);
        }
    }
    let rig = Rig::start(NO_RULES, &format!("http://{addr}"), |c| {
        c.timeouts.connect = Duration::from_millis(200);
    })
    .await;
    let response = client()
        .request(Request::get(rig.url("/x")).body(empty()).unwrap())
        .await
        .unwrap();
    let (status, body) = problem_of(response).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert!(body.contains("no connection within 200ms"), "{body}");
    drop((fillers, listener));
}
