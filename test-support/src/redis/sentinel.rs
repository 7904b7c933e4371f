//! A private Redis Sentinel deployment per test: a master and one replica
//! (`redis-server`, through [`RedisServer`]) and three `redis-sentinel`
//! processes (Debian's `redis-sentinel` package; `scripts/test-all`
//! installs it) monitoring the master as `mymaster` with a quorum of 2, on
//! free loopback ports, their config files in a temporary directory; all
//! killed and the directory removed on drop, also when the test fails.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::RedisServer;
use crate::free_port;

/// The master's name the sentinels monitor.
pub const MASTER: &str = "mymaster";

/// A running Sentinel deployment owned by the test.
#[derive(Debug)]
pub struct RedisSentinels {
    /// The master `mymaster` at the start.
    pub master: RedisServer,
    /// Its replica.
    pub replica: RedisServer,
    dir: PathBuf,
    sentinels: Vec<(u16, Option<Child>)>,
    /// The sentinels' `requirepass`, if any.
    sentinel_password: Option<String>,
}

impl RedisSentinels {
    /// Starts the master, the replica (waiting until it is in sync) and
    /// three sentinels, and waits until every sentinel knows the replica
    /// and the other sentinels (so a failover can be asked of any).
    /// `server_args` go to both data servers (ACL users, TLS; their
    /// `default` user must stay without a password, for the sentinels and
    /// the replication), and the sentinels require `sentinel_password` if
    /// given (which they also use with each other).
    pub fn start(server_args: &[String], sentinel_password: Option<&str>) -> RedisSentinels {
        let master = RedisServer::start_with(|| server_args.to_vec());
        let master_port = master.port().to_string();
        let replica = RedisServer::start_with(|| {
            let mut args = server_args.to_vec();
            args.extend([
                "--replicaof".into(),
                "127.0.0.1".into(),
                master_port.clone(),
            ]);
            args
        });
        let dir = std::env::temp_dir().join(format!(
            "limiter-redis-sentinel-{}-{}",
            std::process::id(),
            master.port()
        ));
        std::fs::create_dir_all(&dir).expect("sentinel temp dir");
        let mut deployment = RedisSentinels {
            master,
            replica,
            dir,
            sentinels: Vec::new(),
            sentinel_password: sentinel_password.map(str::to_owned),
        };
        let sentinel_conf = sentinel_password.map_or(String::new(), |p| format!("requirepass {p}"));
        deployment.wait_for(Duration::from_secs(20), "the replica in sync", |d| {
            d.info(d.replica.port(), "replication")
                .contains("master_link_status:up")
        });
        for i in 0..3 {
            let port = deployment.spawn_sentinel(i, &sentinel_conf);
            deployment.sentinels.push(port);
        }
        deployment.wait_for(
            Duration::from_secs(30),
            "the sentinels to know everyone",
            |d| {
                d.sentinel_ports().iter().all(|&p| {
                    let master = d.sentinel_cmd(p, &format!("SENTINEL MASTER {MASTER}"));
                    field(&master, "num-other-sentinels") == Some("2")
                        && field(&master, "num-slaves") == Some("1")
                        && field(&master, "flags") == Some("master")
                })
            },
        );
        deployment
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|(p, _)| *p).collect()
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`.
    pub fn sentinel_list(&self) -> String {
        self.sentinel_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The master's port as the first sentinel reports it now.
    pub fn reported_master_port(&self) -> Option<u16> {
        let reply = self.sentinel_cmd(
            self.sentinels[0].0,
            &format!("SENTINEL GET-MASTER-ADDR-BY-NAME {MASTER}"),
        );
        // *2 $9 127.0.0.1 $N PORT
        reply.lines().nth(4).and_then(|p| p.trim().parse().ok())
    }

    /// Asks the first sentinel to fail over now (the replica becomes the
    /// master, the master its replica).
    pub fn failover(&self) {
        let reply = self.sentinel_cmd(self.sentinels[0].0, &format!("SENTINEL FAILOVER {MASTER}"));
        assert!(reply.starts_with("+OK"), "SENTINEL FAILOVER: {reply:?}");
    }

    /// `INFO section` of the data server on `port` (through its plain port,
    /// with the `default` user, which the tests leave without a password).
    pub fn info(&self, port: u16, section: &str) -> String {
        raw(port, &format!("INFO {section}"))
    }

    /// One inline command to the data server on `port` (as `default`); its
    /// raw reply.
    pub fn server_cmd(&self, port: u16, command: &str) -> String {
        raw(port, command)
    }

    /// One inline command to the sentinel on `port` (after `AUTH` when the
    /// sentinels require a password); its raw reply.
    pub fn sentinel_cmd(&self, port: u16, command: &str) -> String {
        match &self.sentinel_password {
            None => raw(port, command),
            Some(p) => {
                let reply = raw(port, &format!("AUTH {p}\r\n{command}"));
                reply.strip_prefix("+OK\r\n").unwrap_or(&reply).to_owned()
            }
        }
    }

    /// Polls `done` every 50 ms until it holds; panics after `limit`.
    pub fn wait_for(&self, limit: Duration, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !done(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn spawn_sentinel(&self, i: usize, extra: &str) -> (u16, Option<Child>) {
        for _ in 0..5 {
            let port = free_port();
            let conf = self.dir.join(format!("sentinel-{i}.conf"));
            let text = format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
                 sentinel monitor {MASTER} 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 10000\n{extra}\n",
                dir = self.dir.display(),
                master = self.master.port(),
            );
            std::fs::write(&conf, text).expect("sentinel config");
            let mut child = Command::new("redis-sentinel")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-sentinel (is it installed? see scripts/test-all)");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken meanwhile
                }
                let pid = format!("process_id:{}\r\n", child.id());
                if self.sentinel_cmd(port, "INFO server").contains(&pid) {
                    return (port, Some(child));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start redis-sentinel");
    }
}

impl Drop for RedisSentinels {
    fn drop(&mut self) {
        for (_, child) in &mut self.sentinels {
            if let Some(mut c) = child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The value of `name` in a reply of name/value bulk strings
/// (`SENTINEL MASTER`): `$N name $M value`.
fn field<'r>(reply: &'r str, name: &str) -> Option<&'r str> {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    let i = lines.iter().position(|l| *l == name)?;
    lines.get(i + 2).copied()
}

/// One inline command over plain TCP to `127.0.0.1:port`; the raw reply
/// (empty when nothing answers within 500 ms).
fn raw(port: u16, command: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream
        .write_all(format!("{command}\r\n").as_bytes())
        .is_err()
    {
        return String::new();
    }
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    // A reply is complete when the socket goes quiet (the read times out).
    while let Ok(read) = stream.read(&mut buf) {
        if read == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..read]);
        let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    }
    String::from_utf8_lossy(&seen).into_owned()
}
