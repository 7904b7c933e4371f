//! One-command demo: `cargo run --release -p limiter-gateway --example demo`.
//!
//! Starts the built-in echo upstream and the gateway on loopback with seed
//! 004's three rules (routed by prefix), drives each route for a few
//! seconds at twice its limit from several simulated client addresses
//! (`X-Forwarded-For` behind loopback as the trusted proxy), and prints per
//! rule: configured rate, offered and achieved rate, admitted, rejected,
//! delayed, the GCRA bound for the run, and p50/p99 added latency (the
//! gateway's round trip minus the direct round trip to the upstream at the
//! same percentile; a delayed request's wait is included: that is what
//! delay mode adds).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use limiter_config::RuleSet;
use limiter_gateway::echo::Echo;
use limiter_gateway::{Gateway, GatewayConfig, metrics_handle};
use tokio::sync::{Mutex, Semaphore};

const RULES: &str = r#"rate_limits:
  api_gateway:
    algorithm: token_bucket
    rate: 5000
    burst: 10000
    match: { prefix: "/api" }
  order_service:
    algorithm: leaky_bucket
    rate: 800
    match: { prefix: "/orders" }
  payment_gateway:
    algorithm: token_bucket
    rate: 100
    burst: 200
    per_ip: true
    trusted_proxies: [ "127.0.0.0/8" ]
    match: { prefix: "/pay" }
"#;

const SECONDS: f64 = 3.0;
const CLIENTS: [&str; 4] = ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"];

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(4096)
        .build(HttpConnector::new())
}

async fn once(client: &HttpClient, url: &str, xff: &str) -> Option<(StatusCode, Duration)> {
    let started = Instant::now();
    let request = Request::get(url)
        .header("x-forwarded-for", xff)
        .body(Empty::new())
        .ok()?;
    let response = client.request(request).await.ok()?;
    let status = response.status();
    response.into_body().collect().await.ok()?;
    Some((status, started.elapsed()))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[derive(Default)]
struct Tally {
    sent: AtomicU64,
    admitted: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    latencies: Mutex<Vec<Duration>>,
}

/// Offers `rate` requests per second to `url` for `SECONDS`, open loop
/// (sent on schedule whatever the answers), at most 4096 in flight.
async fn drive(client: &HttpClient, url: String, rate: f64) -> (Arc<Tally>, f64) {
    let tally = Arc::new(Tally::default());
    let permits = Arc::new(Semaphore::new(4096));
    let started = Instant::now();
    let total = (rate * SECONDS) as u64;
    let mut tasks = Vec::new();
    for n in 0..total {
        let due = started + Duration::from_secs_f64(n as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            break;
        };
        let (client, url, tally) = (client.clone(), url.clone(), Arc::clone(&tally));
        let xff = CLIENTS[n as usize % CLIENTS.len()];
        tally.sent.fetch_add(1, Ordering::Relaxed);
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            match once(&client, &url, xff).await {
                Some((StatusCode::OK, latency)) => {
                    tally.admitted.fetch_add(1, Ordering::Relaxed);
                    tally.latencies.lock().await.push(latency);
                }
                Some((StatusCode::TOO_MANY_REQUESTS, _)) => {
                    tally.rejected.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    tally.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let offered_for = started.elapsed().as_secs_f64();
    for t in tasks {
        let _ = t.await;
    }
    (tally, offered_for)
}

fn counter(metrics: &str, name: &str, rule: &str) -> u64 {
    let prefix = format!("{name}{{limiter=\"{rule}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let handle = metrics_handle();
    let dir = std::env::temp_dir().join(format!("limiter-gateway-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("rules.yaml");
    std::fs::write(&file, RULES)?;
    let rules = RuleSet::load(&file)?;
    let echo = Echo::start("127.0.0.1:0".parse()?).await?;
    let config = GatewayConfig::single("127.0.0.1:0".parse()?, echo.url().parse()?);
    let running = Gateway::new(config, rules).start().await?;
    let gateway = running.addrs()[0];
    println!("echo upstream on {}, gateway on {gateway}", echo.addr());

    // The direct round trip, for "added" latency.
    let client = client();
    let mut direct = Vec::new();
    for _ in 0..2000 {
        if let Some((_, l)) = once(&client, &format!("{}/direct", echo.url()), "203.0.113.9").await
        {
            direct.push(l);
        }
    }
    direct.sort_unstable();
    let (d50, d99) = (percentile(&direct, 0.5), percentile(&direct, 0.99));
    println!("direct to upstream: p50 {d50:?} p99 {d99:?} (subtracted below)\n");

    println!(
        "{:<16} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>9} {:>10} {:>10}",
        "rule",
        "configured",
        "offered",
        "achieved",
        "admitted",
        "rejected",
        "delayed",
        "failed",
        "gcra_max",
        "p50_added",
        "p99_added"
    );
    // (rule, path, configured rate per second, burst, clients sharing it)
    let routes = [
        ("api_gateway", "/api/items", 5000.0, 10000.0, 1.0),
        ("order_service", "/orders/1", 800.0, 1.0, 1.0),
        (
            "payment_gateway",
            "/pay/charge",
            100.0,
            200.0,
            CLIENTS.len() as f64,
        ),
    ];
    for (rule, path, rate, burst, keys) in routes {
        let configured = rate * keys;
        let offered_rate = 2.0 * configured;
        let started = Instant::now();
        let (tally, _offered_for) =
            drive(&client, format!("http://{gateway}{path}"), offered_rate).await;
        let elapsed = started.elapsed().as_secs_f64();
        let metrics = handle.render();
        let delayed = counter(&metrics, "rate_limit_delayed_total", rule);
        let admitted = tally.admitted.load(Ordering::Relaxed);
        let mut lat = std::mem::take(&mut *tally.latencies.lock().await);
        lat.sort_unstable();
        let added = |p: f64, base: Duration| percentile(&lat, p).saturating_sub(base);
        // The most GCRA can admit over the run: the burst plus one per
        // emission interval, per key.
        let gcra_max = ((burst + rate * elapsed).floor() * keys) as u64;
        println!(
            "{:<16} {:>8.0}/s {:>7.0}/s {:>7.0}/s {:>9} {:>9} {:>8} {:>7} {:>9} {:>10.2?} {:>10.2?}",
            rule,
            configured,
            tally.sent.load(Ordering::Relaxed) as f64 / SECONDS,
            admitted as f64 / elapsed,
            admitted,
            tally.rejected.load(Ordering::Relaxed),
            delayed,
            tally.failed.load(Ordering::Relaxed),
            gcra_max,
            added(0.5, d50),
            added(0.99, d99),
        );
    }
    println!(
        "\nachieved = admitted / run time, burst included (api_gateway's burst of 10000 is 2 s of its rate);\n\
         gcra_max = burst + rate x run time per key: admitted never exceeds it.\n\
         order_service is a leaky bucket in delay mode (max 1 s): its added latency is mostly the wait it was given."
    );
    running.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
