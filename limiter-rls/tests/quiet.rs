//! A quiet client is answered at once on every listener. Each round sends
//! a call and takes its answer, then sends two calls back to back, then
//! pauses, over several connections; every answer arrives within
//! `PROMPT` (Envoy's default rate-limit timeout; `STALLS_ALLOWED` aside). Without `TCP_NODELAY`
//! on the server's sockets the second answer of the two waits for the
//! client's delayed acknowledgement (about 40 ms), and Envoy fails open.
//! The clients set `TCP_NODELAY` on their own sockets, so only the
//! server's side is tested.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use limiter_test_support::quiet::{PAUSE, assert_prompt, quiet_rounds};
use support::{Rls, TempDir, temp_dir};

const CONFIG: &str = "domain: test
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
";

/// Connections per listener, each with this many rounds.
const CONNECTIONS: usize = 4;
const ROUNDS: usize = 12;

/// The binary and its runtime root (removed when dropped).
fn start() -> (Rls, TempDir) {
    let root = temp_dir("quiet");
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/a.yaml"), CONFIG).unwrap();
    (Rls::start(&root, 0, &[]), root)
}

fn call() -> RateLimitRequest {
    RateLimitRequest {
        domain: "test".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: "quiet".into(),
            }],
            limit: None,
            hits_addend: None,
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// One connection's rounds of gRPC calls (module doc); every answer's
/// code and the time from its call.
async fn grpc_rounds(addr: SocketAddr) -> Vec<(i32, Duration)> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .tcp_nodelay(true)
        .connect()
        .await
        .unwrap();
    let (mut a, mut b) = (
        RateLimitClient::new(channel.clone()),
        RateLimitClient::new(channel),
    );
    let mut answers = Vec::new();
    for _ in 0..ROUNDS {
        let sent = Instant::now();
        let r = a.should_rate_limit(call()).await.expect("single call");
        answers.push((r.overall_code, sent.elapsed()));
        let sent = Instant::now();
        let (x, y) = tokio::join!(
            async {
                let r = a.should_rate_limit(call()).await.expect("first call");
                (r.overall_code, sent.elapsed())
            },
            async {
                let r = b.should_rate_limit(call()).await.expect("second call");
                (r.overall_code, sent.elapsed())
            },
        );
        answers.extend([x, y]);
        tokio::time::sleep(PAUSE).await;
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_answers_a_quiet_client_at_once() {
    let (rls, _root) = start();
    let runs: Vec<_> = (0..CONNECTIONS)
        .map(|_| tokio::spawn(grpc_rounds(rls.grpc)))
        .collect();
    let mut connections = Vec::new();
    for run in runs {
        let answers = run.await.unwrap();
        assert_eq!(answers.len(), 3 * ROUNDS);
        assert!(answers.iter().all(|(c, _)| *c == Code::Ok as i32));
        connections.push(answers);
    }
    assert_prompt("gRPC", &connections);
}

/// Quiet rounds of `request` to `addr` over [`CONNECTIONS`] connections at
/// once, each answered `200`; each connection's answers.
async fn http_rounds(addr: SocketAddr, request: String) -> Vec<Vec<(u16, Duration)>> {
    let runs: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let request = request.clone();
            tokio::task::spawn_blocking(move || quiet_rounds(addr, request.as_bytes(), ROUNDS))
        })
        .collect();
    let mut connections = Vec::new();
    for run in runs {
        let answers = run.await.unwrap();
        assert_eq!(answers.len(), 3 * ROUNDS);
        assert!(answers.iter().all(|(s, _)| *s == 200), "{answers:?}");
        connections.push(answers);
    }
    connections
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_json_answers_a_quiet_client_at_once() {
    let (rls, _root) = start();
    let body = r#"{"domain":"test","descriptors":[{"entries":[{"key":"user","value":"quiet"}]}]}"#;
    let request = format!(
        "POST /json HTTP/1.1\r\nHost: rls\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answers = http_rounds(rls.http, request).await;
    assert_prompt("/json", &answers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_answers_a_quiet_client_at_once() {
    let (rls, _root) = start();
    let request = "GET /healthcheck HTTP/1.1\r\nHost: rls\r\n\r\n".to_owned();
    let answers = http_rounds(rls.debug, request).await;
    assert_prompt("debug", &answers);
}
