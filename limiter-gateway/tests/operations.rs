//! The built binary under what operators do: a Kubernetes ConfigMap update
//! (the kubelet's `..data` symlink swap), a save followed by SIGHUP (one
//! reload; a bad file one error), the gateway file edited (upstreams apply,
//! listeners say they cannot and keep running), a low open-file limit with
//! hundreds of silent sockets (`prlimit` on the gateway process: the admin
//! listener keeps answering, no log storm), `promtool check metrics` on the
//! first scrape, and the warning for a rule no request can reach.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use http::{Request, StatusCode};
use limiter_gateway::echo::Echo;
use support::{TempDir, client, empty, sample, text};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_limiter-gateway");

struct Proc {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
    log: PathBuf,
}

impl Proc {
    /// Starts the binary (under `prefix`, e.g. `prlimit …`) with `args`;
    /// its stderr goes to `log` in `dir`.
    async fn start(dir: &Path, prefix: &[&str], args: &[&str]) -> Proc {
        let log = dir.join("gateway.log");
        let (program, before) = match prefix.split_first() {
            Some((p, rest)) => (
                *p,
                rest.iter()
                    .map(|s| s.to_string())
                    .chain([BIN.to_owned()])
                    .collect(),
            ),
            None => (BIN, Vec::new()),
        };
        let mut child = Command::new(program)
            .args(before)
            .args(args)
            .args(["--admin", "127.0.0.1:0", "--drain-delay", "0"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("the binary starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut addr, mut admin) = (None, None);
        let read = async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(a) = line.strip_prefix("limiter-gateway listening on ") {
                    addr = Some(a.parse().unwrap());
                }
                if let Some(a) = line.strip_prefix("limiter-gateway admin on ") {
                    admin = Some(a.parse().unwrap());
                    break;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .expect("the binary prints its addresses");
        Proc {
            child,
            addr: addr.unwrap(),
            admin: admin.unwrap(),
            log,
        }
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().expect("running").to_string();
        let ok = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn stop(mut self) {
        self.signal("TERM");
        let exit = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("exits")
            .unwrap();
        assert_eq!(exit.code(), Some(0));
    }

    async fn admin(&self, path: &str) -> String {
        get(format!("http://{}{path}", self.admin)).await.1
    }

    /// Polls until `done` holds for the `/rules` or `/metrics` text (bounded).
    async fn wait(&self, path: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
        for _ in 0..400 {
            let body = self.admin(path).await;
            if done(&body) {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{what} never happened; log:\n{}", self.log());
    }
}

async fn get(url: String) -> (StatusCode, String) {
    let response = client()
        .request(Request::get(url).body(empty()).unwrap())
        .await
        .unwrap();
    (response.status(), text(response).await)
}

fn rules(burst: u32) -> String {
    format!(
        "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: 1/h\n    burst: {burst}\n    match: {{ prefix: \"/\" }}\n"
    )
}

fn generation(rules_json: &str) -> u64 {
    rules_json
        .strip_prefix("{\"generation\":")
        .and_then(|r| r.split(',').next())
        .and_then(|g| g.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_update_is_reloaded() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let mount = dir.path().join("config");
    std::fs::create_dir(&mount).unwrap();
    let v1 = mount.join("..2026_12_01_10_00_00.1");
    std::fs::create_dir(&v1).unwrap();
    std::fs::write(v1.join("rules.yaml"), rules(2)).unwrap();
    std::os::unix::fs::symlink("..2026_12_01_10_00_00.1", mount.join("..data")).unwrap();
    let file = mount.join("rules.yaml");
    std::os::unix::fs::symlink("..data/rules.yaml", &file).unwrap();
    let p = Proc::start(
        dir.path(),
        &[],
        &[
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &echo.url(),
        ],
    )
    .await;
    // The kubelet's update: new directory, ..data_tmp, rename, old removed.
    let v2 = mount.join("..2026_12_01_10_05_00.2");
    std::fs::create_dir(&v2).unwrap();
    std::fs::write(v2.join("rules.yaml"), rules(5)).unwrap();
    std::os::unix::fs::symlink("..2026_12_01_10_05_00.2", mount.join("..data_tmp")).unwrap();
    std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
    std::fs::remove_dir_all(&v1).unwrap();
    let json = p
        .wait("/rules", "the ConfigMap reload", |r| generation(r) == 2)
        .await;
    assert!(json.contains("burst 5"), "{json}");
    p.stop().await;
}

/// An editor's save: the new contents written beside the file and renamed
/// over it, so no reader (nor the watch) ever sees a half-written file. An
/// in-place `write` truncates first, and on a loaded machine the truncated
/// file can stay quiet long enough to be loaded as a change of its own.
fn save(file: &std::path::Path, text: &str) {
    let tmp = file.with_extension("yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_and_a_sighup_are_one_reload_and_a_bad_file_one_error() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let file = dir.write("rules.yaml", &rules(2));
    let p = Proc::start(
        dir.path(),
        &[],
        &[
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &echo.url(),
        ],
    )
    .await;
    let errors = |m: &str| sample(m, "rate_limit_config_errors_total");
    // The series exists before any failure.
    assert!(
        p.admin("/metrics")
            .await
            .contains("rate_limit_config_errors_total 0")
    );
    // A save and a SIGHUP: one reload.
    save(&file, &rules(3));
    p.signal("HUP");
    p.wait("/rules", "the reload", |r| generation(r) >= 2).await;
    // A bad save and a SIGHUP: one error.
    save(&file, &rules(0));
    p.signal("HUP");
    p.wait("/metrics", "the refused reload", |m| errors(m) >= 1.0)
        .await;
    // A good save: the next reload is generation 3, so the first change was
    // applied once; and still one error, so the bad one was refused once.
    save(&file, &rules(4));
    let json = p
        .wait("/rules", "the sentinel reload", |r| r.contains("burst 4"))
        .await;
    assert_eq!(generation(&json), 3, "{json}");
    assert_eq!(errors(&p.admin("/metrics").await), 1.0);
    // The refused reload is one log line.
    let log = p.log();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("not reloaded")).collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(refused[0].contains("rules.yaml:"), "{log}");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_file_reloads_upstreams_and_keeps_its_listeners() {
    let (a, b) = (
        Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap(),
        Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap(),
    );
    let dir = TempDir::new();
    let file = dir.write("rules.yaml", &rules(100));
    let gateway =
        |up: &str, listen: &str| format!("listen = [\"{listen}\"]\n[[upstream]]\nurl = \"{up}\"\n");
    let gw = dir.write("gateway.toml", &gateway(&a.url(), "127.0.0.1:0"));
    let p = Proc::start(
        dir.path(),
        &[],
        &[
            "--config",
            file.to_str().unwrap(),
            "--gateway",
            gw.to_str().unwrap(),
        ],
    )
    .await;
    let url = format!("http://{}/x", p.addr);
    assert_eq!(get(url.clone()).await.0, StatusCode::OK);
    assert_eq!((a.requests(), b.requests()), (1, 0));
    // Another upstream and another listener: the upstream applies, the
    // listener cannot and says so.
    std::fs::write(&gw, gateway(&b.url(), "127.0.0.1:1")).unwrap();
    let mut moved = false;
    for _ in 0..400 {
        assert_eq!(get(url.clone()).await.0, StatusCode::OK);
        if b.requests() > 0 {
            moved = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(moved, "{}", p.log());
    let log = p.log();
    assert!(
        log.lines()
            .any(|l| l.contains("need a restart") && l.contains("listen")),
        "{log}"
    );
    // A bad gateway file: one error line, the running one stays.
    std::fs::write(&gw, "listen = [\"nope\"]\n").unwrap();
    for _ in 0..400 {
        if p.log().contains("gateway file not reloaded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(p.log().contains("gateway file not reloaded"), "{}", p.log());
    let before = b.requests();
    assert_eq!(get(url).await.0, StatusCode::OK);
    assert_eq!(b.requests(), before + 1);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_fd_limit_and_silent_sockets_leave_the_admin_listener_answering() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let file = dir.write("rules.yaml", &rules(1000));
    let gw = dir.write(
        "gateway.toml",
        &format!(
            "listen = [\"127.0.0.1:0\"]\n[connections]\nhead_timeout = \"30s\"\nmax_per_client = 0\n[[upstream]]\nurl = \"{}\"\n",
            echo.url()
        ),
    );
    // 128 descriptors: room for (128 - 64) / 2 = 32 client connections.
    let p = Proc::start(
        dir.path(),
        &["prlimit", "--nofile=128:128", "--"],
        &[
            "--config",
            file.to_str().unwrap(),
            "--gateway",
            gw.to_str().unwrap(),
        ],
    )
    .await;
    let mut silent = Vec::new();
    for _ in 0..200 {
        silent.push(TcpStream::connect(p.addr).await.unwrap());
    }
    // Saturated: /healthz and /metrics still answer.
    for _ in 0..5 {
        let (status, body) = get(format!("http://{}/healthz", p.admin)).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
    }
    let metrics = p.admin("/metrics").await;
    assert!(metrics.contains("gateway_accept_errors_total"), "{metrics}");
    // The silent ones go; a real client is served.
    drop(silent);
    let (status, _) =
        tokio::time::timeout(Duration::from_secs(20), get(format!("http://{}/x", p.addr)))
            .await
            .expect("served once the silent sockets are gone");
    assert_eq!(status, StatusCode::OK);
    let log = p.log();
    assert!(log.contains("lowered to fit the open-file limit"), "{log}");
    let accept_lines = log.lines().filter(|l| l.contains("accept failed")).count();
    assert!(
        accept_lines <= 1,
        "{accept_lines} accept-error lines:\n{log}"
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_scrape_passes_promtool_and_an_unrouted_rule_is_warned_about() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let file = dir.write(
        "rules.yaml",
        &format!(
            "{}  named_only:\n    algorithm: token_bucket\n    rate: 10\n    burst: 10\n",
            rules(5)
        ),
    );
    let p = Proc::start(
        dir.path(),
        &[],
        &[
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &echo.url(),
            "--log-json",
            "--access-log",
        ],
    )
    .await;
    let metrics = p.admin("/metrics").await;
    for family in [
        "rate_limit_allowed_total",
        "rate_limit_rejected_total",
        "rate_limit_config_errors_total",
        "rate_limit_config_generation",
        "gateway_client_errors_total",
        "gateway_accept_errors_total",
        "gateway_connections_refused_total",
        "gateway_connections_timed_out_total",
        "gateway_upstream_responses_total",
        "gateway_upstream_errors_total",
        "gateway_upstream_retries_total",
        "gateway_upstream_available_addresses",
        "gateway_upstream_latency_seconds",
        "rate_limit_delayed_total",
        "rate_limit_bypassed_total",
        "rate_limit_backend_errors_total",
        "rate_limit_queue_size",
        "rate_limit_wait_seconds",
    ] {
        assert!(
            metrics.contains(&format!("# HELP {family} ")),
            "{family} missing from the first scrape:\n{metrics}"
        );
    }
    // After traffic too (the histograms have samples then).
    for _ in 0..7 {
        get(format!("http://{}/x", p.addr)).await;
    }
    for scrape in [metrics, p.admin("/metrics").await] {
        promtool(&scrape);
    }
    let log = p.log();
    assert!(
        log.lines()
            .any(|l| l.contains("named_only") && l.contains("never applies")),
        "{log}"
    );
    // JSON lines: one object per line; the access log has every request;
    // the rejection log names the rule (burst 5: the 6th and 7th of the
    // 7 requests are rejected, one line for the burst).
    assert!(
        log.lines().all(|l| l.starts_with('{') && l.ends_with('}')),
        "{log}"
    );
    let access = log
        .lines()
        .filter(|l| l.contains("\"target\":\"access\""))
        .count();
    assert_eq!(access, 7, "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("\"status\":429") && l.contains("\"rule\":\"api\"")),
        "{log}"
    );
    let rejections: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("rule rejecting requests"))
        .collect();
    assert_eq!(rejections.len(), 1, "{log}");
    assert!(rejections[0].contains("\"rule\":\"api\""), "{log}");
    assert!(rejections[0].contains("\"previous_burst\":0"), "{log}");
    p.stop().await;
}

/// `promtool check metrics` on `scrape`: no problem at all.
fn promtool(scrape: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/test-all installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(scrape.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool: {report}\n{scrape}"
    );
}
