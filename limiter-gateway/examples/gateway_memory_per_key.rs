//! Resident memory per key of a `per_ip` rule, measured through the
//! gateway: 100,000 distinct client addresses (one request each, keyed by
//! `X-Forwarded-For` behind a trusted loopback proxy) through a real
//! listener to the echo upstream, RSS read from `/proc/self/statm` before
//! and after. Warm-up first (connections, pools, the allocator's arenas)
//! on a path no rule matches, so the keyed table is still untouched when
//! the first reading is taken: the difference is the keys, their table
//! included (`KeyedLimiter` reserves its table for up to 2^17 keys up
//! front; its pages become resident as keys land on them).
//!
//! `cargo run --release -p limiter-gateway --features testing --example gateway_memory_per_key`

use std::time::Instant;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use limiter_config::RuleSet;
use limiter_gateway::echo::Echo;
use limiter_gateway::{Gateway, GatewayConfig, metrics_handle};

fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn ip(i: u32) -> String {
    let n = 0x0a00_0000 + i; // 10.0.0.0/8
    format!(
        "{}.{}.{}.{}",
        n >> 24,
        (n >> 16) & 255,
        (n >> 8) & 255,
        n & 255
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    const KEYS: u32 = 100_000;
    const WARM: u32 = 5_000;
    metrics_handle();
    let dir = std::env::temp_dir().join(format!("gateway-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("rules.yaml");
    std::fs::write(
        &file,
        "rate_limits:\n  per_client:\n    algorithm: token_bucket\n    rate: 100\n    burst: 200\n    per_ip: true\n    max_keys: 1000000\n    trusted_proxies: [ \"127.0.0.0/8\" ]\n    match: { prefix: \"/x\" }\n",
    )?;
    let rules = RuleSet::load(&file)?;
    let echo = Echo::start("127.0.0.1:0".parse()?).await?;
    let config = GatewayConfig::single("127.0.0.1:0".parse()?, echo.url().parse()?);
    let running = Gateway::new(config, rules.clone()).start().await?;
    let base = format!("http://{}", running.addrs()[0]);
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let send = |path: &str, from: u32, to: u32| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move {
            let mut tasks = Vec::new();
            for lane in 0..16u32 {
                let client = client.clone();
                let url = url.clone();
                tasks.push(tokio::spawn(async move {
                    let mut i = from + lane;
                    while i < to {
                        let request = Request::get(&url)
                            .header("x-forwarded-for", ip(i))
                            .body(Empty::new())
                            .expect("a request");
                        let response = client.request(request).await.expect("served");
                        assert_eq!(response.status(), 200);
                        response.into_body().collect().await.expect("a body");
                        i += 16;
                    }
                }));
            }
            for t in tasks {
                t.await.expect("a lane");
            }
        }
    };
    // Warm-up: other addresses than the measured ones, on a path no rule
    // limits (the table stays empty).
    send("/warm", KEYS, KEYS + WARM).await;
    let before = rss();
    let started = Instant::now();
    send("/x", 0, KEYS).await;
    let after = rss();
    let per_key = (after.saturating_sub(before)) as f64 / f64::from(KEYS);
    let held = rules
        .get("per_client")
        .and_then(|r| r.keyed().map(|k| k.len()))
        .unwrap_or(0);
    println!(
        "gateway memory: {KEYS} keys ({held} held), RSS {:.1} MB -> {:.1} MB, {per_key:.0} B per key ({:.1} s)",
        before as f64 / 1e6,
        after as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    running.shutdown().await;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
