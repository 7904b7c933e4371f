//! A real OTLP trace receiver (`python/otlp_receiver.py`, built from
//! PyPI's opentelemetry-proto and grpcio) taking OTLP/gRPC and OTLP/HTTP
//! protobuf, and the spans it received as JSON values.
//!
//! The python is `LIMITER_OTLP_PYTHON` (or the older
//! `LIMITER_RLS_OTLP_PYTHON`), else `target/otlp-venv/bin/python` of the
//! workspace (scripts/test-all makes it). Without either the test fails
//! with the command that installs it: it never skips.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The python that runs the receiver.
fn python() -> PathBuf {
    for var in ["LIMITER_OTLP_PYTHON", "LIMITER_RLS_OTLP_PYTHON"] {
        if let Some(p) = std::env::var_os(var) {
            return p.into();
        }
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/otlp-venv/bin/python");
    assert!(
        venv.is_file(),
        "no OTLP receiver python: run `python3 -m venv target/otlp-venv && \
         target/otlp-venv/bin/pip install opentelemetry-proto grpcio` and set \
         LIMITER_OTLP_PYTHON=$PWD/target/otlp-venv/bin/python"
    );
    venv
}

/// The receiver process, killed by PID when dropped; its spans file lives
/// in its own temporary directory, removed then too.
#[derive(Debug)]
pub struct Receiver {
    child: Child,
    /// The OTLP/gRPC port on 127.0.0.1.
    pub grpc_port: u16,
    /// The OTLP/HTTP port on 127.0.0.1 (POST `/v1/traces`, protobuf).
    pub http_port: u16,
    dir: crate::TempDir,
}

impl Receiver {
    /// Starts a receiver and waits until it listens.
    pub fn start() -> Receiver {
        let dir = crate::TempDir::new("otlp");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/otlp_receiver.py");
        let mut child = Command::new(python())
            .arg(&script)
            .arg(dir.join("spans.jsonl"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the OTLP receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read the receiver's ports");
        let mut ports = line.split_whitespace().map(|p| p.parse::<u16>());
        let (Some(Ok(grpc_port)), Some(Ok(http_port))) = (ports.next(), ports.next()) else {
            panic!("the receiver prints its two ports, not {line:?}");
        };
        Receiver {
            child,
            grpc_port,
            http_port,
            dir,
        }
    }

    /// The OTLP/gRPC endpoint, without a scheme (as Envoy Gateway writes it).
    pub fn grpc_endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.grpc_port)
    }

    /// The OTLP/HTTP base URL (the exporter appends `/v1/traces`).
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join("spans.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("the receiver writes JSON lines"))
            .collect()
    }

    /// Waits (at most `limit`, real time) until `n` spans arrived; returns
    /// them all.
    ///
    /// # Panics
    ///
    /// Fewer than `n` spans after `limit`.
    pub fn wait_for(&self, n: usize, limit: Duration) -> Vec<serde_json::Value> {
        let start = Instant::now();
        loop {
            let spans = self.spans();
            if spans.len() >= n {
                return spans;
            }
            assert!(
                start.elapsed() < limit,
                "{} of {n} spans after {limit:?}: {spans:#?}",
                spans.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
