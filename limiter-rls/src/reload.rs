//! Hot reload of the config directory through limiter-reload (the one
//! reload mechanism of the workspace), keeping limiter state.
//!
//! The reloader watches the config directory as one unit
//! ([`limiter_reload::ReloaderBuilder::dir`]): a file added, removed or
//! edited under it, a rename over a file, and Kubernetes' ConfigMap update
//! (which swaps the `..data` symlink to a new timestamped directory) are
//! each one change, as is `SIGHUP` when something changed. With
//! `RUNTIME_WATCH_ROOT` (their default) the runtime root is watched too, so
//! a swap of the root itself (their `current` symlink) is seen; without it
//! only the config directory is, and a root swap waits for `SIGHUP`.
//!
//! On a change the whole directory is parsed again and, if every file is
//! valid, put in force at once (`config_load_success`); a bad file keeps
//! the old rule set (`config_load_error`, the errors logged with
//! file:line:column). A reload never touches counters: they are keyed by
//! descriptor and limit.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use limiter_reload::{ReloadError, Reloader};

use crate::backend::CounterStore;
use crate::config::RuleSet;
use crate::service::RateLimitService;

/// What to watch and how.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    /// The config directory (`RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`).
    pub config_dir: PathBuf,
    /// `RUNTIME_ROOT`, watched as well when `watch_root`.
    pub runtime_root: PathBuf,
    /// `RUNTIME_WATCH_ROOT`.
    pub watch_root: bool,
    /// `RLS_RELOAD_INTERVAL`: how long changes must be quiet before the
    /// directory is read.
    pub quiet: Duration,
}

/// Starts reloading `watch.config_dir` into `limiter`; see the module
/// docs. Reloading stops when the returned [`Reloader`] is dropped. Call
/// it inside the tokio runtime (for `SIGHUP`), right after loading the
/// config (the directory as it is now is the baseline).
///
/// # Errors
///
/// limiter-reload's: the directory cannot be watched, or the `SIGHUP`
/// handler cannot be installed.
pub(crate) fn spawn<B: CounterStore>(
    limiter: Arc<RateLimitService<B>>,
    watch: &Watch,
) -> Result<Reloader, ReloadError> {
    let mut builder = Reloader::builder()
        .dir(&watch.config_dir)
        .sighup(true)
        .quiet(watch.quiet);
    if watch.watch_root && watch.runtime_root != watch.config_dir {
        builder = builder.dir(&watch.runtime_root);
    }
    let dir = watch.config_dir.clone();
    builder.start(move |_change| match RuleSet::load_dir(&dir) {
        Ok(rules) => {
            tracing::info!(domains = rules.domains().count(), "config reloaded");
            limiter.set_rules(rules);
            limiter.recorder().service("config_load_success");
        }
        Err(errors) => {
            tracing::error!("config not reloaded, the previous one stays in force:\n{errors}");
            limiter.recorder().service("config_load_error");
        }
    })
}
