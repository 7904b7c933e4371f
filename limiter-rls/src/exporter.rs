//! The process's stats sinks: the Prometheus recorder behind `/metrics`
//! and, with `USE_STATSD=true`, the statsd sink.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::settings::Settings;
use crate::stats::Recorder;
use crate::statsd::Statsd;

/// Installs the Prometheus recorder as the global `metrics` recorder (once;
/// later calls return the same handle). `None` if another recorder was
/// installed first.
pub(crate) fn install() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok().map(|()| handle)
        })
        .clone()
}

/// The stats recorder `settings` ask for.
///
/// # Errors
///
/// The statsd address does not resolve, or its socket cannot be bound.
pub(crate) async fn recorder(settings: &Settings) -> std::io::Result<Recorder> {
    let Some((host, port)) = &settings.statsd else {
        return Ok(Recorder::new(None));
    };
    let addr = tokio::net::lookup_host((host.as_str(), *port))
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("STATSD_HOST {host} does not resolve")))?;
    Ok(Recorder::new(Some(
        Statsd::start(addr, settings.stats_flush).await?,
    )))
}
