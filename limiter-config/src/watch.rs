//! Reloading a rule set when its file changes or on `SIGHUP`, through the
//! workspace's one reload mechanism, `limiter-reload`.
//!
//! What that guarantees (see its crate doc): the file's directory and its
//! resolved target's are watched, so an edit in place, an editor's rename
//! and a Kubernetes ConfigMap `..data` symlink swap are all seen; triggers
//! (events, `SIGHUP`) are coalesced and gated by the file's contents, so one
//! change is one [`RuleSet::reload`], and a bad file is one error (logged,
//! counted in `rate_limit_config_errors_total`, the old rules kept), however
//! many triggers it drew. Waiting for an applied edit:
//! [`RuleSet::subscribe`].

use limiter_reload::{ReloadError, Reloader, ReloaderBuilder};

use crate::RuleClock;
use crate::error::ConfigErrors;
use crate::ruleset::{ReloadReport, RuleSet};

/// A running watcher of a rule set's file; dropping it stops it.
pub type Watcher = Reloader;

impl<C: RuleClock> RuleSet<C> {
    /// Starts reloading on every change of the file's contents.
    ///
    /// # Errors
    ///
    /// The watch could not be set up ([`ReloadError`]).
    pub fn watch(&self) -> Result<Watcher, ReloadError> {
        self.watch_with(|_| {})
    }

    /// Starts reloading on every change of the file's contents, calling
    /// `on_reload` with each outcome (a bad edit's errors too).
    ///
    /// # Errors
    ///
    /// As [`watch`](RuleSet::watch).
    pub fn watch_with(
        &self,
        on_reload: impl Fn(Result<&ReloadReport, &ConfigErrors>) + Send + 'static,
    ) -> Result<Watcher, ReloadError> {
        self.reload_with(Reloader::builder(), on_reload)
    }

    /// Reloads on `SIGHUP` when the file's contents changed (the file is
    /// not watched). Needs a tokio runtime; the handler is installed before
    /// this returns, so a `SIGHUP` sent afterwards never takes the default
    /// action (ending the process).
    ///
    /// # Errors
    ///
    /// No runtime, or the handler could not be installed.
    pub fn reload_on_sighup(&self) -> Result<Watcher, ReloadError> {
        self.reload_with(Reloader::builder().watch(false).sighup(true), |_| {})
    }

    /// Reloads on what `builder` is set to notice (the file is added to its
    /// paths), calling `on_reload` with each outcome: for example
    /// `Reloader::builder().sighup(true)` for the watch and `SIGHUP`.
    ///
    /// # Errors
    ///
    /// As [`ReloaderBuilder::start`].
    pub fn reload_with(
        &self,
        builder: ReloaderBuilder,
        on_reload: impl Fn(Result<&ReloadReport, &ConfigErrors>) + Send + 'static,
    ) -> Result<Watcher, ReloadError> {
        let rules = self.clone();
        builder.path(self.path()).start(move |_| {
            // Errors are also logged and counted by reload.
            match rules.reload() {
                Ok(report) => on_reload(Ok(&report)),
                Err(errors) => on_reload(Err(&errors)),
            }
        })
    }
}
