//! `limiter check FILE`: the rules as understood and exit 0, or every error
//! and exit 1; usage errors exit 2.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A rule file of limiter-rules' test files.
fn file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../limiter-rules/tests/files")
        .join(name)
}

fn check(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_limiter"))
        .args(args)
        .output()
        .expect("run limiter");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_good_file_prints_the_rules_as_understood() {
    let path = file("seed004.yaml");
    let (code, out, _) = check(&["check".as_ref(), path.as_os_str()]);
    assert_eq!(code, 0);
    assert!(out.contains("3 rule(s), no errors"), "{out}");
    assert!(out.contains(
        "order_service\n  algorithm: leaky_bucket: rate 800/s (one permit every 1250us), burst 1\n  key: global\n  mode: delay (max_delay 1s)\n  backend: local\n"
    ), "{out}");
    assert!(out.contains("payment_gateway\n  algorithm: token_bucket: rate 100/s (one permit every 10ms), burst 200\n  key: ip\n"), "{out}");
}

#[test]
fn check_gateway_warns_about_each_rule_the_gateway_never_applies() {
    // Seed 004's file verbatim: no rule has a `match`.
    let path = file("seed004.yaml");
    let (code, _, err) = check(&["check".as_ref(), "--gateway".as_ref(), path.as_os_str()]);
    assert_eq!(code, 0);
    for rule in ["api_gateway", "order_service", "payment_gateway"] {
        assert!(
            err.contains(&format!(
                "rule `{rule}` has no `match`: limiter-gateway never applies it"
            )),
            "{err}"
        );
    }
    let (_, _, quiet) = check(&["check".as_ref(), path.as_os_str()]);
    assert!(!quiet.contains("never applies"), "{quiet}");
}

#[test]
fn redis_passwords_are_never_printed() {
    let dir = limiter_test_support::TempDir::new("cli-redact");
    let rules = |url: &str| {
        format!(
            "rate_limits:\n  shared:\n    algorithm: token_bucket\n    rate: 10\n    backend: redis\n    redis:\n      url: \"{url}\"\n"
        )
    };
    let good = dir.join("good.yaml");
    let url = "rediss+sentinel://app:hunter2@s1:26379,s2:26379/main?sentinel_password=hunter3";
    std::fs::write(&good, rules(url)).unwrap();
    let (code, out, err) = check(&["check".as_ref(), good.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "backend: redis rediss+sentinel://app:***@s1:26379,s2:26379/main?sentinel_password=***"
        ),
        "{out}"
    );
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, rules("redis://app:hunter2@bad host/")).unwrap();
    let (code, out, err) = check(&["check".as_ref(), bad.as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("app:***@bad host"), "{err}");
    assert!(!format!("{out}{err}").contains("hunter"), "{out}{err}");
}

#[test]
fn a_bad_file_prints_every_error_and_exits_1() {
    let path = file("bad.yaml");
    let (code, _, err) = check(&["check".as_ref(), path.as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("bad.yaml: 9 error(s)"), "{err}");
    assert!(
        err.contains(
            "bad.yaml:3:16: rule `api`, field `algorithm`: unknown algorithm `token-bucket`"
        ),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, _) = check(&["frobnicate".as_ref()]);
    assert_eq!(code, 2);
    let (code, _, err) = check(&["check".as_ref(), "rules.json".as_ref()]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown file format"), "{err}");
}

#[test]
fn explain_names_the_rule_the_key_and_the_decision() {
    let dir = std::env::temp_dir().join(format!("limiter-cli-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.yaml");
    std::fs::write(
        &rules,
        "rate_limits:\n  orders:\n    algorithm: token_bucket\n    rate: 10\n    burst: 3\n    key: [header:x-user, ip]\n    match: { route: \"/orders/{id}\" }\n",
    )
    .unwrap();
    let args = |extra: &[&str]| -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = vec!["explain".into(), rules.clone().into()];
        a.extend(extra.iter().map(Into::into));
        a
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        let refs: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
        check(&refs)
    };
    let (code, out, _) = run(&[
        "--method",
        "GET",
        "--path",
        "/orders/7",
        "--header",
        "x-user: 42",
        "--ip",
        "203.0.113.9",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "rule: orders (token_bucket: rate 10/s (one permit every 100ms), burst 3)\nkey: 42:203.0.113.9\ndecision: admitted, 2 permit(s) left\n"
    );
    let (code, out, _) = run(&["--path", "/orders/7", "--ip", "203.0.113.9"]);
    assert_eq!(
        (code, out.lines().last()),
        (
            0,
            Some("decision: no key (a header or the client address is missing)")
        )
    );
    let (code, out, _) = run(&["--path", "/other"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "rule: none (no rule matches: unlimited)\n")
    );
    let (code, _, err) = run(&["--path", "/orders/7", "--header", "nocolon"]);
    assert_eq!(code, 2);
    assert!(err.contains("write 'NAME: VALUE'"), "{err}");

    // A calendar quota: its limit, the permits left and the reset.
    std::fs::write(
        &rules,
        "rate_limits:\n  orders:\n    algorithm: token_bucket\n    rate: 10\n    burst: 3\n    quota: { limit: 500, per: month, timezone: Europe/Paris }\n    match: { route: \"/orders/{id}\" }\n",
    )
    .unwrap();
    let (code, out, _) = run(&["--path", "/orders/7"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "rule: orders (token_bucket: rate 10/s (one permit every 100ms), burst 3; quota 500 per month (Europe/Paris, resets on day 1))"
    );
    assert_eq!(lines[2], "decision: admitted, 2 permit(s) left");
    // The reset is at most a month (31 days and an hour) away.
    let reset: u64 = lines[3]
        .strip_prefix("quota: 500 of 500 left, resets in ")
        .and_then(|s| s.strip_suffix('s'))
        .expect(lines[3])
        .parse()
        .unwrap();
    assert!(reset <= 31 * 86_400 + 3600, "{reset}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The commit `--version` must name: git's short hash of HEAD here, or
/// `unknown` where git or the repository is absent (as the build script).
fn expected_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[test]
fn version_names_the_release_and_the_commit() {
    let (code, out, err) = check(&["--version".as_ref()]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(out, format!("limiter 0.1.0 ({})\n", expected_commit()));
}

#[test]
fn help_lists_the_commands_and_flags() {
    let (code, out, err) = check(&["--help".as_ref()]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    for item in ["check", "watch", "explain", "--help", "--version"] {
        assert!(out.contains(item), "{item} missing from:\n{out}");
    }
}
