//! An axum server limited per client address: 5 requests per second with a
//! burst of 10, a request over the burst held up to 500 ms for its slot
//! (nginx's `limit_req rate=5r/s burst=11 delay=9`: 10 at once, 2 more
//! held, the rest refused), `/health` unlimited.
//!
//! ```text
//! cargo run --release -p limiter-tower --example axum_server
//! # then, in another shell:
//! seq 20 | xargs -P 20 -I{} curl -s -o /dev/null -w '%{http_code} ' localhost:3000/; echo
//! # 200 ×12 (2 of them held 200 and 400 ms), 429 ×8
//! curl -i localhost:3000/
//! ```
//!
//! Set `ADDR` to listen elsewhere (default `127.0.0.1:3000`).

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use limiter_core::Quota;
use limiter_keyed::KeyedLimiter;
use limiter_tower::{Mode, PeerIp, RateLimitLayer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let per_ip = KeyedLimiter::new(Quota::per_second(5)?.with_burst(10)?);
    let limit = RateLimitLayer::builder(per_ip, PeerIp::new())
        .name("per-ip")
        .mode(Mode::Delay {
            max_delay: Duration::from_millis(500),
        })
        .bypass(|head| head.uri().path() == "/health")
        .build()?;
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/health", get(|| async { "ok\n" }))
        .layer(limit);

    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // The peer address is what `PeerIp` keys on: serve with connect info.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
