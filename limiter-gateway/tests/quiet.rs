//! A quiet client is answered at once by the admin listener and the proxy
//! listener. Each round sends a request and takes its answer, then sends
//! two requests in one write, then pauses, over several connections; every
//! answer arrives within `PROMPT` (`STALLS_ALLOWED` aside). Without `TCP_NODELAY` on the gateway's
//! sockets the second answer of the two waits for the client's delayed
//! acknowledgement (about 40 ms). The client sets `TCP_NODELAY` on its own
//! socket, so only the gateway's side is tested.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use limiter_gateway::echo::Echo;
use limiter_test_support::quiet::{assert_prompt, quiet_rounds};
use support::Rig;

const RULES: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 1000000
    burst: 1000000
    match: { prefix: \"/\" }
";

/// Connections per listener, each with this many rounds.
const CONNECTIONS: usize = 4;
const ROUNDS: usize = 12;

/// Quiet rounds of `GET path` to `addr` over [`CONNECTIONS`] connections
/// at once, each answered `200`; each connection's answers.
async fn answers(addr: SocketAddr, path: &str) -> Vec<Vec<(u16, Duration)>> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: gateway\r\n\r\n");
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
async fn the_admin_listener_answers_a_quiet_client_at_once() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    let admin = rig.running.admin_addr().unwrap();
    let all = answers(admin, "/healthz").await;
    assert_prompt("admin", &all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_listener_answers_a_quiet_client_at_once() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    let all = answers(rig.addr(), "/x").await;
    assert_prompt("proxied", &all);
}
