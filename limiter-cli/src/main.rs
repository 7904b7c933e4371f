//! `limiter`: check a rate-limit rule file, or watch one.
//!
//! * `limiter check FILE`: prints each rule as understood (algorithm, quota
//!   as rate and period, burst, key, mode, backend, match) and exits 0, or
//!   prints every problem (file:line:column, rule, field, fix) and exits 1.
//!   Usage errors exit 2. Fit for CI: `limiter check rules.yaml || exit 1`.
//!   With `--gateway`, also a warning (on stderr, exit code unchanged) for
//!   each rule without `match`, which `limiter-gateway` never applies.
//! * `limiter watch FILE`: loads the file, reloads it on every change and on
//!   SIGHUP, and prints each outcome, until interrupted (Ctrl-C).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use limiter_config::RuleSet;
use limiter_rules::{BackendSpec, Mode, PathMatch, RuleSpec, check_file};

#[derive(Parser)]
#[command(name = "limiter", about = "Check or watch rate-limit rule files")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the rules as understood, or every error (exit code 1).
    Check {
        /// The rule file (.yaml, .yml or .toml).
        file: PathBuf,
        /// Warn about rules limiter-gateway never applies (no `match`).
        #[arg(long)]
        gateway: bool,
    },
    /// Load the file and reload it on change and on SIGHUP.
    Watch {
        /// The rule file (.yaml, .yml or .toml).
        file: PathBuf,
    },
}

fn describe(rule: &RuleSpec) -> String {
    let mut out = format!("{}\n  algorithm: {}\n", rule.name, rule.algorithm);
    out += &format!("  key: {}\n", rule.key);
    out += &match rule.mode {
        Mode::Delay { max_delay } => format!("  mode: delay (max_delay {max_delay:?})\n"),
        _ => "  mode: reject\n".to_owned(),
    };
    out += &match &rule.backend {
        BackendSpec::Local => "  backend: local\n".to_owned(),
        BackendSpec::Redis(r) => format!(
            "  backend: redis {} (key prefix {:?}, failure policy {:?}, timeout {:?})\n",
            r.url, r.key_prefix, r.failure_policy, r.timeout
        ),
    };
    out += &match &rule.matcher {
        None => "  match: none (library use only)\n".to_owned(),
        Some(m) => {
            let methods = if m.methods.is_empty() {
                "every method".to_owned()
            } else {
                m.methods
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            match &m.path {
                PathMatch::Route(r) => format!("  match: route {r}, {methods}\n"),
                PathMatch::Prefix(p) => format!("  match: prefix {p}, {methods}\n"),
            }
        }
    };
    if !rule.allowlist.is_empty() {
        out += &format!("  allowlist: {:?}\n", rule.allowlist);
    }
    if !rule.trusted_proxies.is_empty() {
        out += &format!("  trusted_proxies: {:?}\n", rule.trusted_proxies);
    }
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { file, gateway } => match check_file(&file) {
            Ok(rules) => {
                println!("{}: {} rule(s), no errors", file.display(), rules.len());
                for rule in &rules {
                    print!("{}", describe(rule));
                }
                if gateway {
                    for rule in rules.iter().filter(|r| r.matcher.is_none()) {
                        eprintln!(
                            "warning: {}: rule `{}` has no `match`: limiter-gateway never applies it (add match: {{ prefix: \"/\" }} to limit every request)",
                            file.display(),
                            rule.name
                        );
                    }
                }
                ExitCode::SUCCESS
            }
            Err(errors) => {
                eprintln!("{errors}");
                eprintln!("{}: {} error(s)", file.display(), errors.errors().len());
                ExitCode::from(1)
            }
        },
        Command::Watch { file } => watch(file),
    }
}

fn watch(file: PathBuf) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        let rules = match RuleSet::load(&file) {
            Ok(r) => r,
            Err(errors) => {
                eprintln!("{errors}");
                return ExitCode::from(1);
            }
        };
        println!("generation 1: {} rule(s)", rules.snapshot().rules().count());
        // The file watch and SIGHUP through one reloader: one change, one
        // reload, whichever noticed it.
        let _reloader = match rules.reload_with(
            limiter_reload::Reloader::builder().sighup(true),
            |outcome| match outcome {
                Ok(report) => println!("reloaded: {report:?}"),
                Err(errors) => eprintln!("edit not applied, the previous rules stay:\n{errors}"),
            },
        ) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("cannot watch {}: {e}", file.display());
                return ExitCode::from(1);
            }
        };
        let mut generations = rules.subscribe();
        loop {
            tokio::select! {
                changed = generations.changed() => {
                    if changed.is_err() {
                        return ExitCode::SUCCESS;
                    }
                    println!("generation {} in force", *generations.borrow_and_update());
                }
                _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
            }
        }
    })
}
