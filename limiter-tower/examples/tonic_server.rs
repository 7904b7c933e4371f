//! A tonic gRPC server behind `RateLimitLayer`: the standard health
//! service (`grpc.health.v1.Health`), two calls a second. The example
//! serves on 127.0.0.1:50051 and calls itself three times at once: two
//! answers, then `RESOURCE_EXHAUSTED` with the wait as
//! `google.rpc.RetryInfo` and the rate-limit headers as metadata.
//!
//! Run it with
//! `cargo run -p limiter-tower --features tonic --example tonic_server`;
//! add `serve` to keep serving, then try
//! `grpcurl -plaintext 127.0.0.1:50051 grpc.health.v1.Health/Check`.

use std::time::Duration;

use limiter_core::{Quota, RateLimiter};
use limiter_tower::{Global, RateLimitLayer};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = RateLimiter::new(Quota::per_second(2)?.with_burst(2)?);
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            // gRPC calls get gRPC's answers; other requests the usual 429.
            .layer(RateLimitLayer::new(limiter, Global))
            .add_service(health)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );

    let channel = tonic::transport::Channel::from_static("http://127.0.0.1:50051")
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    for _ in 0..3 {
        match client.check(HealthCheckRequest::default()).await {
            Ok(answer) => println!("served: {:?}", answer.into_inner().status()),
            Err(status) => {
                let wait = status.get_details_retry_info().and_then(|r| r.retry_delay);
                println!(
                    "refused: {:?} {:?}, retry in {wait:?}, ratelimit {:?}",
                    status.code(),
                    status.message(),
                    status.metadata().get("ratelimit"),
                );
            }
        }
    }
    if std::env::args().any(|a| a == "serve") {
        server.await??;
    } else {
        tokio::time::sleep(Duration::ZERO).await;
    }
    Ok(())
}
