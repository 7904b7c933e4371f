//! `http_compare`: what the limiter-tower layer costs an axum service, beside
//! tower_governor, measured end to end over loopback.
//!
//! ```text
//! cargo run --release -p limiter-benches --bin http_compare -- --quick
//! ```
//!
//! An axum hello-world on a tokio runtime of two worker threads (the
//! machine's two cores), and a load generator in a process of its own (this
//! binary with `--load`, its own 2-thread runtime): `CONNS` keep-alive
//! HTTP/1.1 connections, each from its own loopback address (127.0.0.1 to
//! 127.0.0.64, so per-IP keys differ), send requests back to back for a
//! fixed time. Cases run in interleaved rounds (every case once per round,
//! in reverse order every other round, so a slow moment of the machine or a
//! drift hits all of them alike); the medians over rounds are reported, and
//! each ratio is the median over rounds of that round's ratio.
//!
//! Cases: no layer; four floors through axum's `Router::layer` (an
//! identity layer, which still costs the route nesting every layer gets;
//! a response map adding our two rate-limit headers as static values:
//! what sending those bytes costs without deciding or formatting; the
//! same map asking governor's global limiter first: what deciding and
//! sending them costs without headroom or formatting; and a
//! layer answering every request with the reject case's 429, its headers
//! and problem document taken once from our layer and cloned: what
//! sending the refusal's bytes costs without deciding); our
//! layer with a global limiter that never limits (with
//! and without its rate-limit headers, on the default clock (the TSC's),
//! and with headers on the OS monotonic clock); our layer
//! keyed per peer IP (never limits; with and without headers);
//! tower_governor keyed per peer IP with the same quota (its default, no
//! headers, and with `use_headers`); our layer rejecting every request (the
//! 429 path); our layer keyed per peer IP on Redis (a `redis-server` the
//! runner starts on a free port, sharing the two cores: every request is
//! one script call); and delay mode at burst 1 (`Mode::Delay`, 1,000/s
//! and 10,000/s, two connections sending back to back, so every request is
//! held for its slot, one more is always queued behind it, and a wake-up
//! later than the queue can absorb is lost rate), beside
//! `AsyncLimiter::take()` paced by two consumers at the same rates in the
//! same run; and limiter-config's rule set (one routed `per_ip` token bucket
//! that never limits, headers on) through `RuleSet::layer`, beside the
//! operator controls on the same rule set: the rule in shadow mode (at one
//! per hour, so every request after each client's first is a shadow
//! refusal, counted and let through), the never-limiting rule set with the
//! top-keys summary on (`RuleSet::record_top_keys`: the admit path with the
//! summary on), and the shadow rule set with it on (every shadow refusal
//! recorded by key). Every case checks its statuses (all 200, or all 429
//! after the first).
//!
//! Two measures per case: requests per second (wall clock), and the CPU
//! time the server's process spent per request (summed over its threads
//! from `/proc/self/task/*/schedstat`, on Linux; the load generator's
//! process is not counted: a deployment's clients are elsewhere, and
//! parsing the answers is not the server's cost). Throughput swings by a
//! third between rounds on a shared 2-core machine, because other
//! processes take the cores; the CPU time per request moves far less,
//! since it counts only the time the server ran. So the summary's ratios
//! are CPU-based, the throughput ratios a saturated machine of our own
//! would show (the wall-clock ratios are printed beside them):
//! * `ours_vs_none`, `keyed_vs_none`: the layer as configured by default,
//!   rate-limit headers included;
//! * `ours_vs_tower_governor`: the two keyed layers, each with its
//!   rate-limit headers (tower_governor's `use_headers`), so both tell the
//!   client what is left; `ours_vs_tower_governor_nohdr`: both without
//!   headers (tower_governor's default), so both send the same bytes;
//! * `reject_vs_allow`: the 429 path over the admitting one;
//! * `redis_vs_none` is wall-clock: most of its cost is the redis-server's
//!   CPU, another process's.
//!
//! * `shadow_vs_rules`, `topkeys_vs_rules`, `topkeys_shadow_vs_shadow`
//!   (printed beside the summary): what shadow refusals cost over the
//!   plain rule set's admissions, what the top-keys summary costs on the
//!   admit path, and what recording each refusal in it costs.
//!
//! * `delay_1k_vs_async`, `delay_10k_vs_async`: the achieved rate of the
//!   delay-mode rows (200s over the permits the quota allows in the
//!   elapsed time) over `AsyncLimiter`'s achieved rate at the same rate,
//!   median over rounds (1.0: paces as well).
//!
//! `--delay-only` runs only the delay rows and `AsyncLimiter`'s reference,
//! interleaved, and prints `http delay delay_1k_vs_async=R delay_10k_vs_async=R`.
//!
//! `--only NAME` runs one case alone and prints its exact request count;
//! with `--requests N` each connection sends `N / connections` requests
//! and stops, whatever the time (`--conns C`: C connections).
//!
//! `--instructions [--requests N] [--conns C] [--workers W] [--repeat R]
//! [--before PATH]` is the deterministic form (valgrind's callgrind, user
//! space, the server's process only: valgrind does not follow the load
//! generator's process): for each in-memory case that answers at once, the
//! instructions of a `--only` run of 2N requests less those of a run of N,
//! over N (default 4,096), so setup cancels, whatever the machine's load
//! (counted from the load's start: the TSC clock's calibration before it
//! varies by millions of instructions, hundreds per request at N = 4,096);
//! by default over one connection to one server worker thread (the fewest
//! interleavings to vary), the median of 3 with their range; with
//! `--before`, the same for another build of this runner beside them. It
//! prints them and the same ratios as
//! `http instructions ours_vs_none=R keyed_vs_none=R ours_vs_tower_governor=R reject_vs_allow=R (...)`.
//! `--cases A,B` counts only those cases (and prints no ratios).
//!
//! The last line is the summary:
//! `http summary ours_vs_none=R keyed_vs_none=R ours_vs_tower_governor=R ours_vs_tower_governor_nohdr=R reject_vs_allow=R redis_vs_none=R p99_added_us=N delay_1k_vs_async=R delay_10k_vs_async=R`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use limiter_core::{MonotonicClock, Quota, RateLimiter};
use limiter_keyed::KeyedLimiter;
use limiter_redis::RedisLimiter;
use limiter_tower::{Global, Mode, PeerIp, RateLimitLayer, RedisBackend};
use tokio::net::TcpSocket;

use limiter_test_support::redis as redis_server;

/// Keep-alive connections of the load generator.
const CONNS: usize = 32;

/// Requests in flight in the delay rows, and consumers of `AsyncLimiter`'s
/// reference at the same rates: two, so a request is always queued behind
/// the one being held, as in any delay queue under load. With one, the
/// client's own round trip (about 44 µs on loopback) would sit inside every
/// 100 µs period at 10,000/s and the row would measure the client, which
/// `AsyncLimiter`'s loop has no counterpart of (docs/benchmarks.md).
const DELAY_DEPTH: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    None,
    NoopLayer,
    StaticHeaders,
    StaticReject,
    DecideStaticHeaders,
    Ours,
    OursBare,
    OursMonotonic,
    Keyed,
    KeyedBare,
    TowerGovernor,
    TowerGovernorHeaders,
    Reject,
    Redis,
    Delay1k,
    Delay10k,
    Rules,
    RulesShadow,
    RulesTopKeys,
    RulesShadowTopKeys,
}

impl Case {
    const ALL: [Case; 20] = [
        Case::None,
        Case::NoopLayer,
        Case::StaticHeaders,
        Case::StaticReject,
        Case::DecideStaticHeaders,
        Case::Ours,
        Case::OursBare,
        Case::OursMonotonic,
        Case::Keyed,
        Case::KeyedBare,
        Case::TowerGovernor,
        Case::TowerGovernorHeaders,
        Case::Reject,
        Case::Redis,
        Case::Delay1k,
        Case::Delay10k,
        Case::Rules,
        Case::RulesShadow,
        Case::RulesTopKeys,
        Case::RulesShadowTopKeys,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::None => "none",
            Case::NoopLayer => "noop_layer",
            Case::StaticHeaders => "static_headers",
            Case::StaticReject => "static_reject",
            Case::DecideStaticHeaders => "decide_static_headers",
            Case::Ours => "ours_global",
            Case::OursBare => "ours_global_nohdr",
            Case::OursMonotonic => "ours_global_monotonic",
            Case::Keyed => "ours_keyed_ip",
            Case::KeyedBare => "ours_keyed_ip_nohdr",
            Case::TowerGovernor => "tower_governor_ip",
            Case::TowerGovernorHeaders => "tower_governor_ip_hdr",
            Case::Reject => "ours_reject_all",
            Case::Redis => "ours_redis_ip",
            Case::Delay1k => "ours_delay_1k",
            Case::Delay10k => "ours_delay_10k",
            Case::Rules => "rules_keyed_ip",
            Case::RulesShadow => "rules_shadow_ip",
            Case::RulesTopKeys => "rules_topkeys_ip",
            Case::RulesShadowTopKeys => "rules_shadow_topkeys_ip",
        }
    }

    /// The paced rate of a delay-mode case.
    fn delay_rate(self) -> Option<u32> {
        match self {
            Case::Delay1k => Some(1_000),
            Case::Delay10k => Some(10_000),
            _ => None,
        }
    }

    /// Keep-alive connections of the load generator.
    fn conns(self) -> usize {
        if self.delay_rate().is_some() {
            DELAY_DEPTH
        } else {
            CONNS
        }
    }
}

/// Adds `ours_global`'s two rate-limit headers, byte for byte, as static
/// values (names and values constants: nothing is parsed or copied).
fn static_headers(mut response: axum::response::Response) -> axum::response::Response {
    const POLICY: http::HeaderName = http::HeaderName::from_static("ratelimit-policy");
    const ITEM: http::HeaderName = http::HeaderName::from_static("ratelimit");
    let headers = response.headers_mut();
    headers.insert(
        POLICY,
        http::HeaderValue::from_static("\"default\";q=1000000;w=1"),
    );
    headers.insert(
        ITEM,
        http::HeaderValue::from_static("\"default\";r=999999;t=1"),
    );
    response
}

/// The floor of a deciding layer that sends the two headers: governor's
/// decision on a global limiter (the cheapest decision `compare` measures,
/// on the TSC clock, with no headroom to compute) and then
/// [`static_headers`], through one response map. A refusal (the quota
/// never refuses here) would answer 429, which the status check catches.
fn decide_static_headers() -> tower::util::MapResponseLayer<
    impl Fn(axum::response::Response) -> axum::response::Response + Clone,
> {
    let burst = std::num::NonZeroU32::new(1_000_000).expect("not zero");
    let quota = governor::Quota::with_period(Duration::from_micros(1))
        .expect("a valid governor quota")
        .allow_burst(burst);
    let limiter = Arc::new(governor::RateLimiter::direct(quota));
    tower::util::MapResponseLayer::new(move |response: axum::response::Response| {
        let mut response = static_headers(response);
        if limiter.check().is_err() {
            *response.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
        }
        response
    })
}

/// The reject case's layer: one request per hour, so every request after
/// the first is refused.
fn rejecting() -> RateLimitLayer<RateLimiter, Global> {
    RateLimitLayer::new(
        RateLimiter::new(Quota::per_hour(1).expect("a valid quota")),
        Global,
    )
}

/// `ours_reject_all`'s 429, byte for byte: its status, headers and
/// problem document, as [`capture_reject`] took them from the layer.
static REJECTION: std::sync::OnceLock<(http::HeaderMap, Bytes)> = std::sync::OnceLock::new();

/// Takes one 429 from the reject case's layer (the second request to a
/// quota of one per hour) and keeps it in [`REJECTION`], for the floor
/// that sends the same bytes without deciding.
async fn capture_reject() {
    use tower::{Layer, ServiceExt};
    let layer = rejecting();
    let hello = tower::service_fn(|_: http::Request<axum::body::Body>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::from("hello")))
    });
    let service = layer.layer(hello);
    let request = || http::Request::new(axum::body::Body::empty());
    let first = service
        .clone()
        .oneshot(request())
        .await
        .expect("infallible");
    assert_eq!(first.status(), http::StatusCode::OK);
    let refused = service.oneshot(request()).await.expect("infallible");
    assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
    let (parts, body) = refused.into_parts();
    let body = body.collect().await.expect("a full body").to_bytes();
    let _ = REJECTION.set((parts.headers, body));
}

/// The floor of `ours_reject_all`: answers every request with its 429's
/// bytes (a clone of the captured headers and body) without deciding or
/// formatting, and without calling the route.
fn static_reject(
    _: http::Request<axum::body::Body>,
) -> std::future::Ready<Result<axum::response::Response, std::convert::Infallible>> {
    let (headers, body) = REJECTION.get().expect("captured before the app is built");
    let mut response = axum::response::Response::new(axum::body::Body::from(body.clone()));
    *response.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
    *response.headers_mut() = headers.clone();
    std::future::ready(Ok(response))
}

/// A delay-mode layer at `rate`/s, burst 1: every request held for its slot.
fn delayed(rate: u32) -> RateLimitLayer<RateLimiter, Global> {
    let quota = Quota::per_second(rate)
        .and_then(|q| q.with_burst(1))
        .expect("a valid quota");
    RateLimitLayer::builder(RateLimiter::new(quota), Global)
        .mode(Mode::Delay {
            max_delay: Duration::from_millis(100),
        })
        .build()
        .expect("valid options")
}

/// A quota that never limits this benchmark: a million permits per second
/// and a burst of a million (a tolerance of one second, so even a thread
/// descheduled between its clock reading and its decision is admitted).
fn unlimited() -> Quota {
    Quota::with_period(Duration::from_micros(1))
        .and_then(|q| q.with_burst(1_000_000))
        .expect("a valid quota")
}

fn app(case: Case, redis: Option<&RedisLimiter>) -> Router {
    let hello = Router::new().route("/", get(|| async { "hello" }));
    match case {
        Case::None => hello,
        // What axum's `Router::layer` costs whatever the layer: every route
        // becomes a boxed `Route` around the layer around the old `Route`,
        // so each request takes one more boxed call and its future, and
        // the layer's response is turned into axum's body.
        Case::NoopLayer => hello.layer(tower::layer::util::Identity::new()),
        // The floor of sending our two rate-limit headers: the same bytes
        // as `ours_global` sends, as static values (no formatting, no
        // allocation), inserted by a response map through `Router::layer`.
        Case::StaticHeaders => hello.layer(tower::util::MapResponseLayer::new(static_headers)),
        // The floor of the 429: the reject case's bytes sent through
        // `Router::layer` by a layer that neither decides nor formats
        // (headers cloned from the captured map, the body a shared
        // `Bytes`).
        Case::StaticReject => {
            hello.layer(tower::layer::layer_fn(|_| tower::service_fn(static_reject)))
        }
        // The layer as a user writes it: the limiter's default clock (the
        // TSC's, as governor's), headers on.
        // The floor of deciding and sending the headers: governor's
        // decision, our headers as static values.
        Case::DecideStaticHeaders => hello.layer(decide_static_headers()),
        Case::Ours => hello.layer(RateLimitLayer::new(RateLimiter::new(unlimited()), Global)),
        Case::OursBare => hello.layer(
            RateLimitLayer::builder(RateLimiter::new(unlimited()), Global)
                .without_headers()
                .build()
                .expect("valid options"),
        ),
        // The same on the OS monotonic clock (`Instant`): what a limiter
        // built without the `tsc` feature costs.
        Case::OursMonotonic => hello.layer(RateLimitLayer::new(
            RateLimiter::with_clock(unlimited(), MonotonicClock::new()),
            Global,
        )),
        Case::Keyed => hello.layer(RateLimitLayer::new(
            KeyedLimiter::<IpAddr>::new(unlimited()),
            PeerIp::new(),
        )),
        Case::KeyedBare => hello.layer(
            RateLimitLayer::builder(KeyedLimiter::<IpAddr>::new(unlimited()), PeerIp::new())
                .without_headers()
                .build()
                .expect("valid options"),
        ),
        Case::TowerGovernor => {
            let config = tower_governor::governor::GovernorConfigBuilder::default()
                .period(Duration::from_micros(1))
                .burst_size(1_000_000)
                .finish()
                .expect("a valid governor config");
            hello.layer(tower_governor::GovernorLayer::new(Arc::new(config)))
        }
        Case::TowerGovernorHeaders => {
            let config = tower_governor::governor::GovernorConfigBuilder::default()
                .period(Duration::from_micros(1))
                .burst_size(1_000_000)
                .use_headers()
                .finish()
                .expect("a valid governor config");
            hello.layer(tower_governor::GovernorLayer::new(Arc::new(config)))
        }
        // On `ours_global`'s clock, so that `reject_vs_allow` compares the
        // same layer's two answers.
        Case::Reject => hello.layer(rejecting()),
        Case::Redis => hello.layer(RateLimitLayer::new(
            RedisBackend::<IpAddr>::new(redis.expect("the Redis case has its server").clone()),
            PeerIp::new(),
        )),
        Case::Delay1k | Case::Delay10k => {
            hello.layer(delayed(case.delay_rate().expect("a delay case")))
        }
        Case::Rules => hello.layer(rules(NEVER_LIMITS).layer()),
        Case::RulesShadow => hello.layer(rules(SHADOW_REFUSES).layer()),
        Case::RulesTopKeys => {
            let rules = rules(NEVER_LIMITS);
            rules.record_top_keys();
            hello.layer(rules.layer())
        }
        Case::RulesShadowTopKeys => {
            let rules = rules(SHADOW_REFUSES);
            rules.record_top_keys();
            hello.layer(rules.layer())
        }
    }
}

/// One routed `per_ip` token bucket that never limits (as [`unlimited`]).
const NEVER_LIMITS: &str = "rate_limits:\n  per_client:\n    algorithm: token_bucket\n    rate: 1000000\n    burst: 1000000\n    per_ip: true\n    match: { route: \"/\" }\n";

/// The same rule at one per hour in shadow mode: every request after each
/// client's first is refused by the rule, counted, and let through.
const SHADOW_REFUSES: &str = "rate_limits:\n  per_client:\n    algorithm: token_bucket\n    rate: 1/h\n    burst: 1\n    per_ip: true\n    shadow: true\n    match: { route: \"/\" }\n";

/// The rules file `yaml`, loaded as limiter-config's `RuleSet`.
fn rules(yaml: &str) -> limiter_config::RuleSet {
    let dir = std::env::temp_dir().join(format!("http-compare-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("rules.yaml");
    std::fs::write(&path, yaml).expect("the rules file is written");
    let rules = limiter_config::RuleSet::load(&path).expect("the rules are valid");
    let _ = std::fs::remove_dir_all(&dir);
    rules
}

/// The CPU time this process has run, in ns: the sum over its threads of
/// the first field of `/proc/self/task/TID/schedstat`. 0 where that file is
/// missing (not Linux), which turns the CPU measures off.
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|task| {
            let path = task.ok()?.path().join("schedstat");
            let stat = std::fs::read_to_string(path).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// One case for one round.
#[derive(Debug, Clone, Copy)]
struct Round {
    /// Requests answered.
    requests: u64,
    /// Delay cases: 200s over the permits the quota allows in the elapsed
    /// time, percent.
    achieved_pct: f64,
    rps: f64,
    /// CPU µs of the whole process per request.
    cpu_us: f64,
    p99_us: f64,
    ok: u64,
    limited: u64,
    other: u64,
}

async fn run(
    case: Case,
    redis: Option<RedisLimiter>,
    time: Duration,
    requests: Option<u64>,
    conns: usize,
) -> Round {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local address");
    // Built here, before the load starts: a clock's calibration (the TSC's
    // varies from run to run) is setup, not a request's cost, and
    // `--instructions` counts from `load_process` on.
    if case == Case::StaticReject {
        capture_reject().await;
    }
    let router = app(case, redis.as_ref());
    let server = tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });
    let cpu_start = cpu_ns();
    let load = if case.delay_rate().is_some() {
        // The delay rows keep their load generator in this process: their
        // measure is the achieved rate, not the server's CPU.
        generate(addr, case.conns(), time, requests).await
    } else {
        tokio::task::spawn_blocking(move || load_process(addr, conns, time, requests))
            .await
            .expect("the load generator's thread")
    };
    let cpu = cpu_ns().saturating_sub(cpu_start) as f64;
    server.abort();
    let elapsed = load.elapsed_ns as f64 / 1e9;
    Round {
        requests: load.requests,
        achieved_pct: case.delay_rate().map_or(0.0, |rate| {
            100.0 * load.ok as f64 / (f64::from(rate) * elapsed + 1.0)
        }),
        rps: load.requests as f64 / elapsed,
        cpu_us: cpu / 1000.0 / load.requests.max(1) as f64,
        p99_us: load.p99_ns as f64 / 1000.0,
        ok: load.ok,
        limited: load.limited,
        other: load.other,
    }
}

/// What a load generator saw.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Load {
    /// Requests answered.
    requests: u64,
    /// Answers by status: 200, 429, anything else.
    ok: u64,
    limited: u64,
    other: u64,
    /// The 99th percentile of the latencies.
    p99_ns: u64,
    /// From before the first connection to the last answer.
    elapsed_ns: u64,
}

impl Load {
    /// The line a load process prints, read back by [`Load::parse`].
    fn line(&self) -> String {
        format!(
            "load requests={} ok={} limited={} other={} p99_ns={} elapsed_ns={}",
            self.requests, self.ok, self.limited, self.other, self.p99_ns, self.elapsed_ns
        )
    }

    fn parse(line: &str) -> Option<Load> {
        let mut load = Load::default();
        for field in line.strip_prefix("load ")?.split_whitespace() {
            let (name, value) = field.split_once('=')?;
            let value = value.parse().ok()?;
            match name {
                "requests" => load.requests = value,
                "ok" => load.ok = value,
                "limited" => load.limited = value,
                "other" => load.other = value,
                "p99_ns" => load.p99_ns = value,
                "elapsed_ns" => load.elapsed_ns = value,
                _ => return None,
            }
        }
        Some(load)
    }
}

/// `conns` keep-alive connections to `addr` sending back to back for
/// `time` or, when given, `requests` requests in all.
async fn generate(addr: SocketAddr, conns: usize, time: Duration, requests: Option<u64>) -> Load {
    let start = Instant::now();
    let deadline = start + time;
    let clients: Vec<_> = (0..conns)
        .map(|i| {
            let per_conn = requests.map(|n| n / conns as u64);
            tokio::spawn(client(addr, i, deadline, per_conn))
        })
        .collect();
    let mut latencies = Vec::new();
    let (mut ok, mut limited, mut other) = (0, 0, 0);
    for c in clients {
        let (lat, o, l, x) = c.await.expect("client task");
        latencies.extend(lat);
        ok += o;
        limited += l;
        other += x;
    }
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    latencies.sort_unstable();
    let p99_ns = latencies
        .get(latencies.len().saturating_sub(1) * 99 / 100)
        .copied()
        .unwrap_or(0);
    Load {
        requests: latencies.len() as u64,
        ok,
        limited,
        other,
        p99_ns,
        elapsed_ns,
    }
}

/// [`generate`] in a process of its own (this binary with `--load`, on its
/// own 2-thread runtime), so the server's process counts only the
/// server's CPU time and instructions: a deployment's clients are
/// elsewhere, and parsing the answers is not the server's cost.
///
/// Never inlined: `--instructions` counts the server's instructions from
/// the call of this function on (callgrind's `--zero-before`), so the setup
/// before it (the router, a clock's calibration, whose length varies from
/// run to run) is not counted.
#[inline(never)]
fn load_process(addr: SocketAddr, conns: usize, time: Duration, requests: Option<u64>) -> Load {
    let exe = std::env::current_exe().expect("this binary");
    let mut command = std::process::Command::new(exe);
    command
        .arg("--load")
        .arg(addr.to_string())
        .arg(conns.to_string())
        .arg(time.as_millis().to_string());
    if let Some(n) = requests {
        command.arg(n.to_string());
    }
    let output = command.output().expect("the load generator runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().find_map(Load::parse).unwrap_or_else(|| {
        panic!(
            "the load generator's line: {stdout} {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// `--load ADDR CONNS MILLIS [REQUESTS]`: the load generator's process.
fn load_main(args: &[String]) {
    let arg = |i: usize| args.get(i).map(String::as_str);
    let addr: SocketAddr = arg(0).and_then(|a| a.parse().ok()).expect("--load ADDR");
    let conns: usize = arg(1)
        .and_then(|a| a.parse().ok())
        .expect("--load ADDR CONNS");
    let millis: u64 = arg(2)
        .and_then(|a| a.parse().ok())
        .expect("--load ADDR CONNS MILLIS");
    let requests = arg(3).and_then(|a| a.parse().ok());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let load = runtime.block_on(generate(
        addr,
        conns,
        Duration::from_millis(millis),
        requests,
    ));
    println!("{}", load.line());
}

/// One keep-alive connection from 127.0.0.(i % 64 + 1), until `deadline`
/// or, when given, for `requests` requests: latencies in ns and counts of
/// 200, 429 and anything else.
async fn client(
    addr: SocketAddr,
    i: usize,
    deadline: Instant,
    requests: Option<u64>,
) -> (Vec<u64>, u64, u64, u64) {
    let local = Ipv4Addr::new(127, 0, 0, (i % 64 + 1) as u8);
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(IpAddr::V4(local), 0))
        .expect("bind a loopback address");
    let stream = socket.connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let (mut lat, mut ok, mut limited, mut other) = (Vec::with_capacity(100_000), 0, 0, 0);
    let uri: http::Uri = format!("http://{addr}/").parse().expect("uri");
    loop {
        let done = match requests {
            Some(n) => lat.len() as u64 >= n,
            None => Instant::now() >= deadline,
        };
        if done {
            break;
        }
        let request = http::Request::get(uri.clone())
            .header(http::header::HOST, "bench")
            .body(Empty::<Bytes>::new())
            .expect("request");
        let sent = Instant::now();
        let Ok(response) = sender.send_request(request).await else {
            break;
        };
        match response.status().as_u16() {
            200 => ok += 1,
            429 => limited += 1,
            _ => other += 1,
        }
        let _ = response.into_body().collect().await;
        lat.push(sent.elapsed().as_nanos() as u64);
    }
    (lat, ok, limited, other)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The value after `flag` on the command line.
fn arg_value<T: std::str::FromStr>(args: &[String], flag: &str) -> Option<T> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1)?.parse().ok()
}

/// The floors' line: what any layer through axum's `Router::layer` costs,
/// and ours over them, from `ratio` (capacity, a over b).
fn print_floors(ratio: &dyn Fn(Case, Case) -> f64) {
    println!(
        "floors through Router::layer: noop_vs_none={:.3} static_headers_vs_none={:.3} decide_static_headers_vs_none={:.3} static_reject_vs_static_headers={:.3}; the layer over them: ours_vs_static_headers={:.3} ours_vs_decide_static_headers={:.3} keyed_vs_static_headers={:.3} ours_nohdr_vs_noop={:.3} keyed_nohdr_vs_noop={:.3} reject_vs_static_reject={:.3}",
        ratio(Case::NoopLayer, Case::None),
        ratio(Case::StaticHeaders, Case::None),
        ratio(Case::DecideStaticHeaders, Case::None),
        ratio(Case::StaticReject, Case::StaticHeaders),
        ratio(Case::Ours, Case::StaticHeaders),
        ratio(Case::Ours, Case::DecideStaticHeaders),
        ratio(Case::Keyed, Case::StaticHeaders),
        ratio(Case::OursBare, Case::NoopLayer),
        ratio(Case::KeyedBare, Case::NoopLayer),
        ratio(Case::Reject, Case::StaticReject),
    );
}

/// `--instructions`' defaults: connections and server worker threads.
const INSTRUCTION_CONNS: usize = 1;
const INSTRUCTION_WORKERS: usize = 1;

/// The cases counted by `--instructions`: every in-memory case that
/// answers at once (the delay rows wait, the Redis row's work is mostly
/// redis-server's).
const COUNTED: [Case; 15] = [
    Case::None,
    Case::NoopLayer,
    Case::StaticHeaders,
    Case::StaticReject,
    Case::DecideStaticHeaders,
    Case::Ours,
    Case::OursBare,
    Case::OursMonotonic,
    Case::Keyed,
    Case::KeyedBare,
    Case::TowerGovernor,
    Case::TowerGovernorHeaders,
    Case::Reject,
    Case::Rules,
    Case::RulesShadow,
];

/// How `--instructions` measures: the binary under valgrind (this one, or
/// `--before PATH`, a build of other sources with this runner), requests,
/// connections, server worker threads, and repeats (the median is kept).
#[derive(Debug, Clone)]
struct Counting {
    requests: u64,
    conns: usize,
    workers: usize,
    repeat: usize,
    /// `--cases`: the cases to count (all of [`COUNTED`] when empty).
    cases: Vec<Case>,
}

/// The server process's instructions (callgrind, user space) for `case`
/// answering `requests` requests: `binary` with `--only` under valgrind;
/// its load generator is a child process, which valgrind does not follow,
/// so it is not counted.
fn callgrind(binary: &std::path::Path, case: Case, requests: u64, how: &Counting) -> u64 {
    let out = std::env::temp_dir().join(format!(
        "http-compare-{}-{}-{requests}.callgrind",
        std::process::id(),
        case.name()
    ));
    let status = std::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        // Setup before the load is not counted: see `load_process`.
        .arg("--zero-before=http_compare::load_process")
        .arg(binary)
        .args(["--only", case.name()])
        .args(["--requests", &requests.to_string()])
        .args(["--conns", &how.conns.to_string()])
        .args(["--workers", &how.workers.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("valgrind runs (apt-get install valgrind)");
    assert!(
        status.success(),
        "valgrind {} failed: {status}",
        case.name()
    );
    let text = std::fs::read_to_string(&out).expect("callgrind's output");
    let _ = std::fs::remove_file(&out);
    // `totals:` (the last dump, from the zeroing on) before `summary:`
    // (the whole run, setup included), which comes first in the file.
    let count = |prefix: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(prefix))
            .and_then(|n| n.trim().parse().ok())
    };
    count("totals:")
        .or_else(|| count("summary:"))
        .expect("callgrind's totals line")
}

/// Instructions per request of `case` in `binary`: the count of a run of
/// `2N` requests less that of `N`, over `N`, so setup cancels; the median
/// of `repeat` such differences, and their range.
fn per_request(binary: &std::path::Path, case: Case, how: &Counting) -> (f64, f64, f64) {
    let n = how.requests;
    let samples: Vec<f64> = (0..how.repeat.max(1))
        .map(|_| {
            let one = callgrind(binary, case, n, how);
            let two = callgrind(binary, case, 2 * n, how);
            two.saturating_sub(one) as f64 / n as f64
        })
        .collect();
    let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = samples.iter().copied().fold(0.0, f64::max);
    (median(samples), lo, hi)
}

/// `--instructions`: the server's instructions per request of every
/// [`COUNTED`] case, deterministic in the request count (not the time);
/// with `--before PATH`, the same of that binary beside them. Prints a
/// table and the `http instructions` line.
fn instructions(how: &Counting, before: Option<std::path::PathBuf>) {
    let this = std::env::current_exe().expect("this binary");
    println!(
        "http_compare --instructions: the server's process only ({} worker threads), callgrind, (Ir({}) - Ir({})) / {}, median of {}, {} connections",
        how.workers,
        2 * how.requests,
        how.requests,
        how.requests,
        how.repeat,
        how.conns
    );
    let mut after = [0.0; Case::ALL.len()];
    let only = |case: &Case| how.cases.is_empty() || how.cases.contains(case);
    for case in COUNTED.into_iter().filter(only) {
        let (n, lo, hi) = per_request(&this, case, how);
        after[case as usize] = n;
        match &before {
            Some(path) => {
                let (b, blo, bhi) = per_request(path, case, how);
                println!(
                    "  {:<24} before {b:>7.0} ({blo:.0}-{bhi:.0})  after {n:>7.0} ({lo:.0}-{hi:.0})  change {:>+6.0}",
                    case.name(),
                    n - b
                );
            }
            None => println!(
                "  {:<24} {n:>7.0} instructions per request ({lo:.0}-{hi:.0})",
                case.name()
            ),
        }
    }
    if !how.cases.is_empty() {
        return;
    }
    let ratio = |a: Case, b: Case| after[b as usize] / after[a as usize];
    print_floors(&ratio);
    println!(
        "http instructions ours_vs_none={:.3} keyed_vs_none={:.3} ours_vs_tower_governor={:.3} reject_vs_allow={:.3} (nohdr: ours_vs_none={:.3} keyed_vs_none={:.3} ours_vs_tower_governor={:.3}; rules_vs_none={:.3})",
        ratio(Case::Ours, Case::None),
        ratio(Case::Keyed, Case::None),
        ratio(Case::Keyed, Case::TowerGovernorHeaders),
        ratio(Case::Reject, Case::Ours),
        ratio(Case::OursBare, Case::None),
        ratio(Case::KeyedBare, Case::None),
        ratio(Case::KeyedBare, Case::TowerGovernor),
        ratio(Case::Rules, Case::None),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == "--load") {
        return load_main(&args[2..]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let conns = arg_value(&args, "--conns").unwrap_or(CONNS);
    // The server runtime's worker threads (`--workers`, 2 by default).
    let workers = arg_value(&args, "--workers").unwrap_or(2);
    if args.iter().any(|a| a == "--instructions") {
        let how = Counting {
            requests: arg_value(&args, "--requests").unwrap_or(4_096),
            conns: arg_value(&args, "--conns").unwrap_or(INSTRUCTION_CONNS),
            workers: arg_value(&args, "--workers").unwrap_or(INSTRUCTION_WORKERS),
            repeat: arg_value(&args, "--repeat").unwrap_or(3),
            cases: arg_value::<String>(&args, "--cases")
                .map(|list| {
                    list.split(',')
                        .map(|name| {
                            Case::ALL
                                .into_iter()
                                .find(|c| c.name() == name)
                                .unwrap_or_else(|| panic!("--cases: no case {name}"))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        return instructions(&how, arg_value(&args, "--before"));
    }
    // `--only NAME`: that case alone (for profiling); no summary.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .and_then(|name| Case::ALL.into_iter().find(|c| c.name() == name));
    let (rounds, time) = if quick {
        (3, Duration::from_secs(1))
    } else {
        (11, Duration::from_secs(2))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    // The Redis case's server, started only when that case runs.
    // `--delay-only`: the delay rows and AsyncLimiter's reference alone.
    let delay_only = args.iter().any(|a| a == "--delay-only");
    let with_redis = !delay_only && only.is_none_or(|case| case == Case::Redis);
    let server = with_redis.then(redis_server::RedisServer::start);
    let redis = server.as_ref().map(|server| {
        runtime.block_on(async {
            RedisLimiter::builder(server.manager().await, unlimited())
                .key_prefix("http_compare")
                .build()
                .expect("a quota in whole microseconds")
        })
    });
    if let Some(case) = only {
        let requests = arg_value(&args, "--requests");
        let r = runtime.block_on(run(case, redis.clone(), time * 3, requests, conns));
        println!(
            "{} {:.0} req/s p99 {:.1} us requests={}",
            case.name(),
            r.rps,
            r.p99_us,
            r.requests
        );
        return;
    }
    println!(
        "http_compare: {rounds} interleaved rounds of {time:?} per case, {conns} keep-alive connections, the server on a 2-thread runtime, the load generator in its own process (2 threads)"
    );
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); Case::ALL.len()];
    // AsyncLimiter paced by DELAY_DEPTH consumers at each delay rate, once per round.
    let idle = limiter_benches::pacing_burst1::idle_cpu_per_second(Duration::from_millis(200));
    let mut paced: Vec<Vec<f64>> = vec![Vec::new(); 2];
    for round in 0..rounds {
        for (i, rate) in [1_000, 10_000].into_iter().enumerate() {
            let p = limiter_benches::pacing_burst1::run_precise_depth(
                &runtime,
                rate,
                time,
                idle,
                DELAY_DEPTH,
            );
            println!(
                "round {round} async_take_{:<9} {:>6.2} % of the rate  p99 late {:>7.1} us",
                if rate == 1_000 { "1k" } else { "10k" },
                p.achieved_pct,
                p.p99_late_us
            );
            paced[i].push(p.achieved_pct);
        }
        let mut order: Vec<Case> = Case::ALL
            .into_iter()
            .filter(|case| !delay_only || case.delay_rate().is_some())
            .collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for case in order {
            let i = case as usize;
            let r = runtime.block_on(run(case, redis.clone(), time, None, conns));
            println!(
                "round {round} {:<18} {:>9.0} req/s  {:>6.2} us cpu/req  p99 {:>7.1} us  200={} 429={} other={}{}",
                case.name(),
                r.rps,
                r.cpu_us,
                r.p99_us,
                r.ok,
                r.limited,
                r.other,
                if case.delay_rate().is_some() {
                    format!("  {:.2} % of the rate", r.achieved_pct)
                } else {
                    String::new()
                }
            );
            let expected = match case {
                Case::Reject => r.ok <= 1 && r.other == 0,
                Case::StaticReject => r.ok == 0 && r.other == 0,
                _ => r.limited == 0 && r.other == 0,
            };
            if !expected {
                println!("  WARNING: {} answered unexpected statuses", case.name());
            }
            results[i].push(r);
        }
    }
    let rps = |c: Case| median(results[c as usize].iter().map(|r| r.rps).collect());
    let p99 = |c: Case| median(results[c as usize].iter().map(|r| r.p99_us).collect());
    let cpu = |c: Case| median(results[c as usize].iter().map(|r| r.cpu_us).collect());
    let achieved = |c: Case| median(results[c as usize].iter().map(|r| r.achieved_pct).collect());
    let async_1k = median(paced[0].clone());
    let async_10k = median(paced[1].clone());
    let delay_line = || {
        println!(
            "delay mode at burst 1, {DELAY_DEPTH} in flight, achieved rate: 1k/s {:.2} % (AsyncLimiter {:.2} %), 10k/s {:.2} % (AsyncLimiter {:.2} %)",
            achieved(Case::Delay1k),
            async_1k,
            achieved(Case::Delay10k),
            async_10k,
        )
    };
    if delay_only {
        delay_line();
        println!(
            "http delay delay_1k_vs_async={:.3} delay_10k_vs_async={:.3}",
            achieved(Case::Delay1k) / async_1k,
            achieved(Case::Delay10k) / async_10k,
        );
        return;
    }
    println!("medians:");
    for case in Case::ALL {
        println!(
            "  {:<18} {:>9.0} req/s  {:>6.2} us cpu/req  p99 {:>7.1} us",
            case.name(),
            rps(case),
            cpu(case),
            p99(case)
        );
    }
    // Ratios of capacity, a over b: the median over rounds of each
    // round's ratio (the two cases ran minutes apart at most, so a slow
    // stretch of the machine moves both), from the server's CPU per
    // request (b's over a's), or from wall-clock throughput where the CPU
    // measure is off.
    let per_round = |a: Case, b: Case, f: fn(&Round, &Round) -> f64| {
        let (ra, rb) = (&results[a as usize], &results[b as usize]);
        median(ra.iter().zip(rb).map(|(x, y)| f(x, y)).collect())
    };
    let ratio = |a: Case, b: Case| {
        if cpu(a) > 0.0 {
            per_round(a, b, |x, y| y.cpu_us / x.cpu_us)
        } else {
            per_round(a, b, |x, y| x.rps / y.rps)
        }
    };
    let wall = |a: Case, b: Case| per_round(a, b, |x, y| x.rps / y.rps);
    println!(
        "wall-clock ratios: ours_vs_none={:.3} keyed_vs_none={:.3} ours_vs_tower_governor={:.3} reject_vs_allow={:.3} redis_vs_none={:.3}",
        wall(Case::Ours, Case::None),
        wall(Case::Keyed, Case::None),
        wall(Case::Keyed, Case::TowerGovernorHeaders),
        wall(Case::Reject, Case::Ours),
        wall(Case::Redis, Case::None),
    );
    println!(
        "without rate-limit headers: ours_vs_none={:.3} keyed_vs_none={:.3} ours_vs_tower_governor={:.3}",
        ratio(Case::OursBare, Case::None),
        ratio(Case::KeyedBare, Case::None),
        ratio(Case::KeyedBare, Case::TowerGovernor),
    );
    print_floors(&ratio);
    println!(
        "through limiter-config's rule set (one per_ip rule, headers): rules_vs_none={:.3} rules_vs_keyed={:.3}",
        ratio(Case::Rules, Case::None),
        ratio(Case::Rules, Case::Keyed),
    );
    println!(
        "operator controls on the rule set: shadow_vs_rules={:.3} topkeys_vs_rules={:.3} topkeys_shadow_vs_shadow={:.3} (wall clock {:.3} {:.3} {:.3})",
        ratio(Case::RulesShadow, Case::Rules),
        ratio(Case::RulesTopKeys, Case::Rules),
        ratio(Case::RulesShadowTopKeys, Case::RulesShadow),
        wall(Case::RulesShadow, Case::Rules),
        wall(Case::RulesTopKeys, Case::Rules),
        wall(Case::RulesShadowTopKeys, Case::RulesShadow),
    );
    println!(
        "for scale: seed 004's in-memory Gin middlewares 28,000-32,000 QPS and its Redis one 8,500 QPS on 4 cores; here on 2 cores shared with the load generator: ours {:.0}, keyed {:.0}, Redis {:.0} req/s",
        rps(Case::Ours),
        rps(Case::Keyed),
        rps(Case::Redis),
    );
    delay_line();
    println!(
        "http summary ours_vs_none={:.3} keyed_vs_none={:.3} ours_vs_tower_governor={:.3} ours_vs_tower_governor_nohdr={:.3} reject_vs_allow={:.3} redis_vs_none={:.3} p99_added_us={:.0} delay_1k_vs_async={:.3} delay_10k_vs_async={:.3}",
        ratio(Case::Ours, Case::None),
        ratio(Case::Keyed, Case::None),
        // Like for like: both keyed per IP, each telling the client what
        // is left in its headers (the summary's other ratios have headers
        // on too).
        ratio(Case::Keyed, Case::TowerGovernorHeaders),
        // Both keyed per IP, neither writing headers (tower_governor's
        // default): the same bytes.
        ratio(Case::KeyedBare, Case::TowerGovernor),
        ratio(Case::Reject, Case::Ours),
        // Wall clock: most of a Redis request's cost is in redis-server,
        // another process, which this process's CPU time does not count.
        wall(Case::Redis, Case::None),
        p99(Case::Ours) - p99(Case::None),
        achieved(Case::Delay1k) / async_1k,
        achieved(Case::Delay10k) / async_10k,
    );
}
