//! Test support of the limiter workspace, shared by its tests and benches
//! as a dev-dependency (as tokio-test and tower-test are); never published.
//!
//! Every process it starts (redis-server, redis-sentinel, Envoy) listens on
//! a free loopback port, is killed by PID when its handle drops (also when
//! the test fails), and every temporary directory it makes is removed then.
//! Heavier helpers sit behind features, so a crate pulls in only what its
//! tests use:
//!
//! * always: [`model`] (the sequential GCRA reference), [`counting_alloc`],
//!   [`quiet`] (the client that finds answers held back by Nagle's
//!   algorithm), [`envoy`] and [`http1`] (a plain HTTP/1.1 client);
//! * `tokio`: `patience`, bounded waits on real time, and `chromium`,
//!   headless Chromium over a page;
//! * `redis`: `redis`, a private redis-server, cluster or Sentinel
//!   deployment;
//! * `tls`: `tls`, a test CA with server and client certificates;
//! * `otlp`: `otlp`, a real OTLP trace receiver (gRPC and HTTP).

pub mod counting_alloc;
pub mod envoy;
pub mod http1;
pub mod model;
pub mod quiet;

#[cfg(feature = "tokio")]
pub mod chromium;
#[cfg(feature = "otlp")]
pub mod otlp;
#[cfg(feature = "tokio")]
pub mod patience;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "tls")]
pub mod tls;

/// A free port on 127.0.0.1 (bound, then released): nobody listens on it,
/// so a connection to it is refused until someone binds it.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

/// A fresh directory under the system temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// Creates `<temp>/limiter-<name>-<pid>-<n>-<nanos>`, unique in this
    /// process and across runs.
    pub fn new(name: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // Relaxed: only uniqueness matters.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("limiter-{name}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// Writes `text` to `name` in the directory; returns its path.
    pub fn write(&self, name: &str, text: &str) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write a file in the temp dir");
        path
    }
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
