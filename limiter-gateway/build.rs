//! Embeds the commit the binary is built from, for `--version`: the short
//! hash of `git rev-parse --short HEAD` as `LIMITER_COMMIT`, or `unknown`
//! where git or the repository is absent (a crate built from its package).
//! Each binary crate carries this file: a package builds from its own files.

use std::path::Path;
use std::process::Command;

/// The trimmed output of a git command that succeeded, else `None`.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    println!(
        "cargo:rustc-env=LIMITER_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo:rerun-if-changed=build.rs");
    if commit.is_none() {
        return;
    }
    // Run again when HEAD moves: HEAD itself (a checkout), the branch it
    // names (a commit) and packed-refs (where that branch may live). Only
    // existing files: a missing one would make cargo run this every build.
    let branch = git(&["rev-parse", "--symbolic-full-name", "HEAD"]);
    let watched = ["HEAD", branch.as_deref().unwrap_or("HEAD"), "packed-refs"];
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", name])
            && Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
