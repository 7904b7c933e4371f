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
//! * `limiter explain FILE --method GET --path /orders/7 --header 'x-user: 42'
//!   --ip 203.0.113.9`: which rule the request matches, the key it is
//!   counted by, and the decision it would get from fresh limiters
//!   (`RuleSet::explain`); exit 0, 1 for a file with problems, 2 for a
//!   usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use limiter_config::{ExplainRequest, RuleSet, Verdict};
use limiter_rules::{BackendSpec, Mode, PathMatch, RuleSpec, check_file};

/// `limiter --version`: the version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("LIMITER_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "limiter",
    version = VERSION,
    about = "Check, explain or watch rate-limit rule files"
)]
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
    /// Which rule, key and decision a request would get (fresh limiters).
    Explain {
        /// The rule file (.yaml, .yml or .toml).
        file: PathBuf,
        /// The request's method.
        #[arg(long, default_value = "GET")]
        method: String,
        /// The request's path.
        #[arg(long)]
        path: String,
        /// A request header, `NAME: VALUE` (repeat for several).
        #[arg(long)]
        header: Vec<String>,
        /// The client's address.
        #[arg(long)]
        ip: Option<std::net::IpAddr>,
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
            r.redacted_url(),
            r.key_prefix,
            r.failure_policy,
            r.timeout
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
        Command::Explain {
            file,
            method,
            path,
            header,
            ip,
        } => explain(&file, &method, path, &header, ip),
    }
}

fn explain(
    file: &std::path::Path,
    method: &str,
    path: String,
    headers: &[String],
    client: Option<std::net::IpAddr>,
) -> ExitCode {
    let usage = |message: String| {
        eprintln!("limiter explain: {message}");
        ExitCode::from(2)
    };
    let Ok(method) = http::Method::from_bytes(method.as_bytes()) else {
        return usage(format!("`{method}` is not an HTTP method"));
    };
    if !path.starts_with('/') {
        return usage(format!("--path `{path}` must start with /"));
    }
    let mut map = http::HeaderMap::new();
    for h in headers {
        let parsed = h.split_once(':').and_then(|(name, value)| {
            Some((
                http::HeaderName::try_from(name.trim()).ok()?,
                http::HeaderValue::try_from(value.trim()).ok()?,
            ))
        });
        match parsed {
            Some((name, value)) => {
                map.append(name, value);
            }
            None => return usage(format!("--header `{h}`: write 'NAME: VALUE'")),
        }
    }
    let rules = match RuleSet::load(file) {
        Ok(r) => r,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::from(1);
        }
    };
    let e = rules.explain(&ExplainRequest {
        method,
        path,
        headers: map,
        client,
    });
    let Some(rule) = &e.rule else {
        println!("rule: none (no rule matches: unlimited)");
        return ExitCode::SUCCESS;
    };
    println!("rule: {rule} ({})", e.limit.as_deref().unwrap_or(""));
    println!("key: {}", e.key.as_deref().unwrap_or("(none)"));
    if e.shadow {
        println!("shadow: true (let through, counted)");
    }
    // A cost other than the default one permit, as configured.
    if let Some(cost) = e
        .cost
        .as_ref()
        .filter(|c| c.request != 1 || c.response_header.is_some())
    {
        match &cost.response_header {
            Some(header) => println!(
                "cost: {} up front, the rest from response header {header} (debt capped at {:?})",
                cost.request, cost.max_debt
            ),
            None => println!("cost: {}", cost.request),
        }
    }
    let decision = match e.verdict {
        Verdict::Admitted { remaining } => format!("admitted, {remaining} permit(s) left"),
        Verdict::Delayed { wait, .. } => format!("delayed by at most {wait:?}"),
        Verdict::Refused { retry_after, .. } => {
            format!("refused, retry after at most {retry_after:?}")
        }
        Verdict::Penalized { retry_after } => format!("penalized for {retry_after:?}"),
        Verdict::OverBurst { burst } => format!("refused: costs more than the burst {burst}"),
        Verdict::Allowlisted => "allowlisted (uncounted)".into(),
        Verdict::NoKey => "no key (a header or the client address is missing)".into(),
        Verdict::Unlimited => "unlimited".into(),
        Verdict::Concurrency { in_flight, limit } => {
            format!("a concurrency rule: {in_flight} of {limit} in flight")
        }
        _ => "not read (Redis or adaptive rule)".into(),
    };
    println!("decision: {decision}");
    if let Some(q) = &e.quota {
        println!(
            "quota: {} of {} left, resets in {}s",
            q.remaining,
            q.limit,
            q.reset_in.as_secs()
        );
    }
    ExitCode::SUCCESS
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
