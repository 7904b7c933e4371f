//! A private `redis-server` per test: a free port on 127.0.0.1, no
//! persistence, killed on drop. Never the system server on 6379. Also the
//! two servers that fail: a port nobody listens on ([`free_port`]) and a
//! [`blackhole`] that accepts and never answers, with a [`lazy`] connection
//! to either.

pub mod cluster;
pub mod sentinel;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use limiter_redis::{RedisConnection, RedisLimitError, Source};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// The fields of a [`RedisLimitError::RateLimited`] denial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    /// When a retry may succeed.
    pub retry_after: Duration,
    /// When the key is full again.
    pub reset_after: Duration,
    /// Permits left.
    pub remaining: u32,
    /// Which limit denied.
    pub source: Source,
}

/// The denial in `result`; panics (failing the test) on a grant or on any
/// other error. Also checks that `retry_after()` reports the same wait.
#[track_caller]
pub fn denied<T: std::fmt::Debug>(result: Result<T, RedisLimitError>) -> Denial {
    match result {
        Err(
            ref e @ RedisLimitError::RateLimited {
                retry_after,
                reset_after,
                remaining,
                source,
            },
        ) => {
            assert_eq!(e.retry_after(), Some(retry_after));
            assert!(!e.is_unavailable());
            Denial {
                retry_after,
                reset_after,
                remaining,
                source,
            }
        }
        other => panic!("expected a RateLimited denial, got {other:?}"),
    }
}

/// A running `redis-server` owned by the test; killed when dropped.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
    /// Arguments beyond the port and the no-persistence defaults.
    extra: Vec<String>,
    /// `redis-server`, or another server that takes its arguments (Valkey).
    program: std::ffi::OsString,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        RedisServer::start_with(Vec::new)
    }

    /// [`start`](Self::start) with more arguments (`--replicaof`,
    /// `--tls-port`...), asked of `extra` for each attempt (a port it
    /// picks may be taken before the server binds it: the attempt is then
    /// made again).
    pub fn start_with(extra: impl Fn() -> Vec<String>) -> RedisServer {
        RedisServer::start_program("redis-server".as_ref(), extra)
    }

    /// [`start_with`](Self::start_with) running `program` (a
    /// `valkey-server`, which takes the same arguments).
    pub fn start_program(
        program: &std::ffi::OsStr,
        extra: impl Fn() -> Vec<String>,
    ) -> RedisServer {
        for _ in 0..5 {
            let port = free_port();
            let mut server = RedisServer {
                port,
                child: None,
                extra: extra(),
                program: program.to_owned(),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start redis-server (is it installed? see scripts/test-all)");
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (as a crash would: SIGKILL, no shutdown).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (after `kill`).
    pub fn restart(&mut self) {
        self.kill();
        for _ in 0..50 {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("could not restart redis-server on port {}", self.port);
    }

    /// A connection manager with short timeouts and few reconnect retries, so
    /// a dead server is noticed quickly.
    pub async fn manager(&self) -> ConnectionManager {
        let client = redis::Client::open(self.url()).expect("valid url");
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(200)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(50));
        ConnectionManager::new_with_config(client, config)
            .await
            .expect("connect to the test redis-server")
    }

    /// Runs one command on a fresh connection (for administration: PTTL,
    /// SCRIPT FLUSH, CLIENT PAUSE...).
    pub async fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let client = redis::Client::open(self.url()).expect("valid url");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("admin connection");
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query_async(&mut conn).await.expect("admin command")
    }

    fn spawn(&mut self) -> bool {
        let child = Command::new(&self.program)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", self.program));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                // Exited: most likely the port was taken meanwhile.
                self.child = None;
                return false;
            }
            let pid = self.child.as_ref().map_or(0, Child::id);
            if answers_as(self.port, pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

pub use crate::free_port;

/// A listener on a free port that accepts connections and never answers;
/// the sockets stay open until the test's runtime ends.
pub async fn blackhole() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind an ephemeral port");
    let port = listener.local_addr().expect("local addr").port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    port
}

/// A connection to `port` that connects on its first command (so it can be
/// made to a dead or blackholed port), with the redis crate's defaults.
pub fn lazy(port: u16) -> RedisConnection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("valid url");
    ConnectionManager::new_lazy_with_config(client, ConnectionManagerConfig::new())
        .expect("a lazy connection manager")
        .into()
}

/// Whether the server on `port` answers `PING` and is process `pid` (not
/// another test's server that took the port first).
fn answers_as(port: u16, pid: u32) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\nINFO server\r\n").is_err() {
        return false;
    }
    let wanted = format!("process_id:{pid}\r\n");
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(read) = stream.read(&mut buf) {
        if read == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..read]);
        let text = String::from_utf8_lossy(&seen);
        if text.starts_with("+PONG\r\n") && text.contains(&wanted) {
            return true;
        }
    }
    false
}
