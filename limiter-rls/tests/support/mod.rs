//! Real processes for the integration tests: the `limiter-rls` binary and
//! Envoy in front of it (limiter-test-support's, with the test route's
//! rate limits), an upstream HTTP server and a plain HTTP/1.1 client. Every
//! process is started on free loopback ports and killed by PID on drop,
//! also when a test fails.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// Re-exports for the modules; not every one of them is used.
#[allow(unused_imports)]
pub(crate) use limiter_test_support::envoy::Envoy;
#[allow(unused_imports)]
pub(crate) use limiter_test_support::http1::{Reply, get, request, upstream_saying};
#[allow(unused_imports)]
pub(crate) use limiter_test_support::{TempDir, free_port};

/// A fresh directory under the system temp dir, removed when dropped.
pub(crate) fn temp_dir(name: &str) -> TempDir {
    TempDir::new(&format!("rls-{name}"))
}

/// The `limiter-rls` binary, running.
pub(crate) struct Rls {
    child: Child,
    /// Its gRPC address.
    pub(crate) grpc: SocketAddr,
    /// Its HTTP address.
    pub(crate) http: SocketAddr,
    /// Its debug address.
    pub(crate) debug: SocketAddr,
}

impl Rls {
    /// Starts the binary with the config directory `runtime_root/config`
    /// and `env`; the gRPC port is `grpc_port` (0 for any).
    pub(crate) fn start(runtime_root: &Path, grpc_port: u16, env: &[(&str, &str)]) -> Rls {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_limiter-rls"));
        cmd.env_clear()
            .env("RUNTIME_ROOT", runtime_root)
            .env("HOST", "127.0.0.1")
            .env("GRPC_HOST", "127.0.0.1")
            .env("DEBUG_HOST", "127.0.0.1")
            .env("PORT", "0")
            .env("GRPC_PORT", grpc_port.to_string())
            .env("DEBUG_PORT", "0")
            .env("RLS_RELOAD_INTERVAL", "100ms")
            .env("LOG_LEVEL", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start limiter-rls");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addrs: HashMap<&str, SocketAddr> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k, v.parse().unwrap()))
            .collect();
        assert!(addrs.len() == 3, "limiter-rls did not start: {line:?}");
        Rls {
            child,
            grpc: addrs["grpc"],
            http: addrs["http"],
            debug: addrs["debug"],
        }
    }

    /// Sends SIGTERM, not waiting.
    pub(crate) fn send_term(&self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    }

    /// Waits for the exit status (after [`Rls::send_term`]).
    pub(crate) fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub(crate) fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap()
    }
}

impl Drop for Rls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `rate_limits` of the test route: one descriptor per header (and one
/// for the remote address with `x-remote`).
const RATE_LIMITS: &str = r#"
                  - actions: [{request_headers: {header_name: x-user, descriptor_key: user}}]
                  - actions: [{request_headers: {header_name: x-tight, descriptor_key: tight}}]
                  - actions: [{request_headers: {header_name: x-path, descriptor_key: path}}]
                  - actions: [{request_headers: {header_name: x-plan-a, descriptor_key: plan}}]
                  - actions: [{request_headers: {header_name: x-plan-b, descriptor_key: plan}}]
                  - actions: [{request_headers: {header_name: x-reload, descriptor_key: reload}}]
                  - actions: [{request_headers: {header_name: x-remote, descriptor_key: from}}, {remote_address: {}}]
"#;

/// Starts Envoy in front of `upstream`, asking `rls_grpc` (or no rate
/// limit filter when `None`), with `failure_mode_deny`.
pub(crate) fn envoy_in_front(
    upstream: u16,
    rls_grpc: Option<u16>,
    failure_mode_deny: bool,
) -> Envoy {
    let port = free_port();
    let admin = free_port();
    let (filter, rls_cluster, limits) = match rls_grpc {
        Some(g) => (
            format!(
                r#"
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: test
              failure_mode_deny: {failure_mode_deny}
              timeout: 2s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {{envoy_grpc: {{cluster_name: rls}}, timeout: 2s}}"#
            ),
            format!(
                r#"
  - name: rls
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: rls
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {g}}}}}}}}}]}}]"#
            ),
            format!("                  rate_limits:{RATE_LIMITS}"),
        ),
        None => (String::new(), String::new(), String::new()),
    };
    let yaml = format!(
        r#"admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}
static_resources:
  listeners:
  - name: main
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: "/"}}
                route:
                  cluster: upstream
{limits}
          http_filters:{filter}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  clusters:
  - name: upstream
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: upstream
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {upstream}}}}}}}}}]}}]{rls_cluster}
"#
    );
    Envoy::start(&yaml, port, admin)
}

/// An upstream that answers 200 `ok` to everything, on its own thread.
pub(crate) fn upstream() -> u16 {
    upstream_saying("ok")
}

/// Waits until `f` holds (a condition the system reaches, never a timing
/// assertion), failing after `within`.
pub(crate) fn eventually(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of the Prometheus sample `name{labels}` on `debug`'s `/metrics`.
pub(crate) fn metric(debug: SocketAddr, name: &str, labels: &str) -> Option<f64> {
    let r = get(debug.port(), "/metrics", &[]).ok()?;
    r.body.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let rest = rest.strip_prefix('{')?;
        let (ls, v) = rest.split_once("} ")?;
        let mut want: Vec<&str> = labels.split(',').collect();
        let mut have: Vec<&str> = ls.split(',').collect();
        want.sort_unstable();
        have.sort_unstable();
        (want == have).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Sleeps, if need be, until at least `margin` is left of the current
/// fixed window of length `unit` (envoyproxy/ratelimit's windows start at
/// multiples of their unit since the Unix epoch), so that the requests a
/// test makes next all fall in one window: a window ending among them
/// would start a fresh count. A wait for a wall-clock condition, not a
/// timing assertion; `margin` is generous, for a loaded machine.
pub(crate) fn clear_of_a_window_end(unit: Duration, margin: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let into = now.as_nanos() % unit.as_nanos();
    let left = unit - Duration::from_nanos(u64::try_from(into).unwrap());
    if left < margin {
        // Just past the boundary: the new window has all of `unit` left.
        std::thread::sleep(left + Duration::from_millis(10));
    }
}
