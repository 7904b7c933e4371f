//! Headless Chromium (Debian's `chromium`; scripts/test-all installs it),
//! run once over a page and killed by PID if it has not finished in 60 s.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Runs headless Chromium over `url` in the fresh profile directory
/// `profile`, with `extra` flags (`--dump-dom`, `--screenshot=...`); its
/// stdout. Fails the test if Chromium is missing, fails, or takes more
/// than 60 s (it is then killed).
pub async fn chromium(profile: &Path, extra: &[String], url: &str) -> String {
    let child = tokio::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("Debian's `chromium` on PATH (scripts/test-all installs it)");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chromium finished within 60 s")
        .expect("chromium's output");
    assert!(
        output.status.success(),
        "chromium failed: {:?}",
        output.status
    );
    String::from_utf8(output.stdout).expect("chromium's output is UTF-8")
}
