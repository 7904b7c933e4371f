//! The built binary as an operator runs it: a bad rules file stops it at
//! start with the rules crate's error text; SIGTERM drains in-flight and
//! delayed requests and exits 0; SIGHUP and a file edit reload the rules,
//! keeping limiter state. `--version` and `--help` answer and exit 0.

use crate::support;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use http::{Request, StatusCode};
use limiter_gateway::echo::Echo;
use support::{TempDir, client, empty, text};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_limiter-gateway");

pub(crate) struct Proc {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    admin: SocketAddr,
}

async fn spawn(rules: &std::path::Path, upstream: &str, extra: &[&str]) -> Proc {
    spawn_with_env(rules, upstream, extra, &[]).await
}

/// The binary on loopback ports (proxy and admin) with `extra` flags and
/// `env` variables, once it printed its addresses.
pub(crate) async fn spawn_with_env(
    rules: &std::path::Path,
    upstream: &str,
    extra: &[&str],
    env: &[(&str, String)],
) -> Proc {
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(rules)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--upstream",
            upstream,
        ])
        .args(extra)
        .args(if extra.contains(&"--drain-delay") {
            &[][..]
        } else {
            &["--drain-delay", "0"][..]
        })
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
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
    }
}

pub(crate) fn signal(child: &Child, name: &str) {
    let pid = child.id().expect("running").to_string();
    let ok = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

async fn get(url: String) -> (StatusCode, String) {
    let response = client()
        .request(Request::get(url).body(empty()).unwrap())
        .await
        .unwrap();
    (response.status(), text(response).await)
}

/// Polls `/rules` until the generation is `n` (bounded: a reload that never
/// comes fails the test).
async fn wait_generation(admin: SocketAddr, n: u64) {
    let want = format!("{{\"generation\":{n},");
    for _ in 0..200 {
        if get(format!("http://{admin}/rules"))
            .await
            .1
            .starts_with(&want)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("generation {n} never came");
}

/// Polls `/metrics` until `rate_limit_config_errors_total` is at least `n`.
async fn wait_errors(admin: SocketAddr, n: u64) {
    for _ in 0..200 {
        let metrics = get(format!("http://{admin}/metrics")).await.1;
        if support::sample(&metrics, "rate_limit_config_errors_total") >= n as f64 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the bad file was never refused");
}

#[tokio::test]
async fn a_bad_rules_file_at_start_exits_1_with_the_rules_crates_errors() {
    let dir = TempDir::new();
    let file = dir.write(
        "bad.yaml",
        "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: 0\n    burst: 0\n",
    );
    let expected = limiter_config::check_file(&file).unwrap_err().to_string();
    let output = Command::new(BIN)
        .arg("--config")
        .arg(&file)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains(&expected),
        "{stderr}\n--- expected ---\n{expected}"
    );
    assert!(stderr.contains("not started"));

    // A gateway-config error is a usage error: 2.
    let good = dir.write("good.yaml", "rate_limits: {}\n");
    let output = Command::new(BIN)
        .arg("--config")
        .arg(&good)
        .args(["--listen", "127.0.0.1:0", "--upstream", "ftp://x"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("write an http:// or https:// URL")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_and_delayed_requests_then_exits_0() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let rules = dir.write(
        "rules.yaml",
        "\
rate_limits:
  drain_paced:
    algorithm: leaky_bucket
    rate: 2/s
    max_delay: 5s
    match: { prefix: \"/paced\" }
",
    );
    let mut p = spawn(
        &rules,
        &echo.url(),
        &["--shutdown-timeout", "20s", "--drain-delay", "1s"],
    )
    .await;
    let addr = p.addr;
    // Three requests the upstream holds for 700 ms, and two paced ones: the
    // second waits ~500 ms for its slot inside the gateway.
    let mut tasks = Vec::new();
    for _ in 0..3 {
        tasks.push(tokio::spawn(get(format!("http://{addr}/hold/700"))));
    }
    for _ in 0..2 {
        tasks.push(tokio::spawn(get(format!("http://{addr}/paced"))));
    }
    // Wait until the held three and the first paced one are at the upstream.
    support::until("four requests at the upstream", || echo.requests() >= 4).await;
    signal(&p.child, "TERM");
    // Draining: /healthz says so (once the signal is handled) while the
    // requests finish.
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while get(format!("http://{}/healthz", p.admin)).await.0 != StatusCode::SERVICE_UNAVAILABLE {
        assert!(
            std::time::Instant::now() < deadline,
            "/healthz never reported draining"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The drain delay: /healthz is 503 but the listener still accepts, so
    // a balancer that has not polled yet loses nothing.
    assert_eq!(
        get(format!("http://{addr}/fresh")).await.0,
        StatusCode::OK,
        "a new connection during the drain delay"
    );
    let mut held = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, StatusCode::OK);
        held += usize::from(body == "held");
    }
    assert_eq!(held, 3);
    assert_eq!(echo.requests(), 6);
    let exit = tokio::time::timeout(Duration::from_secs(20), p.child.wait())
        .await
        .expect("exits after draining")
        .unwrap();
    assert_eq!(exit.code(), Some(0));
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

const HOT: &str = "\
rate_limits:
  sig_hot:
    algorithm: token_bucket
    rate: RATE
    burst: 2
    match: { prefix: \"/\" }
";

/// Drained (2 of burst 2), then the rate changes: the reload keeps the
/// state, so the next request is still 429 (a fresh limiter would admit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_and_a_file_edit_reload_the_rules_keeping_state() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    for watch in [false, true] {
        let dir = TempDir::new();
        let rules = dir.write("rules.yaml", &HOT.replace("RATE", "1/h"));
        let extra: &[&str] = if watch { &[] } else { &["--no-watch"] };
        let mut p = spawn(&rules, &echo.url(), extra).await;
        let url = format!("http://{}/x", p.addr);
        assert_eq!(get(url.clone()).await.0, StatusCode::OK);
        assert_eq!(get(url.clone()).await.0, StatusCode::OK);
        assert_eq!(get(url.clone()).await.0, StatusCode::TOO_MANY_REQUESTS);
        if !watch {
            // A bad file first: refused, nothing changes.
            std::fs::write(&rules, HOT.replace("RATE", "0")).unwrap();
            signal(&p.child, "HUP");
            wait_errors(p.admin, 1).await;
            assert_eq!(get(url.clone()).await.0, StatusCode::TOO_MANY_REQUESTS);
        }
        std::fs::write(&rules, HOT.replace("RATE", "2/h")).unwrap();
        if !watch {
            signal(&p.child, "HUP");
        }
        wait_generation(p.admin, 2).await;
        assert_eq!(get(url.clone()).await.0, StatusCode::TOO_MANY_REQUESTS);
        let (_, rules_json) = get(format!("http://{}/rules", p.admin)).await;
        assert!(rules_json.contains("one permit every 30m"), "{rules_json}");
        signal(&p.child, "TERM");
        assert_eq!(p.child.wait().await.unwrap().code(), Some(0));
    }
}

/// Runs the binary with `args` to its end: (exit code, stdout, stderr).
fn run_to_end(args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(BIN)
        .args(args)
        .output()
        .expect("the binary runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn version_names_the_release_and_the_commit() {
    // The build script's rule: git's short hash of HEAD, else `unknown`.
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    let (code, out, err) = run_to_end(&["--version"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(out, format!("limiter-gateway 0.1.0 ({commit})\n"));
}

#[test]
fn help_lists_every_flag_without_starting() {
    // No --config: only --help and --version answer without it.
    let (code, out, err) = run_to_end(&["--help"]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    for flag in [
        "--config",
        "--gateway",
        "--listen",
        "--upstream",
        "--admin ",
        "--admin-token-file",
        "--connect-timeout",
        "--request-timeout",
        "--shutdown-timeout",
        "--drain-delay",
        "--log-json",
        "--access-log",
        "--no-watch",
        "--help",
        "--version",
    ] {
        assert!(out.contains(flag), "{flag} missing from:\n{out}");
    }
    assert!(!out.contains("listening"), "{out}");
}
