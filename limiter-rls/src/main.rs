//! `limiter-rls`: Envoy's rate limit service, configured as
//! envoyproxy/ratelimit is (environment variables and the YAML directory;
//! see docs/rls.md). Prints `limiter-rls listening grpc=… http=… debug=…`
//! once bound; exits 1 with the reason on a bad setting or config, 0 after
//! a graceful SIGTERM. `--help` (the environment variables it reads) and
//! `--version` answer without starting anything; other arguments exit 2.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use limiter_rls::backend::AnyBackend;
use limiter_rls::settings::{ConfigSource, Settings};
use limiter_rls::tls::TlsListener;
use limiter_rls::{RuleSet, server};

/// `limiter-rls --version`: the version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("LIMITER_COMMIT"), ")");

fn main() -> ExitCode {
    // The only arguments: everything else is configured by the environment,
    // as envoyproxy/ratelimit is. Both answer before anything is read or bound.
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    match args.first().map(|a| a.to_str()) {
        None => {}
        Some(Some("-h" | "--help")) if args.len() == 1 => {
            print!("{}", limiter_rls::variables::help());
            return ExitCode::SUCCESS;
        }
        Some(Some("-V" | "--version")) if args.len() == 1 => {
            println!("limiter-rls {VERSION}");
            return ExitCode::SUCCESS;
        }
        Some(_) => {
            eprintln!(
                "limiter-rls: unexpected arguments {args:?}; it takes --help or --version \
                 (the settings are environment variables: see --help)"
            );
            return ExitCode::from(2);
        }
    }
    let settings = match Settings::from_env(|k| std::env::var(k).ok()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("limiter-rls: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&settings.log_level))
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("limiter-rls: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("limiter-rls: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(settings: Settings) -> Result<(), Box<dyn std::error::Error>> {
    let file_config = settings.config_source == ConfigSource::File;
    // From xDS the config arrives later: empty until then.
    let rules = if file_config {
        RuleSet::load_dir(&settings.config_dir)?
    } else {
        RuleSet::default()
    };
    let metrics = limiter_rls::exporter::install();
    let recorder = limiter_rls::exporter::recorder(&settings).await?;
    let backend: AnyBackend = settings.backend().await?;
    let limiter = limiter_rls::RateLimiter::new(rules, backend, settings.options.clone(), recorder);
    // Spans are queued and sent by the provider's own thread; shut down on
    // exit to send what is queued.
    #[cfg(feature = "otel")]
    let (limiter, traces) = match &settings.tracing {
        None => (limiter, None),
        Some(config) => {
            let provider = limiter_rls::otel::tracer_provider(config)
                .map_err(|e| format!("OTEL_EXPORTER_OTLP_ENDPOINT: {e}"))?;
            let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "limiter-rls");
            (limiter.with_tracer(tracer), Some(provider))
        }
    };
    #[cfg(not(feature = "otel"))]
    if settings.tracing.is_some() {
        return Err("TRACING_ENABLED: this build has no tracing (cargo feature `otel`)".into());
    }
    let limiter = Arc::new(limiter);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let _reloader = if file_config {
        limiter.recorder().service("config_load_success");
        Some(limiter_rls::reload::spawn(
            Arc::clone(&limiter),
            &limiter_rls::reload::Watch {
                config_dir: settings.config_dir.clone(),
                runtime_root: settings.runtime_root.clone(),
                watch_root: settings.watch_root,
                quiet: settings.reload_interval,
            },
        )?)
    } else {
        None
    };
    let grpc_tls = match settings.grpc_tls.clone() {
        None => None,
        Some(files) => Some(Arc::new(
            TlsListener::start(files, settings.reload_interval)
                .map_err(|e| format!("GRPC_SERVER_USE_TLS: {e}"))?,
        )),
    };
    if let ConfigSource::Xds(xds) = &settings.config_source {
        let mut loaded = limiter_rls::xds::spawn(Arc::clone(&limiter), (**xds).clone())?;
        // As theirs: no listener until the first config, unless forced.
        if !settings.force_start {
            tracing::info!(url = %xds.server_url, "waiting for the first config from the xDS server");
            tokio::select! {
                _ = loaded.wait_for(|l| *l) => {}
                _ = term.recv() => return Ok(()),
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
    }
    let shared = Arc::new(server::Shared {
        limiter,
        healthy: AtomicBool::new(true),
        metrics,
        drain_delay: settings.drain_delay,
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let mut serving = tokio::spawn(server::serve_with_tls(
        Arc::clone(&shared),
        [
            settings.grpc.clone(),
            settings.http.clone(),
            settings.debug.clone(),
        ],
        grpc_tls,
        stop_rx,
        bound_tx,
    ));
    if let Ok(a) = bound_rx.await {
        println!(
            "limiter-rls listening grpc={} http={} debug={}",
            a.grpc, a.http, a.debug
        );
    }
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
        r = &mut serving => return Ok(r??),
    }
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    serving.await??;
    #[cfg(feature = "otel")]
    if let Some(provider) = traces {
        // Blocks while the last batch is sent: off the runtime's workers.
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
    Ok(())
}
