//! The binary's only arguments: `--version` and `--help` answer and exit 0
//! before any setting is read or any listener bound; anything else exits 2.

use std::process::Command;

use limiter_rls::VARIABLES;

/// Runs the binary with `args` and a config root that does not exist (a
/// start would fail on it with exit 1): (exit code, stdout, stderr).
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let missing =
        std::env::temp_dir().join(format!("limiter-rls-flags-missing-{}", std::process::id()));
    assert!(!missing.exists());
    let out = Command::new(env!("CARGO_BIN_EXE_limiter-rls"))
        .args(args)
        .env("RUNTIME_ROOT", &missing)
        .output()
        .expect("the binary runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn version_names_the_release_and_the_commit() {
    // The build script's rule: git's short hash of HEAD, else `unknown`.
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    for flag in ["--version", "-V"] {
        let (code, out, err) = run(&[flag]);
        assert_eq!((code, err.as_str()), (Some(0), ""), "{flag}");
        assert_eq!(out, format!("limiter-rls 0.1.0 ({commit})\n"));
    }
}

#[test]
fn help_lists_the_flags_and_every_variable_without_starting() {
    for flag in ["--help", "-h"] {
        let (code, out, err) = run(&[flag]);
        // Exit 0 with the config root missing: nothing was loaded or bound.
        assert_eq!((code, err.as_str()), (Some(0), ""), "{flag}: {out}");
        assert!(out.contains("--help") && out.contains("--version"), "{out}");
        for v in VARIABLES {
            let line = out
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{} ", v.name)))
                .unwrap_or_else(|| panic!("{} missing from:\n{out}", v.name));
            assert!(line.ends_with(&format!("[{}]", v.default)), "{line}");
        }
        assert!(!out.contains("listening"), "{out}");
    }
}

#[test]
fn other_arguments_are_a_usage_error() {
    for args in [&["--port", "9"][..], &["--help", "--version"], &["serve"]] {
        let (code, out, err) = run(args);
        assert_eq!((code, out.as_str()), (Some(2), ""), "{args:?}");
        assert!(
            err.contains("unexpected arguments") && err.contains("--help"),
            "{err}"
        );
    }
}
