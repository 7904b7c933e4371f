//! `gateway_compare`: limiter-gateway beside nginx `limit_req`, in front of
//! the same upstream, on loopback, loaded by the same generator, in one run.
//!
//! ```text
//! cargo run --release -p limiter-benches --bin gateway_compare -- --quick
//! ```
//!
//! nginx comes from Debian's packages: when `nginx` is not on PATH the
//! runner installs it with `apt-get install -y nginx` (after
//! `apt-get update`). It runs with `worker_processes 2` from a private
//! prefix; the gateway runs in this process on its own two-worker tokio
//! runtime; the upstream (limiter-gateway's echo server) on its own
//! one-worker runtime; the generator on another two-worker runtime. Both
//! proxies keep upstream connections alive (nginx `keepalive 64`, HTTP/1.1).
//!
//! Paths, the same on both: `/free` (no limit), `/limited` (a limit that
//! never triggers: 10^6/s with a burst of 10^6, so the limiter runs on
//! every request), `/acc` (1000/s with room for 20 at once: nginx
//! `rate=1000r/s burst=19 nodelay`, which admits 1 + 19 at once, ours
//! `rate: 1000, burst: 20`; a burst of one would measure the generator's
//! timer jitter, not the limiters).
//!
//! Throughput cases (`free`, `limited` per proxy): `CONNS` keep-alive
//! connections send back to back for the case time; requests per second
//! and p99 latency. Cases run in interleaved rounds and medians are
//! reported. Accuracy (per proxy, once): open loop at 2000/s for 5 s on
//! `/acc`; `accuracy_err = (admitted - allowed) / allowed` with `allowed =
//! 20 + 1000 x (time from the first send to the last)`.
//!
//! The last line is the summary:
//! `gateway summary qps_vs_nginx=R p99_vs_nginx=R accuracy_err_pct=P nginx_accuracy_err_pct=P`
//! (qps and p99 of the `limited` cases, gateway over nginx).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use limiter_config::RuleSet;
use limiter_gateway::echo::Echo;
use limiter_gateway::{Gateway, GatewayConfig};

const CONNS: usize = 32;

const RULES: &str = r#"rate_limits:
  limited:
    algorithm: token_bucket
    rate: 1000000
    burst: 1000000
    match: { prefix: "/limited" }
  acc:
    algorithm: token_bucket
    rate: 1000
    burst: 20
    match: { prefix: "/acc" }
"#;

fn nginx_conf(dir: &Path, listen: u16, upstream: SocketAddr) -> String {
    let d = dir.display();
    format!(
        r#"daemon off;
master_process on;
worker_processes 2;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  limit_req_status 429;
  limit_req_zone $server_name zone=limited:1m rate=1000000r/s;
  limit_req_zone $server_name zone=acc:1m rate=1000r/s;
  upstream up {{ server {upstream}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{listen};
    server_name bench;
    keepalive_requests 100000000;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_buffering off;
    location /limited {{ limit_req zone=limited burst=1000000 nodelay; proxy_pass http://up; }}
    location /acc {{ limit_req zone=acc burst=19 nodelay; proxy_pass http://up; }}
    location / {{ proxy_pass http://up; }}
  }}
}}
"#
    )
}

fn ensure_nginx() -> PathBuf {
    let found = |p: &str| Path::new(p).exists().then(|| PathBuf::from(p));
    if let Some(p) = found("/usr/sbin/nginx") {
        return p;
    }
    eprintln!("nginx not found: installing Debian's package with apt-get");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !apt(&["install", "-y", "--no-install-recommends", "nginx"]) {
        apt(&["update"]);
        assert!(
            apt(&["install", "-y", "--no-install-recommends", "nginx"]),
            "apt-get install nginx failed"
        );
    }
    // The package starts a system nginx on port 80; it is not used here.
    found("/usr/sbin/nginx").expect("nginx installed at /usr/sbin/nginx")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[derive(Debug, Clone, Copy)]
struct Round {
    rps: f64,
    p99_us: f64,
    ok: u64,
    other: u64,
}

async fn closed_loop(addr: SocketAddr, path: &str, time: Duration) -> Round {
    let start = Instant::now();
    let deadline = start + time;
    let tasks: Vec<_> = (0..CONNS)
        .map(|_| {
            let uri: http::Uri = format!("http://{addr}{path}").parse().expect("uri");
            tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
                stream.set_nodelay(true).expect("nodelay");
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .expect("handshake");
                tokio::spawn(conn);
                let (mut lat, mut ok, mut other) = (Vec::with_capacity(50_000), 0u64, 0u64);
                while Instant::now() < deadline {
                    let request = http::Request::get(uri.clone())
                        .header(http::header::HOST, "bench")
                        .body(Empty::<Bytes>::new())
                        .expect("request");
                    let sent = Instant::now();
                    let Ok(response) = sender.send_request(request).await else {
                        break;
                    };
                    if response.status() == 200 {
                        ok += 1;
                    } else {
                        other += 1;
                    }
                    let _ = response.into_body().collect().await;
                    lat.push(sent.elapsed().as_nanos() as u64);
                }
                (lat, ok, other)
            })
        })
        .collect();
    let (mut lat, mut ok, mut other) = (Vec::new(), 0, 0);
    for t in tasks {
        let (l, o, x) = t.await.expect("client task");
        lat.extend(l);
        ok += o;
        other += x;
    }
    let elapsed = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let p99 = lat
        .get(lat.len().saturating_sub(1) * 99 / 100)
        .copied()
        .unwrap_or(0);
    Round {
        rps: lat.len() as f64 / elapsed,
        p99_us: p99 as f64 / 1000.0,
        ok,
        other,
    }
}

/// Open loop at `rate`/s for `secs` on `/acc`: (admitted, rejected, other,
/// allowed by the quota).
async fn accuracy(addr: SocketAddr, rate: f64, secs: f64) -> (u64, u64, u64, f64) {
    let client: Client<HttpConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .build(HttpConnector::new());
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let uri: http::Uri = format!("http://{addr}/acc").parse().expect("uri");
    let total = (rate * secs) as u64;
    let start = Instant::now();
    let mut last_send = start;
    let mut tasks = Vec::with_capacity(total as usize);
    for n in 0..total {
        tokio::time::sleep_until((start + Duration::from_secs_f64(n as f64 / rate)).into()).await;
        last_send = Instant::now();
        let (client, uri, counts) = (client.clone(), uri.clone(), Arc::clone(&counts));
        tasks.push(tokio::spawn(async move {
            let request = http::Request::get(uri)
                .header(http::header::HOST, "bench")
                .body(Empty::new())
                .expect("request");
            let i = match client.request(request).await {
                Ok(r) if r.status() == 200 => 0,
                Ok(r) if r.status() == 429 => 1,
                _ => 2,
            };
            // Relaxed: counts read after every task has been joined.
            counts[i].fetch_add(1, Ordering::Relaxed);
        }));
    }
    let window = last_send.duration_since(start).as_secs_f64();
    for t in tasks {
        let _ = t.await;
    }
    let allowed = 20.0 + 1000.0 * window;
    (
        counts[0].load(Ordering::Relaxed),
        counts[1].load(Ordering::Relaxed),
        counts[2].load(Ordering::Relaxed),
        allowed,
    )
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => 0.0,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a runtime")
}

struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, case_time) = if quick {
        (3, Duration::from_secs(2))
    } else {
        (7, Duration::from_secs(5))
    };
    let nginx_bin = ensure_nginx();
    let dir = std::env::temp_dir().join(format!("gateway-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let upstream_rt = runtime(1);
    let echo = upstream_rt
        .block_on(Echo::start("127.0.0.1:0".parse().expect("addr")))
        .expect("echo upstream");

    let rules_file = dir.join("rules.yaml");
    std::fs::write(&rules_file, RULES).expect("rules file");
    let gateway_rt = runtime(2);
    let gateway = gateway_rt.block_on(async {
        limiter_gateway::metrics_handle();
        let rules = RuleSet::load(&rules_file).expect("good rules");
        let config = GatewayConfig::single(
            "127.0.0.1:0".parse().expect("addr"),
            echo.url().parse().expect("url"),
        );
        Gateway::new(config, rules)
            .start()
            .await
            .expect("gateway starts")
    });
    let gateway_addr = gateway.addrs()[0];

    let nginx_port = free_port();
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, nginx_conf(&dir, nginx_port, echo.addr())).expect("nginx.conf");
    let _nginx = Nginx(
        Command::new(&nginx_bin)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&conf)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nginx starts"),
    );
    let nginx_addr: SocketAddr = format!("127.0.0.1:{nginx_port}").parse().expect("addr");
    let load = runtime(2);
    load.block_on(async {
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(nginx_addr).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("nginx did not start listening");
    });
    let version = Command::new(&nginx_bin)
        .arg("-v")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
        .unwrap_or_default();
    println!("{version}; {rounds} rounds x {case_time:?} per case, {CONNS} keep-alive connections");

    let cases: [(&str, SocketAddr, &str); 4] = [
        ("nginx_free", nginx_addr, "/free"),
        ("gateway_free", gateway_addr, "/free"),
        ("nginx_limited", nginx_addr, "/limited"),
        ("gateway_limited", gateway_addr, "/limited"),
    ];
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); cases.len()];
    for round in 0..rounds {
        // Alternate the order each round so neither proxy always goes first.
        let order: Vec<usize> = if round % 2 == 0 {
            (0..cases.len()).collect()
        } else {
            (0..cases.len()).rev().collect()
        };
        for i in order {
            let (name, addr, path) = cases[i];
            let r = load.block_on(closed_loop(addr, path, case_time));
            assert_eq!(r.other, 0, "{name}: {} non-200 answers", r.other);
            results[i].push(r);
        }
    }
    println!(
        "{:<16} {:>12} {:>10} {:>12}",
        "case", "median_rps", "p99_us", "ok_total"
    );
    let mut medians = Vec::new();
    for (i, (name, _, _)) in cases.iter().enumerate() {
        let rps = median(results[i].iter().map(|r| r.rps).collect());
        let p99 = median(results[i].iter().map(|r| r.p99_us).collect());
        let ok: u64 = results[i].iter().map(|r| r.ok).sum();
        println!("{name:<16} {rps:>12.0} {p99:>10.0} {ok:>12}");
        medians.push((rps, p99));
    }

    println!(
        "without limits: gateway/nginx qps {:.3}, p99 {:.3}",
        medians[1].0 / medians[0].0,
        medians[1].1 / medians[0].1
    );
    let mut errs = Vec::new();
    for (name, addr) in [("nginx", nginx_addr), ("gateway", gateway_addr)] {
        let (admitted, rejected, other, allowed) = load.block_on(accuracy(addr, 2000.0, 5.0));
        let err = (admitted as f64 - allowed) / allowed * 100.0;
        println!(
            "accuracy {name:<8} offered 2000/s for 5 s at a 1000/s limit: admitted {admitted} rejected {rejected} other {other} allowed {allowed:.0} err {err:+.3}%"
        );
        errs.push(err);
    }
    gateway_rt.block_on(gateway.shutdown());
    drop(_nginx);
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "gateway summary qps_vs_nginx={:.3} p99_vs_nginx={:.3} accuracy_err_pct={:.3} nginx_accuracy_err_pct={:.3}",
        medians[3].0 / medians[2].0,
        medians[3].1 / medians[2].1,
        errs[1],
        errs[0],
    );
    drop(upstream_rt);
}
