//! Client side: limiting the calls to a dependency, each wrapped in
//! `limiter.acquire().await`, its permit finished with the call's latency so
//! the estimator learns the dependency's capacity.
//!
//! Starts a local dependency (an axum server whose responses take 20 ms) on
//! a free loopback port, sends 200 calls from 50 tasks through one limiter
//! (Gradient2, a queue of 64 waiters), and prints what the limit became.
//!
//! ```text
//! cargo run --release -p limiter-concurrency --features tower --example client
//! ```

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use limiter_concurrency::{Bounds, ConcurrencyLimiter, Gradient2, Outcome, QueueOrder};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().route(
        "/",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            "ok"
        }),
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let limiter = ConcurrencyLimiter::adaptive(Gradient2::new(Bounds::new(8, 1, 256)?))
        .queue(64, QueueOrder::Fifo)
        .build()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let url: hyper::Uri = format!("http://{addr}/").parse()?;

    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (limiter, client, url) = (limiter.clone(), client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u32;
            for _ in 0..4 {
                // The call to the dependency, under a permit.
                let Ok(permit) = limiter.acquire().await else {
                    continue;
                };
                let start = Instant::now();
                match client.get(url.clone()).await {
                    Ok(response) if response.status().is_success() => {
                        let _ = response.into_body().collect().await;
                        permit.finish(Outcome::Success(start.elapsed()));
                        ok += 1;
                    }
                    Ok(_) | Err(_) => permit.finish(Outcome::Dropped(start.elapsed())),
                }
            }
            ok
        }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await?;
    }
    println!(
        "{ok} calls succeeded; limit now {} (min RTT {:?}), {} in flight",
        limiter.limit(),
        limiter.min_rtt(),
        limiter.in_flight()
    );
    server.abort();
    Ok(())
}
