//! Reloading the running gateway: the rules file and the gateway file,
//! through the workspace's one reload mechanism (`limiter-reload`).
//!
//! One [`Reloader`] watches both files (each file's directory and its
//! resolved target's: edits in place, editor renames and Kubernetes
//! ConfigMap `..data` swaps) and `SIGHUP`, coalesced and gated by content:
//! one change is one reload of the file that changed, a bad file one error.
//!
//! * The rules file: [`RuleSet::reload`] (limiter state kept, a bad file
//!   logged on one line, counted in `rate_limit_config_errors_total`, the
//!   old rules kept). Rules that no request can reach are warned about
//!   after every applied reload ([`unrouted_rules`]).
//! * The TLS certificate and key ([`Running::reload_tls`]): a change of
//!   either puts the pair in force for new handshakes (a pair that does not
//!   load keeps the one in force, logged).
//! * The gateway file: read and checked whole (a bad one is one `ERROR`
//!   line and changes nothing), then [`Running::reconfigure`]: upstreams
//!   (new pools: addresses, balancing, health checks), timeouts, connection limits, path mode and access log apply to new
//!   requests and connections; the listeners, the TLS listeners and files, the admin listener, the
//!   per-listener cap and the log format cannot change in a running
//!   process, which one `WARN` line says, and keep running as they are.

use std::path::PathBuf;
use std::sync::Arc;

use limiter_config::RuleSet;
use limiter_reload::{ReloadError, Reloader};

use crate::config::GatewayConfig;
use crate::server::Running;

/// Reads the gateway file again, with the command line's overrides.
pub type LoadGateway = Box<dyn Fn() -> Result<GatewayConfig, String> + Send>;

/// The rules that no request can ever reach through the gateway: a rule
/// without `match` is only a named limiter (for code that calls it), so the
/// gateway never applies it.
pub(crate) fn unrouted_rules(rules: &RuleSet) -> Vec<String> {
    rules
        .snapshot()
        .rules()
        .filter(|r| r.spec().matcher.is_none())
        .map(|r| r.spec().name.clone())
        .collect()
}

/// Logs one warning per rule [`unrouted_rules`] names.
pub(crate) fn warn_unrouted(rules: &RuleSet) {
    for rule in unrouted_rules(rules) {
        tracing::warn!(
            rule,
            file = %rules.path().display(),
            "rule has no `match`: the gateway never applies it (add match: {{ prefix: / }} to limit every request)"
        );
    }
}

/// Starts reloading `rules`, the TLS certificate and key of `running` and,
/// given `gateway`, the gateway file (read by `load`, which applies the
/// command line's overrides), on file changes (unless `watch_files` is
/// false) and on `SIGHUP`. Call it inside the runtime, after
/// [`Gateway::start`](crate::Gateway::start); the `SIGHUP` handler is
/// installed when it returns.
///
/// # Errors
///
/// The watch or the signal handler could not be set up.
pub fn watch(
    rules: &RuleSet,
    gateway: Option<(PathBuf, LoadGateway)>,
    running: &Arc<Running>,
    watch_files: bool,
) -> Result<Reloader, ReloadError> {
    warn_unrouted(rules);
    let mut builder = Reloader::builder()
        .path(rules.path())
        .watch(watch_files)
        .sighup(true);
    let rules_path = std::path::absolute(rules.path()).unwrap_or_else(|_| rules.path().into());
    let tls_files: Vec<PathBuf> = running
        .tls_files()
        .into_iter()
        .flatten()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.into()))
        .collect();
    for file in &tls_files {
        builder = builder.path(file);
    }
    let (gateway_path, load) = match gateway {
        Some((path, load)) => {
            builder = builder.path(&path);
            (Some(path), Some(load))
        }
        None => (None, None),
    };
    let rules = rules.clone();
    let running = Arc::downgrade(running);
    builder.start(move |change| {
        if change.contains(&rules_path) && rules.reload().is_ok() {
            // Errors are logged (one line) and counted by reload.
            warn_unrouted(&rules);
        }
        let Some(running) = running.upgrade() else {
            return;
        };
        if tls_files.iter().any(|f| change.contains(f))
            && let Err(error) = running.reload_tls()
        {
            tracing::warn!(%error, "TLS certificate not reloaded; the one in force stays");
        }
        let (Some(path), Some(load)) = (&gateway_path, &load) else {
            return;
        };
        if !change.contains(path) {
            return;
        }
        match load().and_then(|config| running.reconfigure(config).map_err(|e| e.to_string())) {
            Ok(kept) => {
                if kept.is_empty() {
                    tracing::info!(file = %path.display(), "gateway file reloaded");
                } else {
                    tracing::warn!(
                        file = %path.display(),
                        unchanged = ?kept,
                        "gateway file reloaded; these settings need a restart and keep their running values"
                    );
                }
            }
            Err(error) => tracing::error!(
                file = %path.display(),
                %error,
                "gateway file not reloaded; the running configuration stays"
            ),
        }
    })
}
