//! The `limiter-gateway` binary: the rules file, the gateway file or
//! flags, signals.
//!
//! Exit codes: 0 after a shutdown on SIGTERM/SIGINT (drain delay, then
//! drained or at the deadline); 1 when the rules file has problems (every
//! one printed, as `limiter check` prints them) or a listener cannot be
//! bound (the message names the address) or the admin token file cannot be
//! used; 2 for a usage or gateway-config error (an admin listener off
//! loopback without a token file among them). Both files and the TLS certificate and key reload on change (not with `--no-watch`) and on SIGHUP (`limiter_gateway::watch`). On start it prints
//! `limiter-gateway listening on ADDR` per listener and
//! `limiter-gateway tls on ADDR` per TLS listener and
//! `limiter-gateway admin on ADDR` to stdout (useful with port 0).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::sync::Arc;

use clap::Parser;
use limiter_config::RuleSet;
use limiter_gateway::{
    Gateway, GatewayConfig, Upstream, init_logging, metrics_handle, parse_upstream_url,
};
use tokio::signal::unix::{SignalKind, signal};

/// `limiter-gateway --version`: the version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("LIMITER_COMMIT"), ")");

/// A rate-limiting reverse proxy driven by a limiter-config rules file.
#[derive(Parser, Debug, Clone)]
#[command(name = "limiter-gateway", version = VERSION)]
struct Args {
    /// The rules file (YAML or TOML, the limiter-config schema).
    #[arg(long)]
    config: PathBuf,
    /// The gateway file (TOML: listen, admin, [[upstream]], [timeouts]).
    #[arg(long)]
    gateway: Option<PathBuf>,
    /// A proxy listener (replaces the file's listeners).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// The one upstream for every path (replaces the file's upstreams).
    #[arg(long)]
    upstream: Option<String>,
    /// The admin listener (/metrics, /healthz, /rules, the dashboard at /,
    /// /explain, and the calls that change the gateway).
    #[arg(long)]
    admin: Option<std::net::SocketAddr>,
    /// The file holding the admin bearer token (replaces the gateway
    /// file's `admin.token_file`); required for an admin listener off
    /// loopback.
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Upstream connect timeout (e.g. 2s).
    #[arg(long, value_parser = duration)]
    connect_timeout: Option<Duration>,
    /// Upstream response-head timeout (e.g. 30s).
    #[arg(long, value_parser = duration)]
    request_timeout: Option<Duration>,
    /// How long SIGTERM waits for in-flight requests (e.g. 10s).
    #[arg(long, value_parser = duration)]
    shutdown_timeout: Option<Duration>,
    /// How long after SIGTERM /healthz answers 503 while the listeners
    /// still accept (e.g. 5s; 0 for none).
    #[arg(long, value_parser = limiter_config::parse_duration)]
    drain_delay: Option<Duration>,
    /// Log lines as JSON objects instead of text.
    #[arg(long)]
    log_json: bool,
    /// One log line per request (target `access`).
    #[arg(long)]
    access_log: bool,
    /// Do not reload the files (rules, gateway file, TLS certificate and
    /// key) when they change; SIGHUP still does.
    #[arg(long)]
    no_watch: bool,
}

fn duration(s: &str) -> Result<Duration, String> {
    match limiter_config::parse_duration(s)? {
        d if d.is_zero() => Err("must be more than 0".into()),
        d => Ok(d),
    }
}

fn gateway_config(args: &Args) -> Result<GatewayConfig, String> {
    let mut config = match &args.gateway {
        Some(path) => GatewayConfig::load(path).map_err(|e| e.to_string())?,
        None => GatewayConfig::from_toml("(flags)".as_ref(), "").map_err(|e| e.to_string())?,
    };
    if let Some(listen) = args.listen {
        config.listen = vec![listen];
    }
    if let Some(url) = &args.upstream {
        let url = parse_upstream_url("--upstream", url).map_err(|e| e.to_string())?;
        config.upstreams = vec![Upstream {
            name: "default".into(),
            url,
            prefix: "/".into(),
            rewrite_host: false,
            pool: limiter_gateway::upstream::PoolConfig::default(),
        }];
    }
    if args.admin.is_some() {
        config.admin = args.admin;
    }
    if args.admin_token_file.is_some() {
        config.admin_token_file = args.admin_token_file.clone();
    }
    let t = &mut config.timeouts;
    t.connect = args.connect_timeout.unwrap_or(t.connect);
    t.request = args.request_timeout.unwrap_or(t.request);
    t.shutdown = args.shutdown_timeout.unwrap_or(t.shutdown);
    t.drain = args.drain_delay.unwrap_or(t.drain);
    config.log.json |= args.log_json;
    config.log.access |= args.access_log;
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

/// See the workspace Cargo.toml's `mimalloc` entry.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    let config = match gateway_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("limiter-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&config.log);
    // The admin listener, reloads and health checks: the proxy listeners
    // have runtimes of their own, one per worker (`workers`).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("limiter-gateway: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(run(args, config))
}

/// Traces when the `OTEL_*` variables ask for them (docs/gateway.md,
/// Traces): the exporter, and its tracer made the default of the rules'
/// layers, so it must run before the rules are built.
#[cfg(feature = "otel")]
fn start_tracing() -> Result<Option<limiter_tower::otel::SdkTracerProvider>, String> {
    use limiter_tower::otel::{Defaults, TraceConfig};
    let defaults = Defaults {
        service_name: "limiter-gateway",
        ..Defaults::default()
    };
    let config = TraceConfig::if_enabled(&|k| std::env::var(k).ok(), defaults)
        .map_err(|(name, expected)| format!("{name}: use {expected}"))?;
    let Some(config) = config else {
        return Ok(None);
    };
    limiter_tower::otel::install(&config)
        .map(Some)
        .map_err(|e| format!("OTLP endpoint {}: {e}", config.endpoint))
}

async fn run(args: Args, config: GatewayConfig) -> ExitCode {
    #[cfg(feature = "otel")]
    let traces = match start_tracing() {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("limiter-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    // Before the rules: the layer registers its metrics when they are built.
    metrics_handle();
    let rules = match RuleSet::load(&args.config) {
        Ok(r) => r,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("limiter-gateway: the rules file has problems; not started");
            return ExitCode::from(1);
        }
    };
    let running = match Gateway::new(config, rules.clone()).start().await {
        Ok(r) => Arc::new(r),
        Err(e) => {
            eprintln!("limiter-gateway: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    // The reloader (both files, SIGHUP) and the handlers before the
    // addresses are printed: an edit or a SIGHUP by whoever read them must
    // reload (SIGHUP's default action would kill).
    let gateway_file = args.gateway.clone().map(|path| {
        let args = args.clone();
        let load: limiter_gateway::LoadGateway = Box::new(move || gateway_config(&args));
        (path, load)
    });
    let reloader = match limiter_gateway::watch(&rules, gateway_file, &running, !args.no_watch) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("limiter-gateway: {e}");
            return ExitCode::from(1);
        }
    };
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("limiter-gateway: cannot install signal handlers");
        return ExitCode::from(1);
    };
    for addr in running.addrs() {
        println!("limiter-gateway listening on {addr}");
    }
    for addr in running.tls_addrs() {
        println!("limiter-gateway tls on {addr}");
    }
    if let Some(admin) = running.admin_addr() {
        println!("limiter-gateway admin on {admin}");
    }
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    drop(reloader);
    tracing::info!("shutting down: drain delay, then no new connections, then in-flight requests");
    // A reload that was running when the reloader stopped may still hold
    // the gateway for a moment.
    let mut running = running;
    for _ in 0..500 {
        match Arc::try_unwrap(running) {
            Ok(r) => {
                r.shutdown().await;
                // The last spans: a blocking send that needs this runtime.
                #[cfg(feature = "otel")]
                if let Some(provider) = traces {
                    let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
                }
                return ExitCode::SUCCESS;
            }
            Err(shared) => {
                running = shared;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    tracing::error!("a reload still holds the gateway after 5 s; exiting without draining");
    ExitCode::SUCCESS
}
