//! A private Redis Cluster per test: six `redis-server --cluster-enabled yes`
//! on free loopback ports (each port and its bus port, +10000), joined by
//! `redis-cli --cluster create --cluster-replicas 1 --cluster-yes` into three
//! masters with one replica each, in a temporary directory; killed and
//! removed on drop. `redis-cli` comes with Debian's `redis-server` package
//! (through `redis-tools`); `scripts/test-all` installs it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;

/// One node of the cluster as `CLUSTER NODES` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's id.
    pub id: String,
    /// Its client port.
    pub port: u16,
    /// Whether it is a master.
    pub master: bool,
    /// The master's id, for a replica.
    pub master_id: Option<String>,
    /// Slot ranges served, for a master.
    pub slots: Vec<(u16, u16)>,
}

/// A running cluster owned by the test.
#[derive(Debug)]
pub struct RedisCluster {
    dir: PathBuf,
    ports: Vec<u16>,
    children: Vec<Option<Child>>,
}

impl RedisCluster {
    /// Starts six nodes, creates the cluster and waits until every slot is
    /// served and every replica is in sync. Tries three times (a port found
    /// free can be taken before its server binds it).
    pub fn start() -> RedisCluster {
        for _ in 0..2 {
            if let Some(cluster) = RedisCluster::try_start() {
                return cluster;
            }
        }
        RedisCluster::try_start().expect("could not start a test cluster (see scripts/test-all)")
    }

    fn try_start() -> Option<RedisCluster> {
        let dir = std::env::temp_dir().join(format!(
            "limiter-redis-cluster-{}-{}",
            std::process::id(),
            seed()
        ));
        std::fs::create_dir_all(&dir).expect("cluster temp dir");
        let ports = free_port_pairs(6);
        let mut cluster = RedisCluster {
            dir,
            ports: ports.clone(),
            children: Vec::new(),
        };
        for &port in &ports {
            let child = cluster.spawn(port);
            cluster.children.push(Some(child));
        }
        for &port in &ports {
            if !within(Duration::from_secs(5), || ping(port)) {
                return None; // dropping `cluster` kills what started
            }
        }
        let mut create = Command::new(redis_cli());
        create.args(["--cluster", "create"]);
        for port in &ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        if !out.status.success() {
            eprintln!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            return None;
        }
        cluster.wait_healthy(Duration::from_secs(20));
        Some(cluster)
    }

    fn spawn(&self, port: u16) -> Child {
        let conf = self.dir.join(format!("nodes-{port}.conf"));
        Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", conf.to_str().expect("utf-8 path")])
            // A master is declared failed after 1 s without answers.
            .args(["--cluster-node-timeout", "1000"])
            // Any replica may be promoted, however long it was cut off.
            .args(["--cluster-replica-validity-factor", "0"])
            .args(["--repl-diskless-sync-delay", "0"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .args(["--dir", self.dir.to_str().expect("utf-8 path")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server (is it installed? see scripts/test-all)")
    }

    /// `redis://127.0.0.1:PORT/` of every node still running.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .zip(&self.children)
            .filter(|(_, c)| c.is_some())
            .map(|(p, _)| format!("redis://127.0.0.1:{p}/"))
            .collect()
    }

    /// A cluster connection with short timeouts, so a dead master is noticed
    /// quickly.
    pub async fn connection(&self) -> ClusterConnection {
        redis::cluster::ClusterClient::builder(self.urls())
            .connection_timeout(Duration::from_millis(200))
            .response_timeout(Duration::from_millis(500))
            .retries(3)
            .min_retry_wait(10)
            .max_retry_wait(100)
            .build()
            .expect("cluster client")
            .get_async_connection()
            .await
            .expect("connect to the test cluster")
    }

    /// The nodes as a live node sees them (failed nodes excluded).
    pub fn nodes(&self) -> Vec<NodeInfo> {
        let port = self.live_port();
        let text: String = admin(port, &["CLUSTER", "NODES"]).expect("CLUSTER NODES");
        parse_nodes(&text)
    }

    /// The port of a running node.
    fn live_port(&self) -> u16 {
        self.ports
            .iter()
            .zip(&self.children)
            .find(|(p, c)| c.is_some() && ping(**p))
            .map(|(p, _)| *p)
            .expect("a live node")
    }

    /// The master serving `slot`.
    pub fn master_of_slot(&self, slot: u16) -> NodeInfo {
        self.nodes()
            .into_iter()
            .find(|n| n.master && n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .expect("every slot has a master")
    }

    /// The replica of the master with `id`.
    pub fn replica_of(&self, id: &str) -> NodeInfo {
        self.nodes()
            .into_iter()
            .find(|n| n.master_id.as_deref() == Some(id))
            .expect("every master has a replica")
    }

    /// Kills the node on `port` (SIGKILL, as a crash).
    pub fn kill(&mut self, port: u16) {
        let i = self.ports.iter().position(|&p| p == port).expect("a node");
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until every slot is served by a live master, the state is `ok`
    /// on every live node, every live replica's link is up, and every live
    /// node's view has no master without slots. (Right after `--cluster
    /// create` a node can still list a fresh replica as a slotless master
    /// until gossip reaches it: a test counting masters would see six.)
    pub fn wait_healthy(&self, within: Duration) {
        let live: Vec<u16> = self
            .ports
            .iter()
            .zip(&self.children)
            .filter(|(_, c)| c.is_some())
            .map(|(p, _)| *p)
            .collect();
        wait_until(within, || {
            live.iter().all(|&p| {
                let info: String = admin(p, &["CLUSTER", "INFO"]).unwrap_or_default();
                let repl: String = admin(p, &["INFO", "replication"]).unwrap_or_default();
                let nodes: String = admin(p, &["CLUSTER", "NODES"]).unwrap_or_default();
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && (repl.contains("role:master") || repl.contains("master_link_status:up"))
                    && parse_nodes(&nodes)
                        .iter()
                        .all(|n| !n.master || !n.slots.is_empty())
            })
        });
    }

    /// Waits until the master on `port` has every write acknowledged by its
    /// replica (equal replication offsets).
    pub fn wait_replicated(&self, port: u16) {
        wait_until(Duration::from_secs(5), || {
            let repl: String = admin(port, &["INFO", "replication"]).unwrap_or_default();
            let field = |name: &str| {
                repl.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_owned())
            };
            let Some(master) = field("master_repl_offset:") else {
                return false;
            };
            field("slave0:").is_some_and(|s| s.contains(&format!("offset={master},")))
        });
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for child in self.children.iter_mut().filter_map(Option::take) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One admin command on a plain connection to the node on `port`.
pub fn admin<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut conn = client.get_connection_with_timeout(Duration::from_millis(500))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut conn)
}

/// The slot of `key` as the cluster computes it.
pub fn keyslot(port: u16, key: &str) -> u16 {
    admin(port, &["CLUSTER", "KEYSLOT", key]).expect("CLUSTER KEYSLOT")
}

fn parse_nodes(text: &str) -> Vec<NodeInfo> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 || f[2].contains("fail") {
                return None;
            }
            let port = f[1].split(['@', ':']).nth(1)?.parse().ok()?;
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|x| (x, x)),
                })
                .collect();
            Some(NodeInfo {
                id: f[0].to_owned(),
                port,
                master: f[2].contains("master"),
                master_id: (f[3] != "-").then(|| f[3].to_owned()),
                slots,
            })
        })
        .collect()
}

fn ping(port: u16) -> bool {
    admin::<String>(port, &["PING"]).is_ok_and(|p| p == "PONG")
}

/// Whether `ok()` holds within `limit`, polling every 50 ms.
fn within(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn wait_until(limit: Duration, ok: impl FnMut() -> bool) {
    assert!(
        within(limit, ok),
        "the test cluster did not get there within {limit:?}"
    );
}

/// `redis-cli` on the PATH, or next to `redis-server` (Debian puts both in
/// /usr/bin).
fn redis_cli() -> PathBuf {
    let on_path = Command::new("redis-cli")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if on_path {
        return PathBuf::from("redis-cli");
    }
    let fallback = PathBuf::from("/usr/bin/redis-cli");
    assert!(
        fallback.exists(),
        "redis-cli not found: install Debian's redis-tools (scripts/test-all does)"
    );
    fallback
}

fn seed() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// `count` ports `p` in 20000..30000 with `p` and `p + 10000` (the cluster
/// bus) both free right now.
fn free_port_pairs(count: usize) -> Vec<u16> {
    let mut state = (seed() as u64) ^ u64::from(std::process::id()).rotate_left(32);
    let mut ports: Vec<u16> = Vec::new();
    while ports.len() < count {
        // xorshift64: a different starting point per run and process.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let port = 20_000 + (state % 10_000) as u16;
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if !ports.contains(&port) && free(port) && free(port + 10_000) {
            ports.push(port);
        }
    }
    ports
}
