//! Hot reload of the config directory, keeping limiter state.
//!
//! The directory's files are read every `interval` and on SIGHUP; when
//! their names or contents changed, the whole directory is parsed again and,
//! if every file is valid, put in force at once (`config_load_success`); a
//! bad file keeps the old rule set (`config_load_error`, the errors logged
//! with file:line:column). Comparing contents rather than watching events
//! makes every way of changing the files look the same: an in-place edit,
//! a rename over the file, and Kubernetes' ConfigMap update, which swaps the
//! `..data` symlink to a new timestamped directory (the files are read
//! through the symlinks, so the swap changes what is read). A reload never
//! touches counters: they are keyed by descriptor and limit.
//!
//! This module is the only place that knows how changes are noticed, so a
//! shared directory-watching mechanism can replace it without touching the
//! service.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::Backend;
use crate::config::RuleSet;
use crate::service::RateLimiter;

fn fingerprint(files: &[(PathBuf, String)]) -> u64 {
    let mut h = DefaultHasher::new();
    files.hash(&mut h);
    h.finish()
}

/// Reads the directory; `None` if it cannot be read (logged).
fn read(dir: &std::path::Path) -> Option<Vec<(PathBuf, String)>> {
    match crate::config::read_dir(dir) {
        Ok(files) => Some(files),
        Err(e) => {
            tracing::error!(error = %e, "cannot read the config directory");
            None
        }
    }
}

/// Reloads `dir` into `limiter` until the runtime stops; see the module
/// docs. `loaded` is the text the service started with.
pub fn spawn<B: Backend>(
    limiter: Arc<RateLimiter<B>>,
    dir: PathBuf,
    interval: Duration,
    loaded: &[(PathBuf, String)],
) {
    let mut last = fingerprint(loaded);
    tokio::spawn(async move {
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        let mut tick = tokio::time::interval(interval.max(Duration::from_millis(10)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let forced = tokio::select! {
                _ = tick.tick() => false,
                Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => true,
            };
            let Some(files) = read(&dir) else { continue };
            let now = fingerprint(&files);
            if now == last && !forced {
                continue;
            }
            last = now;
            match RuleSet::from_files(files) {
                Ok(rules) => {
                    tracing::info!(domains = rules.domains().count(), "config reloaded");
                    limiter.set_rules(rules);
                    limiter.recorder().service("config_load_success");
                }
                Err(errors) => {
                    tracing::error!(
                        "config not reloaded, the previous one stays in force:\n{errors}"
                    );
                    limiter.recorder().service("config_load_error");
                }
            }
        }
    });
}
