//! The reload thread: coalesces triggers into quiet periods, re-aims the
//! directory watches, and calls the callback once per real change.
//!
//! # Implementation notes
//!
//! Every trigger (a filesystem event that can mean new contents, a SIGHUP,
//! [`Reloader::trigger`](crate::Reloader::trigger)) is one message on one
//! channel, read by one thread, so triggers are handled in arrival order
//! and the callback never runs twice at once. After the first message of a
//! burst the thread keeps reading until the channel has been quiet for
//! `quiet` (or `max_delay` has passed since the burst began, so a stream of
//! events cannot starve reloads), then compares each path's
//! [`Fingerprint`] with the one of the last callback (or of the start).
//! Only paths whose fingerprint moved are reported, and no callback is made
//! when none moved: an edit followed by a SIGHUP, in one burst or in two,
//! is one reload, and so is a bad edit (one error, not two).
//!
//! The watched directories are each path's parent and its resolved
//! target's parent, recomputed after every burst: a ConfigMap swap moves
//! the target into a new `..YYYY_MM_DD…` directory, whose edits must be seen
//! from then on, and a directory no path resolves into any more is dropped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::fingerprint::{Fingerprint, files_under};
use crate::{Change, Trigger};

/// A message to the reload thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Msg {
    /// Something asks for a reload check.
    Trigger(Trigger),
    /// The [`Reloader`](crate::Reloader) was dropped.
    Stop,
}

/// Whether an event of `kind` can mean a file's contents changed. Opens,
/// reads and metadata changes cannot: a reload opens and reads the file, and
/// counting that would check forever.
pub(crate) fn changes_contents(kind: &EventKind) -> bool {
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) | EventKind::Any | EventKind::Other => true,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
    }
}

/// The directories whose entries decide what `paths` read; `is_dir[i]`
/// says `paths[i]` is a watched directory (then it, every directory under
/// it and the directory of every file's resolved target count too).
pub(crate) fn watch_dirs(paths: &[PathBuf], is_dir: &[bool]) -> BTreeSet<PathBuf> {
    let parent = |p: &Path| {
        p.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    };
    let mut dirs = BTreeSet::new();
    for (path, &dir) in paths.iter().zip(is_dir) {
        dirs.insert(parent(path));
        if let Ok(target) = std::fs::canonicalize(path) {
            dirs.insert(parent(&target));
        }
        if !dir {
            continue;
        }
        for sub in subdirectories(path) {
            if let Ok(target) = std::fs::canonicalize(&sub) {
                dirs.insert(target);
            }
            dirs.insert(sub);
        }
        for file in files_under(path).unwrap_or_default() {
            if let Ok(target) = std::fs::canonicalize(&file) {
                dirs.insert(parent(&target));
            }
        }
    }
    dirs
}

/// `dir` and every directory under it (through symlinks, `.` names
/// skipped).
fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(entries) = std::fs::read_dir(&out[i]) {
            for e in entries.flatten() {
                let path = e.path();
                if !e.file_name().to_string_lossy().starts_with('.')
                    && std::fs::metadata(&path).is_ok_and(|m| m.is_dir())
                    // A link cycle must not walk forever.
                    && out.len() < 10_000
                {
                    out.push(path);
                }
            }
        }
        i += 1;
    }
    out
}

/// Each path's fingerprint now.
pub(crate) fn fingerprints(paths: &[PathBuf], is_dir: &[bool]) -> Vec<Fingerprint> {
    paths
        .iter()
        .zip(is_dir)
        .map(|(p, &dir)| {
            if dir {
                Fingerprint::of_dir(p)
            } else {
                Fingerprint::of(p)
            }
        })
        .collect()
}

/// The thread's state.
pub(crate) struct Worker<F> {
    pub(crate) paths: Vec<PathBuf>,
    /// Per path: a watched directory rather than a file.
    pub(crate) is_dir: Vec<bool>,
    pub(crate) seen: Vec<Fingerprint>,
    pub(crate) watcher: Option<(RecommendedWatcher, BTreeSet<PathBuf>)>,
    pub(crate) quiet: Duration,
    pub(crate) max_delay: Duration,
    pub(crate) reloads: Arc<AtomicU64>,
    pub(crate) stopped: Arc<AtomicBool>,
    pub(crate) on_change: F,
}

impl<F: FnMut(&Change)> Worker<F> {
    /// Runs until [`Msg::Stop`] or until every sender is gone.
    pub(crate) fn run(mut self, rx: Receiver<Msg>) {
        while let Ok(Msg::Trigger(first)) = rx.recv() {
            let mut trigger = first;
            let began = Instant::now();
            loop {
                let left = self.max_delay.saturating_sub(began.elapsed());
                if left.is_zero() {
                    break;
                }
                match rx.recv_timeout(self.quiet.min(left)) {
                    Ok(Msg::Trigger(t)) => trigger = trigger.union(t),
                    Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => break,
                }
            }
            self.rewatch();
            self.check(trigger);
        }
    }

    /// Calls back if some path's contents moved since the last call.
    fn check(&mut self, trigger: Trigger) {
        let now = fingerprints(&self.paths, &self.is_dir);
        let changed: Vec<PathBuf> = self
            .paths
            .iter()
            .zip(now.iter().zip(&self.seen))
            .filter(|(_, (now, seen))| now != seen)
            .map(|(p, _)| p.clone())
            .collect();
        // Acquire: see Reloader's drop.
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        if changed.is_empty() {
            if trigger.signal {
                tracing::info!(
                    files = ?self.paths,
                    "SIGHUP: the files are as last loaded; nothing to reload"
                );
            }
            return;
        }
        self.seen = now;
        // Relaxed: a statistic; the callback's own effects are what callers
        // synchronise on.
        self.reloads.fetch_add(1, Ordering::Relaxed);
        (self.on_change)(&Change { changed, trigger });
    }

    /// Points the watches at the directories the paths resolve into now.
    fn rewatch(&mut self) {
        let Some((watcher, watched)) = &mut self.watcher else {
            return;
        };
        let want = watch_dirs(&self.paths, &self.is_dir);
        for gone in watched.difference(&want) {
            // The directory may be gone already (a ConfigMap's old one).
            let _ = watcher.unwatch(gone);
        }
        for new in want.difference(watched) {
            if let Err(e) = watcher.watch(new, RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %new.display(), error = %e, "cannot watch a configuration directory");
            }
        }
        *watched = want;
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
            EventKind::Create(CreateKind::Any),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
        ] {
            assert!(changes_contents(&kind), "{kind:?}");
        }
        // What a reload does to the file must not trigger another check.
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)),
        ] {
            assert!(!changes_contents(&kind), "{kind:?}");
        }
    }

    #[test]
    fn a_link_is_watched_where_it_is_and_where_it_points() {
        let dir = std::env::temp_dir().join(format!("limiter-reload-wd-{}", std::process::id()));
        let (conf, real) = (dir.join("conf"), dir.join("real"));
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("r.yaml"), "").unwrap();
        let _ = std::fs::remove_file(conf.join("r.yaml"));
        std::os::unix::fs::symlink(real.join("r.yaml"), conf.join("r.yaml")).unwrap();
        let dirs = watch_dirs(
            &[conf.join("r.yaml"), PathBuf::from("plain.yaml")],
            &[false, false],
        );
        let real = std::fs::canonicalize(&real).unwrap();
        assert!(dirs.contains(&conf), "{dirs:?}");
        assert!(dirs.contains(&real), "{dirs:?}");
        assert!(dirs.contains(Path::new(".")), "{dirs:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
