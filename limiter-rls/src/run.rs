//! [`run`]: the binary's whole service, for an embedding process that
//! wants the same behaviour from its own `main`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::RuleSet;
use crate::backend::AnyStore;
use crate::settings::{ConfigSource, Settings};
use crate::tls::TlsListener;

/// The whole service as the binary runs it, until SIGTERM or Ctrl-C: the
/// rules (the config directory, reloaded on change, or xDS), the store,
/// the stats sinks, traces when `settings.tracing` asks, the three
/// listeners (gRPC, HTTP, debug), then a graceful stop. Call it inside a
/// multi-threaded tokio runtime; `settings` from [`Settings::from_env`].
///
/// # Errors
///
/// What stopped it from starting (a bad config, a store or listener that
/// cannot be set up), or a listener that failed while serving.
pub async fn run(settings: Settings) -> Result<(), Box<dyn std::error::Error>> {
    let file_config = settings.config_source == ConfigSource::File;
    // From xDS the config arrives later: empty until then.
    let rules = if file_config {
        RuleSet::load_dir(&settings.config_dir)?
    } else {
        RuleSet::default()
    };
    let metrics = crate::exporter::install();
    let recorder = crate::exporter::recorder(&settings).await?;
    let backend: AnyStore = settings.backend().await?;
    let limiter = crate::RateLimitService::new(rules, backend, settings.options.clone(), recorder);
    // Spans are queued and sent by the provider's own thread; shut down on
    // exit to send what is queued.
    #[cfg(feature = "otel")]
    let (limiter, traces) = match &settings.tracing {
        None => (limiter, None),
        Some(config) => {
            let provider = limiter_tower::otel::tracer_provider(config)
                .map_err(|e| format!("OTEL_EXPORTER_OTLP_ENDPOINT {}: {e}", config.endpoint))?;
            let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "limiter-rls");
            (limiter.with_tracer(tracer), Some(provider))
        }
    };
    #[cfg(not(feature = "otel"))]
    if settings.tracing.is_some() {
        return Err("TRACING_ENABLED: this build has no tracing (cargo feature `otel`)".into());
    }
    // Every way out, an error included, sends the queued spans.
    let result = serve(&settings, Arc::new(limiter), metrics).await;
    #[cfg(feature = "otel")]
    if let Some(provider) = traces {
        // Blocks while the last batch is sent: off the runtime's workers.
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
    result
}

/// The listeners, reload and xDS, until a signal or a listener's failure.
async fn serve(
    settings: &Settings,
    limiter: Arc<crate::RateLimitService<AnyStore>>,
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let _reloader = if settings.config_source == ConfigSource::File {
        limiter.recorder().service("config_load_success");
        Some(crate::reload::spawn(
            Arc::clone(&limiter),
            &crate::reload::Watch {
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
        let mut loaded = crate::xds::spawn(Arc::clone(&limiter), (**xds).clone())?;
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
    let shared = Arc::new(crate::server::Shared {
        limiter,
        healthy: AtomicBool::new(true),
        metrics,
        drain_delay: settings.drain_delay,
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let mut serving = tokio::spawn(crate::server::serve_with_tls(
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
    Ok(())
}
