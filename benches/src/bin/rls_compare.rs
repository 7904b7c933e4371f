//! limiter-rls measured over gRPC and behind a real Envoy, with the load
//! generator in the same run.
//!
//! 1. `ShouldRateLimit` decisions per second and p50/p99 latency over gRPC
//!    with 1, 16 and 256 concurrent streams (tonic clients on 4 HTTP/2
//!    connections), in memory and on a private redis-server; each call one
//!    descriptor among 10,000 users under a limit that admits them all (the
//!    decision path, not refusals). The servers run on their own tokio
//!    runtime of one worker thread (`rls-server`), the load generator on
//!    another; CPU per decision is the server threads' own CPU time (from
//!    `/proc/self/task/*/schedstat`), so decisions per server CPU-second is
//!    the per-core figure without the client's cost.
//! 2. The Redis backend call alone, without gRPC or the service around it
//!    (the counterpart of envoyproxy/ratelimit's `DoLimit`
//!    microbenchmark): `try_all` of one descriptor, sequentially and 16 at
//!    a time, for GCRA and for the fixed window.
//! 3. Envoy's added p99: the same GET through Envoy with the `ratelimit`
//!    filter pointing at limiter-rls (in memory) and through Envoy without
//!    it, one keep-alive connection each. The requests alternate between
//!    the two (which goes first alternates too), in rounds (7, or 3 with
//!    `--quick`); each round gives its own p99 difference, and the added
//!    p99 is the median of the rounds' differences (their range printed
//!    beside it), so one burst of load on a shared machine moves one round,
//!    not the result. The difference is printed signed; a negative one
//!    (noise larger than the filter's cost) is reported as unresolvable,
//!    not as zero. Two rates: back to back (the high rate), and a quiet
//!    client sending a pair every 10 ms (the low rate, where a listener
//!    without `TCP_NODELAY` would wait for delayed ACKs).
//! 4. Accuracy: one key limited to 100/s, offered 200/s open loop through
//!    Envoy for 10 s (also with `--quick`); admitted counts against the
//!    exact GCRA bound `burst + rate · seconds` for limiter-rls (GCRA), for
//!    limiter-rls (fixed_window) and for Envoy's own `local_ratelimit`
//!    filter with the same quota (a 100-token bucket filled by 100 per s).
//!
//! Envoy comes from `LIMITER_RLS_ENVOY` or target/envoy-venv (see
//! scripts/test-all). The last line is the summary:
//! `rls summary grpc_mem_dps=… grpc_redis_dps=… envoy_added_p99_us=… envoy_added_p99_low_us=… accuracy_err_pct=… local_filter_err_pct=…`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use limiter_rls::backend::UnixClock;
use limiter_rls::backend::{
    AnyStore, memory::MemoryFixed, memory::MemoryGcra, redis::RedisFixed, redis::RedisGcra,
};
use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{Entry, RateLimitDescriptor, RateLimitRequest};
use limiter_rls::{Options, RateLimitService, RuleSet, server, stats::Recorder};

use limiter_test_support::envoy::Envoy;
use limiter_test_support::free_port;
use limiter_test_support::redis as redis_server;

const CONFIG: &str = "domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: acc
    rate_limit: {unit: second, requests_per_unit: 100}
";

/// CounterStore calls that failed (timed out) in the backend-only rows.
static FAILED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The Redis budget of every request and call here.
const STORE_BUDGET: Duration = Duration::from_millis(500);

/// The name prefix of the server runtime's threads.
const SERVER_THREADS: &str = "rls-server";

/// CPU time (ns) of this process's threads whose name starts with
/// [`SERVER_THREADS`]: the first field of `/proc/self/task/<tid>/schedstat`
/// (time on a CPU, in ns), summed.
fn server_cpu_ns() -> u64 {
    let mut sum = 0;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(SERVER_THREADS) {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        sum += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    sum
}

/// The load average over the last minute, from `/proc/loadavg`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn start_rls(backend: AnyStore) -> (u16, tokio::sync::watch::Sender<bool>) {
    let rules = RuleSet::from_files(vec![("bench.yaml".into(), CONFIG.into())]).unwrap();
    // A generous Redis budget: on a loaded 2-core machine a call can
    // exceed the 10 ms default, and this measures throughput, not failures.
    let options = Options {
        store_budget: STORE_BUDGET,
        ..Options::default()
    };
    let limiter = Arc::new(RateLimitService::new(
        rules,
        backend,
        options,
        Recorder::default(),
    ));
    let shared = Arc::new(server::Shared {
        limiter,
        healthy: AtomicBool::new(true),
        metrics: None,
        drain_delay: std::time::Duration::ZERO,
    });
    let (stop, rx) = tokio::sync::watch::channel(false);
    let (tx, bound) = tokio::sync::oneshot::channel();
    let lo = || ("127.0.0.1".to_owned(), 0);
    tokio::spawn(server::serve(shared, [lo(), lo(), lo()], rx, tx));
    (bound.await.unwrap().grpc.port(), stop)
}

fn request(user: u64) -> RateLimitRequest {
    RateLimitRequest {
        domain: "bench".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: format!("u{user}"),
            }],
            limit: None,
            hits_addend: None,
            is_negative_hits: false,
        }],
        hits_addend: 0,
    }
}

/// Decisions per second, p50 and p99 (µs), server CPU µs per decision.
async fn grpc_load(port: u16, streams: usize, secs: f64) -> (f64, u64, u64, f64) {
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(
            RateLimitClient::connect(format!("http://127.0.0.1:{port}"))
                .await
                .unwrap(),
        );
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let cpu0 = server_cpu_ns();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..streams {
        let mut c = clients[s % clients.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = s as u64;
            while Instant::now() < deadline {
                i = i
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let t = Instant::now();
                c.should_rate_limit(request((i >> 33) % 10_000))
                    .await
                    .unwrap();
                lat.push(t.elapsed().as_micros() as u64);
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = server_cpu_ns().saturating_sub(cpu0) as f64 / 1e3;
    all.sort_unstable();
    let n = all.len() as f64;
    (n / wall, pct(&all, 0.5), pct(&all, 0.99), cpu / n)
}

/// Envoy in front of `upstream`: `Some(rls)` adds the ratelimit filter (a
/// descriptor from `x-user`), `local` adds `local_ratelimit` 100/s instead.
fn envoy(upstream: u16, rls: Option<u16>, local: bool) -> Envoy {
    let (port, admin) = (free_port(), free_port());
    let cluster = |name: &str, p: u16, h2: bool| {
        let proto = if h2 {
            "\n    typed_extension_protocol_options:\n      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n        \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n        explicit_http_config: {http2_protocol_options: {}}"
        } else {
            ""
        };
        format!(
            "\n  - name: {name}\n    type: STATIC\n    connect_timeout: 1s{proto}\n    load_assignment:\n      cluster_name: {name}\n      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {p}}}}}}}}}]}}]"
        )
    };
    let mut filters = String::new();
    let mut limits = String::new();
    let mut clusters = cluster("upstream", upstream, false);
    if let Some(g) = rls {
        filters.push_str("\n          - name: envoy.filters.http.ratelimit\n            typed_config:\n              \"@type\": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit\n              domain: bench\n              timeout: 1s\n              rate_limit_service:\n                transport_api_version: V3\n                grpc_service: {envoy_grpc: {cluster_name: rls}}");
        limits.push_str("\n                  rate_limits: [{actions: [{request_headers: {header_name: x-user, descriptor_key: user}}]}, {actions: [{request_headers: {header_name: x-acc, descriptor_key: acc}}]}]");
        clusters.push_str(&cluster("rls", g, true));
    }
    if local {
        filters.push_str("\n          - name: envoy.filters.http.local_ratelimit\n            typed_config:\n              \"@type\": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit\n              stat_prefix: local\n              token_bucket: {max_tokens: 100, tokens_per_fill: 100, fill_interval: 1s}\n              filter_enabled: {default_value: {numerator: 100, denominator: HUNDRED}}\n              filter_enforced: {default_value: {numerator: 100, denominator: HUNDRED}}");
    }
    let yaml = format!(
        "admin:\n  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}\nstatic_resources:\n  listeners:\n  - name: main\n    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}\n    filter_chains:\n    - filters:\n      - name: envoy.filters.network.http_connection_manager\n        typed_config:\n          \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n          stat_prefix: ingress\n          route_config:\n            virtual_hosts:\n            - name: all\n              domains: [\"*\"]\n              routes:\n              - match: {{prefix: \"/\"}}\n                route:\n                  cluster: upstream{limits}\n          http_filters:{filters}\n          - name: envoy.filters.http.router\n            typed_config: {{\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}\n  clusters:{clusters}\n"
    );
    Envoy::start(&yaml, port, admin)
}

/// A keep-alive GET on `conn` (reconnecting when needed); the status.
fn http_get(
    conn: &mut Option<BufReader<TcpStream>>,
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<u16> {
    for _ in 0..2 {
        if conn.is_none() {
            let s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            s.set_nodelay(true).ok()?;
            *conn = Some(BufReader::new(s));
        }
        let r = conn.as_mut()?;
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: b\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        if r.get_mut().write_all(req.as_bytes()).is_err() {
            *conn = None;
            continue;
        }
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            *conn = None;
            continue;
        }
        let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
        let mut len = 0;
        let mut close = false;
        loop {
            line.clear();
            r.read_line(&mut line).ok()?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            let l = line.to_ascii_lowercase();
            if let Some(v) = l.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            close |= l.starts_with("connection: close");
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).ok()?;
        if close {
            *conn = None;
        }
        return Some(status);
    }
    None
}

fn upstream() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = s.set_nodelay(true);
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                let mut line = String::new();
                loop {
                    line.clear();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line == "\r\n" => {
                            if w.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                                .is_err()
                            {
                                return;
                            }
                        }
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    port
}

/// The p99 (µs) of sequential GETs through `with` and through `without`
/// in each of `rounds` rounds of `per_round` requests each; within a round
/// the two alternate, and which of a pair goes first alternates too, so a
/// slow moment of the machine falls on both alike.
/// Each round's p99 through Envoy with the filter and without, `per_round`
/// alternating pairs of GETs, `pace` apart (`None`: back to back).
fn p99_rounds(
    with: &Envoy,
    without: &Envoy,
    rounds: usize,
    per_round: usize,
    pace: Option<Duration>,
) -> Vec<(u64, u64)> {
    let (mut ca, mut cb) = (None, None);
    let get = |conn: &mut Option<BufReader<TcpStream>>, port: u16, user: &str| {
        let t = Instant::now();
        assert_eq!(http_get(conn, port, "/", &[("x-user", user)]), Some(200));
        t.elapsed().as_micros() as u64
    };
    (0..rounds)
        .map(|round| {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for i in 0..per_round {
                if let Some(pace) = pace {
                    std::thread::sleep(pace);
                }
                let user = format!("u{}", (round * per_round + i) % 1000);
                if i % 2 == 0 {
                    a.push(get(&mut ca, with.port, &user));
                    b.push(get(&mut cb, without.port, &user));
                } else {
                    b.push(get(&mut cb, without.port, &user));
                    a.push(get(&mut ca, with.port, &user));
                }
            }
            a.sort_unstable();
            b.sort_unstable();
            (pct(&a, 0.99), pct(&b, 0.99))
        })
        .collect()
}

/// The median of `xs` (the mean of the middle two for an even count).
fn median_i64(mut xs: Vec<i64>) -> i64 {
    xs.sort_unstable();
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2
    }
}

/// Envoy's added p99 at one pace, printed per round and overall: the
/// median of the rounds' differences, signed; a negative one (noise larger
/// than the filter's cost) is marked unresolvable, never clamped.
fn added_p99(
    with: &Envoy,
    without: &Envoy,
    rounds: usize,
    per_round: usize,
    pace: Option<Duration>,
) -> String {
    let label = match pace {
        None => "back to back".to_owned(),
        Some(p) => format!("one pair every {} ms", p.as_millis()),
    };
    let per = p99_rounds(with, without, rounds, per_round, pace);
    let diffs: Vec<i64> = per
        .iter()
        .map(|&(w, wo)| i64::try_from(w).unwrap_or(i64::MAX) - i64::try_from(wo).unwrap_or(0))
        .collect();
    for (r, ((w, wo), d)) in per.iter().zip(&diffs).enumerate() {
        println!(
            "round {r} ({label}): Envoy GET p99 with the filter {w} µs, without {wo} µs: {d:+} µs"
        );
    }
    let p_with = median_i64(per.iter().map(|&(w, _)| w as i64).collect());
    let p_without = median_i64(per.iter().map(|&(_, wo)| wo as i64).collect());
    let added = median_i64(diffs.clone());
    let (lo, hi) = (
        diffs.iter().min().copied().unwrap_or(0),
        diffs.iter().max().copied().unwrap_or(0),
    );
    println!(
        "\nEnvoy GET p99 ({label}), medians of {rounds} rounds of {per_round} alternating requests: with the ratelimit filter {p_with} µs, without {p_without} µs; added (median of the rounds' differences) {added} µs, range {lo:+} to {hi:+} µs{}",
        if added < 0 {
            " (unresolvable: the noise exceeds the filter's cost)"
        } else {
            ""
        }
    );
    if added < 0 {
        format!("n/a({added})")
    } else {
        added.to_string()
    }
}
/// Admitted of `rate`/s offered open loop for `secs` on one key.
fn offered(e: &Envoy, rate: f64, secs: f64, key: &str) -> u64 {
    let start = Instant::now();
    let total = (rate * secs) as u64;
    let workers = 8;
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (port, key) = (e.port, key.to_owned());
            std::thread::spawn(move || {
                let mut conn = None;
                let mut ok = 0;
                let mut i = w;
                while i < total {
                    let at = start + Duration::from_secs_f64(i as f64 / rate);
                    if let Some(d) = at.checked_duration_since(Instant::now()) {
                        std::thread::sleep(d);
                    }
                    if http_get(&mut conn, port, "/", &[("x-acc", &key)]) == Some(200) {
                        ok += 1;
                    }
                    i += workers;
                }
                ok
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

/// µs per `try_all` of one fresh-ish descriptor on `backend`, with
/// `parallel` calls in flight (µs per call = wall / calls).
async fn backend_call(backend: Arc<AnyStore>, parallel: usize, secs: f64) -> f64 {
    use limiter_rls::backend::{CounterStore, Part};
    use limiter_rls::proto::Unit;
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..parallel {
        let backend = Arc::clone(&backend);
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            let mut i = w as u64;
            while Instant::now() < deadline {
                i = i
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let part = Part {
                    key: format!("bench_user_u{}_", (i >> 33) % 10_000),
                    domain_len: 5,
                    limit: limiter_rls::LimitSpec {
                        requests_per_unit: 1_000_000,
                        unit: Unit::Second,
                    },
                    hits: 1,
                };
                let budget = tokio::time::Instant::now() + STORE_BUDGET;
                // A call past the budget on this loaded machine is not
                // counted (and is reported by the failure count).
                match backend.try_all(std::slice::from_ref(&part), budget).await {
                    Ok(_) => n += 1,
                    Err(_) => {
                        FAILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
            n
        }));
    }
    let mut n = 0;
    for t in tasks {
        n += t.await.unwrap();
    }
    t0.elapsed().as_secs_f64() * 1e6 / n as f64
}

/// The allocator the limiter-rls binary ships with, so the server measured
/// here is the one deployed.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let secs = if quick { 1.5 } else { 5.0 };
    // The accuracy run is a full 10 s overload either way.
    let acc_secs = 10.0;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // The servers: one worker thread of their own, so their CPU time is
    // theirs alone and "per core" is what one thread does.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(SERVER_THREADS)
        .enable_all()
        .build()
        .unwrap();
    println!("load average at start: {}", load_average());
    let redis = redis_server::RedisServer::start();
    let (mem_port, _stop_mem) = server_rt.block_on(start_rls(AnyStore::MemoryGcra(
        MemoryGcra::new(UnixClock::new(), 1_000_000),
    )));
    let conn: limiter_redis::RedisConnection = server_rt.block_on(redis.manager()).into();
    let redis_backend = RedisGcra::new(
        conn.clone(),
        "bench",
        STORE_BUDGET,
        limiter_redis::WhenDown::Error,
    )
    .unwrap();
    let (redis_port, _stop_redis) =
        server_rt.block_on(start_rls(AnyStore::RedisGcra(redis_backend)));
    let (fixed_port, _stop_fixed) = server_rt.block_on(start_rls(AnyStore::MemoryFixed(
        MemoryFixed::new(UnixClock::new(), 1_000_000),
    )));

    println!(
        "gRPC ShouldRateLimit, {secs} s per case; server: 1 worker thread, load generator: its own runtime (2 cores shared)"
    );
    println!(
        "{:<8} {:>8} {:>12} {:>9} {:>9} {:>16} {:>18}",
        "store",
        "streams",
        "decisions/s",
        "p50 µs",
        "p99 µs",
        "server CPU µs/dec",
        "dec/server CPU-s"
    );
    let mut best = [0f64; 2];
    let mut per_core = [0f64; 2];
    for (i, (name, port)) in [("memory", mem_port), ("redis", redis_port)]
        .into_iter()
        .enumerate()
    {
        for streams in [1, 16, 256] {
            let (dps, p50, p99, cpu) = rt.block_on(grpc_load(port, streams, secs));
            best[i] = best[i].max(dps);
            let core = if cpu > 0.0 { 1e6 / cpu } else { 0.0 };
            per_core[i] = per_core[i].max(core);
            println!(
                "{name:<8} {streams:>8} {dps:>12.0} {p50:>9} {p99:>9} {cpu:>16.1} {core:>18.0}"
            );
        }
    }

    println!("\nThe Redis backend call alone (no gRPC), µs per call:");
    println!(
        "{:<14} {:>12} {:>12}",
        "algorithm", "sequential", "16 parallel"
    );
    let backends = [
        (
            "gcra",
            AnyStore::RedisGcra(
                RedisGcra::new(
                    conn.clone(),
                    "bench-call",
                    STORE_BUDGET,
                    limiter_redis::WhenDown::Error,
                )
                .unwrap(),
            ),
        ),
        (
            "fixed_window",
            AnyStore::RedisFixed(
                RedisFixed::new(
                    conn,
                    "bench-call_",
                    STORE_BUDGET,
                    limiter_redis::WhenDown::Error,
                    1_000_000,
                )
                .unwrap(),
            ),
        ),
    ];
    let mut call_us = [0f64; 2];
    for (i, (name, backend)) in backends.into_iter().enumerate() {
        let backend = Arc::new(backend);
        let seq = server_rt.block_on(backend_call(Arc::clone(&backend), 1, secs));
        let par = server_rt.block_on(backend_call(backend, 16, secs));
        call_us[i] = seq;
        // Relaxed: read after the tasks were joined.
        let failed = FAILED.swap(0, std::sync::atomic::Ordering::Relaxed);
        println!("{name:<14} {seq:>12.1} {par:>12.1} (failed calls: {failed})");
    }

    let up = upstream();
    let with = envoy(up, Some(mem_port), false);
    let without = envoy(up, None, false);
    // Back to back (as fast as one connection goes), then a quiet client
    // at 100 requests per second: the pace where delayed ACKs would show.
    let rounds = if quick { 3 } else { 7 };
    let added_high = added_p99(
        &with,
        &without,
        rounds,
        if quick { 1_000 } else { 3_000 },
        None,
    );
    let added_low = added_p99(
        &with,
        &without,
        rounds,
        if quick { 200 } else { 500 },
        Some(Duration::from_millis(10)),
    );

    let bound = 100.0 + 100.0 * acc_secs;
    let gcra = offered(&with, 200.0, acc_secs, "gcra") as f64;
    let fixed_envoy = envoy(up, Some(fixed_port), false);
    let fixed = offered(&fixed_envoy, 200.0, acc_secs, "fixed") as f64;
    let local_envoy = envoy(up, None, true);
    let local = offered(&local_envoy, 200.0, acc_secs, "local") as f64;
    let err = |n: f64| (n - bound) / bound * 100.0;
    println!(
        "\nAccuracy, 100/s offered 200/s for {acc_secs} s, exact GCRA bound {bound:.0}:\n  limiter-rls gcra {gcra:.0} ({:+.2} %)\n  limiter-rls fixed_window {fixed:.0} ({:+.2} %)\n  Envoy local_ratelimit {local:.0} ({:+.2} %)",
        err(gcra),
        err(fixed),
        err(local)
    );
    drop((with, without, fixed_envoy, local_envoy));
    println!("load average at end: {}", load_average());
    println!(
        "rls summary grpc_mem_dps={:.0} grpc_redis_dps={:.0} mem_dps_per_server_core={:.0} redis_dps_per_server_core={:.0} redis_call_us={:.1} envoy_added_p99_us={added_high} envoy_added_p99_low_us={added_low} accuracy_err_pct={:.3} local_filter_err_pct={:.3}",
        best[0],
        best[1],
        per_core[0],
        per_core[1],
        call_us[0],
        err(gcra),
        err(local)
    );
}
