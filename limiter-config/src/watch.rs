//! [`RuleSet::watch`]: reload when the file changes on disk; and
//! [`RuleSet::reload_on_sighup`]: reload on `SIGHUP`, as daemons do.
//!
//! The watcher watches the file's *directory* (editors and config managers
//! often replace a file by renaming a new one over it, which a watch on the
//! file itself would lose), keeps the events naming the file, and debounces
//! them ([`Watcher::DEBOUNCE`]) so that one save, seen as several events,
//! is one reload. Each reload is [`RuleSet::reload`]: a bad edit is logged
//! and counted and changes nothing. Waiting for an applied edit:
//! [`RuleSet::subscribe`].

use std::path::PathBuf;
use std::time::Duration;

use notify_debouncer_full::notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify_debouncer_full::notify::{self, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};

use crate::RuleClock;
use crate::error::ConfigErrors;
use crate::ruleset::{ReloadReport, RuleSet};

/// A running file watcher; dropping it stops watching.
pub struct Watcher {
    _debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
    path: PathBuf,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").field("path", &self.path).finish()
    }
}

impl Watcher {
    /// How long the watcher waits for a burst of events to end.
    pub const DEBOUNCE: Duration = Duration::from_millis(100);
}

/// Whether an event of `kind` can mean the file's contents changed. Opens,
/// reads and metadata changes cannot: the reload itself opens and reads the
/// file, and counting that would reload forever.
pub(crate) fn changes_contents(kind: &EventKind) -> bool {
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) | EventKind::Any | EventKind::Other => true,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
    }
}

impl<C: RuleClock> RuleSet<C> {
    /// Starts reloading on every change of the file.
    ///
    /// # Errors
    ///
    /// The watcher's error (no such directory, no inotify slots left).
    pub fn watch(&self) -> Result<Watcher, notify::Error> {
        self.watch_with(|_| {})
    }

    /// Starts reloading on every change of the file, calling `on_reload`
    /// with each outcome (a bad edit's errors too).
    ///
    /// # Errors
    ///
    /// As [`watch`](RuleSet::watch).
    pub fn watch_with(
        &self,
        on_reload: impl Fn(Result<&ReloadReport, &ConfigErrors>) + Send + 'static,
    ) -> Result<Watcher, notify::Error> {
        let path = std::path::absolute(self.path()).unwrap_or_else(|_| self.path().to_path_buf());
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), PathBuf::from);
        let name = path.file_name().map(|n| n.to_owned());
        let rules = self.clone();
        let mut debouncer = new_debouncer(
            Watcher::DEBOUNCE,
            None,
            move |events: DebounceEventResult| match events {
                Ok(events) => {
                    let ours = events.iter().any(|e| {
                        changes_contents(&e.kind)
                            && e.paths.iter().any(|p| p.file_name() == name.as_deref())
                    });
                    if ours {
                        // Errors are also logged and counted by reload.
                        match rules.reload() {
                            Ok(report) => on_reload(Ok(&report)),
                            Err(errors) => on_reload(Err(&errors)),
                        }
                    }
                }
                Err(errors) => {
                    for e in errors {
                        tracing::error!(error = %e, "rate-limit rules watcher failed");
                    }
                }
            },
        )?;
        debouncer.watch(&dir, RecursiveMode::NonRecursive)?;
        Ok(Watcher {
            _debouncer: debouncer,
            path,
        })
    }
}

impl<C: RuleClock> RuleSet<C> {
    /// Reloads on every `SIGHUP`, from a task on the current tokio runtime,
    /// until the task is aborted. The handler is installed before this
    /// returns, so a `SIGHUP` sent afterwards never takes the default action
    /// (ending the process). Outcomes as [`reload`](RuleSet::reload): logged,
    /// counted, and announced by [`subscribe`](RuleSet::subscribe).
    ///
    /// # Errors
    ///
    /// The signal handler could not be installed.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    #[cfg(unix)]
    pub fn reload_on_sighup(&self) -> std::io::Result<tokio::task::JoinHandle<()>> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hup = signal(SignalKind::hangup())?;
        let rules = self.clone();
        Ok(tokio::spawn(async move {
            while hup.recv().await.is_some() {
                // Errors are logged and counted by reload.
                let _ = rules.reload();
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, MetadataKind, RemoveKind, RenameMode};

    #[test]
    fn only_content_changes_count() {
        for kind in [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
        ] {
            assert!(changes_contents(&kind), "{kind:?}");
        }
        // What a reload does to the file must not trigger another.
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)),
        ] {
            assert!(!changes_contents(&kind), "{kind:?}");
        }
    }
}
