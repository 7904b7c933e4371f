//! Decisions per second and latency of `limiter-redis` against servers the
//! bench starts itself (never the system one): one `redis-server`, and a
//! local Redis Cluster of three masters and three replicas.
//!
//! Cases (each run for `REDIS_BENCH_SECS` seconds, default 1, in every one
//! of `REDIS_BENCH_ROUNDS` interleaved rounds, default 3; the table shows the
//! median round):
//!
//! * `single/N`, `cluster/N`: `try_acquire` with N concurrent tokio tasks
//!   (1, 16, 256) on 64 keys, every decision a script call (deny cache off,
//!   a quota that admits); `…/proc4`: four processes of 64 tasks each (this
//!   binary, re-run as a worker).
//! * `multi3` against `three_calls`: one 3-key `try_acquire_all` against
//!   three sequential `try_acquire`s, 16 tasks, one server.
//! * `plain`, `plain_nocache`, `two_tier`, `lease`: 64 tasks on one key,
//!   each deciding once per millisecond (about 50,000/s offered) against a
//!   quota of 10,000/s, burst 100; the two-tier cap and the lease sized for
//!   four instances (a quarter of the quota; 25 permits per lease): Redis
//!   calls per decision and latency.
//! * `failover`: after the table, each master that has a replica is killed
//!   under load (16 tasks on one key of it); what the promoted replica holds
//!   of the grants the old master acknowledged, and how long no decision
//!   came from Redis.
//! * `naive_token_bucket`: the usual HMGET/HSET float bucket script, one
//!   task, for comparison with `single/1`.
//!
//! `REDIS_BENCH_CASES=plain,lease` runs only the cases named (and no
//! failover). The summary line follows the table: `redis summary single_256_dps=N
//! cluster_256_dps=N multi3_vs_three_calls=R two_tier_redis_calls_per_decision=R`
//! (`multi3_vs_three_calls` is the time of one 3-key decision over the time
//! of three calls; below 1, the script is cheaper).

use limiter_test_support::redis as support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use limiter_core::Quota;
use limiter_redis::{Admission, RedisConnection, RedisLimitError, RedisLimiter, TwoTierLimiter};
use support::RedisServer;
use support::cluster::RedisCluster;

/// Latencies in buckets 1 % wide: bucket `b` holds `1.01^b` ns.
#[derive(Default, Clone)]
struct Histogram {
    buckets: BTreeMap<u32, u64>,
    count: u64,
}

impl Histogram {
    fn record(&mut self, d: Duration) {
        let ns = d.as_nanos().max(1) as f64;
        *self
            .buckets
            .entry((ns.ln() / 1.01f64.ln()) as u32)
            .or_default() += 1;
        self.count += 1;
    }

    fn merge(&mut self, other: &Histogram) {
        for (b, c) in &other.buckets {
            *self.buckets.entry(*b).or_default() += c;
        }
        self.count += other.count;
    }

    fn quantile_us(&self, q: f64) -> f64 {
        let target = (self.count as f64 * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, c) in &self.buckets {
            seen += c;
            if seen >= target {
                return 1.01f64.powi(*b as i32) / 1_000.0;
            }
        }
        0.0
    }

    fn encode(&self) -> String {
        let parts: Vec<String> = self
            .buckets
            .iter()
            .map(|(b, c)| format!("{b}:{c}"))
            .collect();
        parts.join(",")
    }

    fn decode(text: &str) -> Histogram {
        let mut h = Histogram::default();
        for part in text.split(',').filter(|p| !p.is_empty()) {
            let (b, c) = part.split_once(':').expect("bucket:count");
            let c: u64 = c.parse().expect("count");
            h.buckets.insert(b.parse().expect("bucket"), c);
            h.count += c;
        }
        h
    }
}

/// One case's result.
#[derive(Clone, Default)]
struct Outcome {
    dps: f64,
    hist: Histogram,
    calls_per_decision: f64,
    admitted_per_s: f64,
}

/// A decision either way; any other error stops the bench.
fn decided<T>(result: Result<T, RedisLimitError>) -> bool {
    match result {
        Ok(_) => true,
        Err(RedisLimitError::RateLimited { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

/// Runs `tasks` copies of `op(task)` for `secs`; decisions/s, latencies and
/// how many were admitted.
async fn drive<F, Fut>(tasks: usize, secs: f64, op: F) -> Outcome
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    drive_paced(tasks, secs, None, op).await
}

/// As [`drive`], each task sleeping `pace` between its decisions (an offered
/// load rather than a saturating one); latencies exclude the sleeps.
async fn drive_paced<F, Fut>(tasks: usize, secs: f64, pace: Option<Duration>, op: F) -> Outcome
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (op, stop) = (op.clone(), stop.clone());
        handles.push(tokio::spawn(async move {
            let mut hist = Histogram::default();
            let mut admitted = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                admitted += u64::from(op(task).await);
                hist.record(t0.elapsed());
                if let Some(pace) = pace {
                    tokio::time::sleep(pace).await;
                }
            }
            (hist, admitted)
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut hist = Histogram::default();
    let mut admitted = 0;
    for h in handles {
        let (h, a) = h.await.expect("bench task");
        hist.merge(&h);
        admitted += a;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Outcome {
        dps: hist.count as f64 / elapsed,
        admitted_per_s: admitted as f64 / elapsed,
        hist,
        calls_per_decision: 1.0,
    }
}

/// A quota that admits everything the bench can send: 1 µs, burst 1,000.
fn open_quota() -> Quota {
    Quota::with_period(Duration::from_micros(1))
        .unwrap()
        .with_burst(1_000)
        .unwrap()
}

async fn connect(urls: &[String]) -> RedisConnection {
    if urls.len() == 1 {
        let client = redis::Client::open(urls[0].as_str()).expect("url");
        RedisConnection::from(
            redis::aio::ConnectionManager::new(client)
                .await
                .expect("connect"),
        )
    } else {
        let client = redis::cluster::ClusterClient::new(urls.to_vec()).expect("cluster client");
        RedisConnection::from(
            client
                .get_async_connection()
                .await
                .expect("connect to the cluster"),
        )
    }
}

/// `try_acquire` on 64 keys with `tasks` tasks, every decision on Redis.
async fn spread(urls: &[String], tasks: usize, secs: f64) -> Outcome {
    let limiter = RedisLimiter::builder_with_connection(connect(urls).await, open_quota())
        .key_prefix("spread")
        .deny_cache(false)
        .build()
        .unwrap();
    drive(tasks, secs, move |task| {
        let limiter = limiter.clone();
        async move { decided(limiter.try_acquire(&format!("k{}", task % 64)).await) }
    })
    .await
}

/// Four worker processes of 64 tasks each.
fn processes(urls: &[String], secs: f64) -> Outcome {
    let exe = std::env::current_exe().expect("bench executable");
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .env("REDIS_BENCH_WORKER", urls.join(" "))
                .env("REDIS_BENCH_SECS", secs.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn a worker")
        })
        .collect();
    let mut total = Outcome::default();
    for child in children {
        let out = child.wait_with_output().expect("worker output");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("worker "))
            .expect("worker line");
        let mut fields = line.split_whitespace().skip(1);
        let dps: f64 = fields.next().and_then(|f| f.parse().ok()).expect("dps");
        total.dps += dps;
        total
            .hist
            .merge(&Histogram::decode(fields.next().unwrap_or("")));
    }
    total.calls_per_decision = 1.0;
    total.admitted_per_s = total.dps; // the quota admits everything
    total
}

async fn multi3(urls: &[String], secs: f64) -> Outcome {
    let limiter = RedisLimiter::builder_with_connection(connect(urls).await, open_quota())
        .key_prefix("multi")
        .build()
        .unwrap();
    let q = open_quota();
    drive(16, secs, move |task| {
        let limiter = limiter.clone();
        async move {
            let (a, b, c) = (
                format!("{{t{task}}}:user"),
                format!("{{t{task}}}:route"),
                format!("{{t{task}}}:global"),
            );
            decided(
                limiter
                    .try_acquire_all(&[(&a, q, 1), (&b, q, 1), (&c, q, 1)])
                    .await,
            )
        }
    })
    .await
}

async fn three_calls(urls: &[String], secs: f64) -> Outcome {
    let limiter = RedisLimiter::builder_with_connection(connect(urls).await, open_quota())
        .key_prefix("three")
        .deny_cache(false)
        .build()
        .unwrap();
    drive(16, secs, move |task| {
        let limiter = limiter.clone();
        async move {
            let mut all = true;
            for part in ["user", "route", "global"] {
                all &= decided(limiter.try_acquire(&format!("t{task}:{part}")).await);
            }
            all
        }
    })
    .await
}

/// The hot-key workload: 64 tasks on one key, each deciding once per
/// millisecond (about 50,000 decisions/s offered), against a quota of
/// 10,000/s, burst 100.
async fn tier(urls: &[String], mode: &str, secs: f64) -> Outcome {
    let quota = Quota::per_second(10_000).unwrap().with_burst(100).unwrap();
    let conn = connect(urls).await;
    let builder = RedisLimiter::builder_with_connection(conn, quota).key_prefix(mode);
    let (limiter, two_tier) = match mode {
        "plain" => (builder.build().unwrap(), None),
        "plain_nocache" => (builder.deny_cache(false).build().unwrap(), None),
        "lease" => (
            builder
                .lease(25, Duration::from_millis(10))
                .build()
                .unwrap(),
            None,
        ),
        "two_tier" => {
            let global = builder.build().unwrap();
            let cap = Quota::per_second(2_500).unwrap().with_burst(25).unwrap();
            (
                global.clone(),
                Some(Arc::new(TwoTierLimiter::new(global, cap).unwrap())),
            )
        }
        other => panic!("unknown mode {other}"),
    };
    let before = limiter.redis_calls();
    let counted = limiter.clone();
    let mut out = drive_paced(64, secs, Some(Duration::from_millis(1)), move |_| {
        let (limiter, two_tier) = (limiter.clone(), two_tier.clone());
        async move {
            match two_tier {
                Some(t) => decided(t.try_acquire("hot").await),
                None => decided::<Admission>(limiter.try_acquire("hot").await),
            }
        }
    })
    .await;
    out.calls_per_decision = (counted.redis_calls() - before) as f64 / out.hist.count as f64;
    out
}

async fn naive(urls: &[String], secs: f64) -> Outcome {
    const NAIVE_BUCKET: &str = r"
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local rate, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local tokens, ts = tonumber(b[1]) or cap, tonumber(b[2]) or now
tokens = math.min(cap, tokens + (now - ts) * rate)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('EXPIRE', KEYS[1], math.ceil(cap / rate) + 1)
return allowed
";
    let conn = connect(urls).await;
    let script = Arc::new(redis::Script::new(NAIVE_BUCKET));
    drive(1, secs, move |_| {
        let (mut conn, script) = (conn.clone(), script.clone());
        async move {
            let allowed: i64 = script
                .key("naive:k")
                .arg(1_000_000)
                .arg(1_000)
                .invoke_async(&mut conn)
                .await
                .expect("naive bucket");
            allowed == 1
        }
    })
    .await
}

/// Kills `master` under load on one of its keys; prints what the promoted
/// replica holds of what the old master acknowledged.
async fn failover(cluster: &mut RedisCluster, master: &support::cluster::NodeInfo) {
    use limiter_redis::{FailurePolicy, Source};
    use support::cluster::{admin, keyslot};
    let replica = cluster.replica_of(&master.id);
    let tag = (0..10_000)
        .map(|i| format!("{{f{i}}}"))
        .find(|t| {
            let slot = keyslot(master.port, t);
            master.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
        })
        .expect("a tag on the master");
    let key = format!("{tag}:k");
    let hour = Duration::from_secs(60); // one permit per minute: none refills meanwhile
    let quota = Quota::with_period(hour)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap();
    let client = redis::cluster::ClusterClient::builder(cluster.urls())
        .connection_timeout(Duration::from_millis(200))
        .response_timeout(Duration::from_millis(500))
        .retries(3)
        .build()
        .expect("cluster client");
    let limiter =
        RedisLimiter::builder_with_connection(client.get_async_connection().await.unwrap(), quota)
            .key_prefix("failover")
            .call_timeout(Duration::from_secs(1))
            .retry_interval(Duration::from_millis(100))
            .failure_policy(FailurePolicy::Local { share: 1.0 })
            .deny_cache(false)
            .build()
            .unwrap();
    let acked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let first_after = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let killed_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (limiter, key, acked, first_after, killed_at, stop) = (
            limiter.clone(),
            key.clone(),
            acked.clone(),
            first_after.clone(),
            killed_at.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match limiter.try_acquire(&key).await {
                    Ok(a) if a.source == Source::Redis => {
                        acked.fetch_add(1, Ordering::Relaxed);
                        if killed_at.lock().unwrap().is_some() {
                            first_after.lock().unwrap().get_or_insert_with(Instant::now);
                        }
                    }
                    _ => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let failures = limiter.redis_failures();
    tokio::task::block_in_place(|| cluster.kill(master.port));
    *killed_at.lock().unwrap() = Some(Instant::now());
    while first_after.lock().unwrap().is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rk = limiter.redis_key(&key);
    let (tat, time): (String, Vec<String>) = (
        admin(replica.port, &["GET", &rk]).unwrap(),
        admin(replica.port, &["TIME"]).unwrap(),
    );
    let now_us = time[0].parse::<i64>().unwrap() * 1_000_000 + time[1].parse::<i64>().unwrap();
    let t_us = hour.as_micros() as i64;
    let held = (tat.parse::<i64>().unwrap() - now_us + t_us - 1) / t_us;
    let acked = acked.load(Ordering::Relaxed) as i64;
    let outage = first_after.lock().unwrap().unwrap() - killed_at.lock().unwrap().unwrap();
    println!(
        "failover: acknowledged {acked}, promoted replica holds {held}, lost {} (negative: failed calls that were applied), \
         failed calls {}, no Redis decision for {} ms",
        acked - held,
        limiter.redis_failures() - failures,
        outage.as_millis()
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let secs = env_f64("REDIS_BENCH_SECS", 1.0);
    if let Ok(urls) = std::env::var("REDIS_BENCH_WORKER") {
        let urls: Vec<String> = urls.split(' ').map(str::to_owned).collect();
        let out = runtime().block_on(spread(&urls, 64, secs));
        println!("worker {} {}", out.dps, out.hist.encode());
        return;
    }
    let rounds = env_f64("REDIS_BENCH_ROUNDS", 3.0) as usize;
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let single = vec![server.url()];
    let nodes = cluster.urls();
    let rt = runtime();
    let cases: Vec<&str> = vec![
        "single/1",
        "single/16",
        "single/256",
        "single/proc4",
        "cluster/1",
        "cluster/16",
        "cluster/256",
        "cluster/proc4",
        "multi3",
        "three_calls",
        "plain",
        "plain_nocache",
        "two_tier",
        "lease",
        "naive_token_bucket",
    ];
    // REDIS_BENCH_CASES=a,b runs only those cases (and no failover).
    let only = std::env::var("REDIS_BENCH_CASES").ok();
    let cases: Vec<&str> = match &only {
        Some(list) => cases
            .into_iter()
            .filter(|c| list.split(',').any(|l| l == *c))
            .collect(),
        None => cases,
    };
    let mut results: BTreeMap<&str, Vec<Outcome>> = BTreeMap::new();
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        for &case in &cases {
            let urls = if case.starts_with("cluster") {
                &nodes
            } else {
                &single
            };
            let out = match case.split_once('/') {
                Some((_, "proc4")) => processes(urls, secs),
                Some((_, n)) => rt.block_on(spread(urls, n.parse().unwrap(), secs)),
                None => match case {
                    "multi3" => rt.block_on(multi3(urls, secs)),
                    "three_calls" => rt.block_on(three_calls(urls, secs)),
                    "naive_token_bucket" => rt.block_on(naive(urls, secs)),
                    mode => rt.block_on(tier(urls, mode, secs)),
                },
            };
            results.entry(case).or_default().push(out);
        }
    }
    let median = |case: &str| -> Outcome {
        let Some(runs) = results.get(case) else {
            return Outcome::default();
        };
        let mut runs = runs.clone();
        runs.sort_by(|a, b| a.dps.total_cmp(&b.dps));
        runs[runs.len() / 2].clone()
    };
    println!("| case | decisions/s | p50 µs | p99 µs | Redis calls/decision | admitted/s |");
    println!("|---|---|---|---|---|---|");
    for &case in &cases {
        let m = median(case);
        println!(
            "| {case} | {:.0} | {:.1} | {:.1} | {:.3} | {:.0} |",
            m.dps,
            m.hist.quantile_us(0.5),
            m.hist.quantile_us(0.99),
            m.calls_per_decision,
            m.admitted_per_s
        );
    }
    // Interleaved rounds: the ratio of each round's pair, then the median.
    let none = Vec::new();
    let mut ratios: Vec<f64> = results
        .get("multi3")
        .unwrap_or(&none)
        .iter()
        .zip(results.get("three_calls").unwrap_or(&none))
        .map(|(m, t)| t.dps / m.dps)
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios.push(f64::NAN); // when the pair did not run
    println!(
        "redis summary single_256_dps={:.0} cluster_256_dps={:.0} multi3_vs_three_calls={:.2} two_tier_redis_calls_per_decision={:.3}",
        median("single/256").dps,
        median("cluster/256").dps,
        ratios[(ratios.len() - 1) / 2],
        median("two_tier").calls_per_decision
    );
    if only.is_some() {
        return;
    }
    let mut cluster = cluster;
    let masters: Vec<_> = cluster.nodes().into_iter().filter(|n| n.master).collect();
    for master in masters.iter().take(2) {
        rt.block_on(failover(&mut cluster, master));
        cluster.wait_healthy(Duration::from_secs(20));
    }
    drop(cluster);
    drop(server);
}
