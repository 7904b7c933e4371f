//! WebSocket through the gateway on real sockets: a tokio-tungstenite echo
//! upstream, the gateway with a rule on `/ws`, and tokio-tungstenite
//! clients. Frames go both ways (the upstream speaks first), the tunnel
//! outlives the request timeout, and the limit applies to the upgrade
//! request: past the burst the handshake gets `429`.

use crate::peers;
use crate::support;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use peers::gateway;
use support::TempDir;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::{Error, Message};

/// A WebSocket upstream: greets, then echoes every text and binary frame.
async fn ws_echo() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                if ws.send(Message::text("welcome")).await.is_err() {
                    return;
                }
                while let Some(Ok(message)) = ws.next().await {
                    if (message.is_text() || message.is_binary()) && ws.send(message).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

const RULES: &str = "
rate_limits:
  sockets:
    algorithm: token_bucket
    rate: 1/h
    burst: 2
    match: { prefix: \"/ws\" }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_both_ways_past_the_request_timeout_and_limited_at_upgrade() {
    let upstream = ws_echo().await;
    let dir = TempDir::new();
    let file = format!(
        "listen = [\"127.0.0.1:0\"]\n[timeouts]\nrequest = \"200ms\"\n[[upstream]]\nname = \"ws\"\nurl = \"http://{upstream}\"\n"
    );
    let gw = gateway(dir.path(), RULES, &file).await;
    let addr = gw.addrs()[0];
    let url = format!("ws://{addr}/ws/chat");

    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut ws, response) = tokio_tungstenite::client_async(&url, tcp)
        .await
        .expect("upgrade through the gateway");
    assert_eq!(response.status(), 101);
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("welcome"));
    ws.send(Message::text("hello")).await.unwrap();
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("hello"));
    // Longer than the request timeout: the tunnel is not cut.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let big = vec![7u8; 200_000];
    ws.send(Message::binary(big.clone())).await.unwrap();
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::binary(big));

    // The second upgrade is within the burst of 2; the third is limited.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut second, _) = tokio_tungstenite::client_async(&url, tcp).await.unwrap();
    assert_eq!(
        second.next().await.unwrap().unwrap(),
        Message::text("welcome")
    );
    let tcp = TcpStream::connect(addr).await.unwrap();
    match tokio_tungstenite::client_async(&url, tcp).await {
        Err(Error::Http(response)) => {
            assert_eq!(response.status(), 429);
            assert!(response.headers().contains_key("retry-after"));
        }
        other => panic!("expected 429, got {other:?}"),
    }
    // The open tunnels are not affected by the rejection.
    ws.send(Message::text("still here")).await.unwrap();
    assert_eq!(
        ws.next().await.unwrap().unwrap(),
        Message::text("still here")
    );
    ws.close(None).await.unwrap();
    drop(second);
    gw.shutdown().await;
}
