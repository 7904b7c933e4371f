//! Reload configuration files the way operators change them: one
//! mechanism for every file a process reloads.
//!
//! A [`Reloader`] watches one or more files (or directories of files,
//! [`ReloaderBuilder::dir`]: a file added, removed or edited under one is a
//! change of it) and calls back once per change of their contents, however
//! the change arrives:
//!
//! * **an edit in place** (`echo … > rules.yaml`, an editor that truncates
//!   and writes);
//! * **an editor-style save**: a new file renamed over the old one;
//! * **a Kubernetes ConfigMap update**: the kubelet writes a new
//!   `..YYYY_MM_DD…` directory, points a temporary `..data_tmp` symlink at
//!   it and renames that over `..data`; `rules.yaml` (a link to
//!   `..data/rules.yaml`) now reads the new contents without any event
//!   naming it;
//! * **an edit of a symlink's target** in another directory;
//! * **`SIGHUP`** ([`ReloaderBuilder::sighup`]), as daemons are reloaded, and
//!   [`Reloader::trigger`] for a program's own reasons.
//!
//! # Guarantees
//!
//! * **One change, one callback.** Triggers are coalesced until they have
//!   been quiet for [`ReloaderBuilder::quiet`] (100 ms by default, at most
//!   [`ReloaderBuilder::max_delay`], 1 s, after the first), then each file is
//!   read and compared with what the last callback saw. The callback runs
//!   only if some file's contents moved, and [`Change::changed`] names which.
//!   A save followed by `SIGHUP` is one callback, whether the two fall into
//!   one quiet period or not; a bad file is offered once, not once per
//!   trigger. A `SIGHUP` when nothing changed logs one line and calls
//!   nothing.
//! * **What is watched is a directory**, the file's own and its resolved
//!   target's (re-resolved after every change), never the file's inode,
//!   which a rename or a symlink swap would leave behind.
//! * **One callback at a time**, on the reloader's own thread, in trigger
//!   order. It may block (a reload parses and builds); triggers arriving
//!   meanwhile queue and are coalesced after it returns.
//! * **Dropping the [`Reloader`] stops it**: no callback starts afterwards
//!   (one running finishes).
//!
//! # Example
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use limiter_reload::Reloader;
//!
//! # let dir = std::env::temp_dir().join(format!("limiter-reload-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let path = dir.join("app.toml");
//! std::fs::write(&path, "rate = 10\n")?;
//! let (tx, rx) = mpsc::channel();
//! let reloader = Reloader::builder()
//!     .path(&path)
//!     .quiet(Duration::from_millis(20))
//!     .start(move |change| {
//!         // Reload what `change.changed()` names; here, just report it.
//!         let _ = tx.send(change.changed().to_vec());
//!     })?;
//! std::fs::write(&path, "rate = 20\n")?;
//! let changed = rx.recv_timeout(Duration::from_secs(20))?;
//! assert_eq!(changed, [std::path::absolute(&path)?]);
//! assert_eq!(reloader.reloads(), 1);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod fingerprint;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

use notify::{RecommendedWatcher, Watcher as _};

use crate::worker::{Msg, Worker, changes_contents, fingerprints, watch_dirs};

/// What asked for the check that found a change (several can coalesce).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trigger {
    /// A filesystem event in a watched directory.
    pub files: bool,
    /// A `SIGHUP`.
    pub signal: bool,
    /// [`Reloader::trigger`].
    pub manual: bool,
}

impl Trigger {
    fn union(self, other: Trigger) -> Trigger {
        Trigger {
            files: self.files | other.files,
            signal: self.signal | other.signal,
            manual: self.manual | other.manual,
        }
    }
}

/// One change: the files whose contents moved and what noticed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    changed: Vec<PathBuf>,
    trigger: Trigger,
}

impl Change {
    /// The watched paths (absolute, as given, links not resolved) whose
    /// contents differ from the last callback's, in the order they were
    /// added to the builder. Never empty.
    pub fn changed(&self) -> &[PathBuf] {
        &self.changed
    }

    /// Whether `path` (as given to the builder, made absolute) changed.
    pub fn contains(&self, path: &Path) -> bool {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        self.changed.contains(&path)
    }

    /// What noticed it.
    pub fn trigger(&self) -> Trigger {
        self.trigger
    }
}

/// A reloader that could not start.
#[derive(Debug)]
pub enum ReloadError {
    /// The builder was given no path.
    NoPath,
    /// The directory watch could not be set up (no such directory, no
    /// inotify watches left: raise `fs.inotify.max_user_watches`).
    Watch(notify::Error),
    /// The `SIGHUP` handler could not be installed.
    Signal(std::io::Error),
    /// [`ReloaderBuilder::sighup`] outside a tokio runtime (the handler
    /// lives on the runtime's signal driver): start it from within one.
    NoRuntime,
    /// The reload thread could not be spawned.
    Thread(std::io::Error),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::NoPath => write!(f, "no file to reload: give the reloader a path"),
            ReloadError::Watch(e) => write!(f, "cannot watch the configuration directory: {e}"),
            ReloadError::Signal(e) => write!(f, "cannot install the SIGHUP handler: {e}"),
            ReloadError::NoRuntime => write!(
                f,
                "SIGHUP reloading needs a tokio runtime: start the reloader inside one"
            ),
            ReloadError::Thread(e) => write!(f, "cannot spawn the reload thread: {e}"),
        }
    }
}

impl std::error::Error for ReloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReloadError::Watch(e) => Some(e),
            ReloadError::Signal(e) | ReloadError::Thread(e) => Some(e),
            ReloadError::NoPath | ReloadError::NoRuntime => None,
        }
    }
}

/// How a [`Reloader`] is set up: [`Reloader::builder`].
#[derive(Debug, Clone)]
pub struct ReloaderBuilder {
    paths: Vec<PathBuf>,
    is_dir: Vec<bool>,
    watch: bool,
    sighup: bool,
    quiet: Duration,
    max_delay: Duration,
}

impl Default for ReloaderBuilder {
    fn default() -> Self {
        ReloaderBuilder {
            paths: Vec::new(),
            is_dir: Vec::new(),
            watch: true,
            sighup: false,
            quiet: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        }
    }
}

impl ReloaderBuilder {
    /// Adds a file to watch (made absolute against the current directory
    /// now; it need not exist yet).
    pub fn path(mut self, path: impl AsRef<Path>) -> Self {
        let path = path.as_ref();
        self.paths
            .push(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
        self.is_dir.push(false);
        self
    }

    /// Adds a directory to watch as one unit: the files under it
    /// (recursively, read through symlinks, names that start with `.`
    /// skipped, as a ConfigMap's `..data` machinery is) and their
    /// contents. A file added, removed, renamed or edited anywhere under
    /// it, and a symlink swap that changes what is read there, is a change
    /// of the directory; [`Change::changed`] names the directory. The
    /// directory itself may be a symlink, and is re-resolved after every
    /// change like a file. Made absolute now; it need not exist yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// use limiter_reload::Reloader;
    ///
    /// # let dir = std::env::temp_dir().join(format!("limiter-reload-dirdoc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.yaml"), "a: 1\n")?;
    /// let (tx, rx) = mpsc::channel();
    /// let _reloader = Reloader::builder()
    ///     .dir(&dir)
    ///     .quiet(Duration::from_millis(20))
    ///     .start(move |change| {
    ///         let _ = tx.send(change.changed().to_vec());
    ///     })?;
    /// // A new file is a change of the directory.
    /// std::fs::write(dir.join("b.yaml"), "b: 1\n")?;
    /// assert_eq!(rx.recv_timeout(Duration::from_secs(20))?, [std::path::absolute(&dir)?]);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dir(mut self, dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        self.paths
            .push(std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()));
        self.is_dir.push(true);
        self
    }

    /// Whether filesystem events trigger a check (default `true`; `false`
    /// leaves `SIGHUP` and [`Reloader::trigger`]).
    pub fn watch(mut self, watch: bool) -> Self {
        self.watch = watch;
        self
    }

    /// Whether `SIGHUP` triggers a check (default `false`). Installed before
    /// [`start`](Self::start) returns, so a `SIGHUP` sent afterwards never
    /// takes its default action (ending the process).
    pub fn sighup(mut self, sighup: bool) -> Self {
        self.sighup = sighup;
        self
    }

    /// How long triggers must be quiet before the check (default 100 ms).
    pub fn quiet(mut self, quiet: Duration) -> Self {
        self.quiet = quiet;
        self
    }

    /// The longest a check waits after the first trigger of a burst
    /// (default 1 s), however busy the directory.
    pub fn max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// Starts watching; `on_change` runs on the reloader's thread once per
    /// change (the module doc's guarantees). The files' contents now are the
    /// baseline: start the reloader right after loading them.
    ///
    /// # Errors
    ///
    /// [`ReloadError`]: no path, the watch, the signal handler (or no
    /// runtime for it), the thread.
    pub fn start(
        self,
        on_change: impl FnMut(&Change) + Send + 'static,
    ) -> Result<Reloader, ReloadError> {
        if self.paths.is_empty() {
            return Err(ReloadError::NoPath);
        }
        let (tx, rx) = mpsc::channel();
        let watcher = if self.watch {
            let events = tx.clone();
            let mut watcher = RecommendedWatcher::new(
                move |event: notify::Result<notify::Event>| match event {
                    Ok(e) if changes_contents(&e.kind) => {
                        let _ = events.send(Msg::Trigger(Trigger {
                            files: true,
                            ..Trigger::default()
                        }));
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, "configuration watcher failed"),
                },
                notify::Config::default(),
            )
            .map_err(ReloadError::Watch)?;
            let dirs = watch_dirs(&self.paths, &self.is_dir);
            for dir in &dirs {
                watcher
                    .watch(dir, notify::RecursiveMode::NonRecursive)
                    .map_err(ReloadError::Watch)?;
            }
            Some((watcher, dirs))
        } else {
            None
        };
        let signal = if self.sighup {
            let runtime =
                tokio::runtime::Handle::try_current().map_err(|_| ReloadError::NoRuntime)?;
            let _entered = runtime.enter();
            let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                .map_err(ReloadError::Signal)?;
            let hups = tx.clone();
            Some(runtime.spawn(async move {
                while hup.recv().await.is_some() {
                    let trigger = Trigger {
                        signal: true,
                        ..Trigger::default()
                    };
                    if hups.send(Msg::Trigger(trigger)).is_err() {
                        break;
                    }
                }
            }))
        } else {
            None
        };
        let reloads = Arc::new(AtomicU64::new(0));
        let stopped = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            stopped: Arc::clone(&stopped),
            seen: fingerprints(&self.paths, &self.is_dir),
            paths: self.paths.clone(),
            is_dir: self.is_dir.clone(),
            watcher,
            quiet: self.quiet,
            max_delay: self.max_delay.max(self.quiet),
            reloads: Arc::clone(&reloads),
            on_change,
        };
        std::thread::Builder::new()
            .name("limiter-reload".into())
            .spawn(move || worker.run(rx))
            .map_err(ReloadError::Thread)?;
        Ok(Reloader {
            tx,
            stopped,
            signal,
            reloads,
            paths: self.paths,
        })
    }
}

/// A running reloader: watches, coalesces, calls back. Dropping it stops
/// it (module doc).
#[derive(Debug)]
pub struct Reloader {
    tx: Sender<Msg>,
    stopped: Arc<AtomicBool>,
    signal: Option<tokio::task::JoinHandle<()>>,
    reloads: Arc<AtomicU64>,
    paths: Vec<PathBuf>,
}

impl Reloader {
    /// A builder with no path, watching files, no `SIGHUP`.
    pub fn builder() -> ReloaderBuilder {
        ReloaderBuilder::default()
    }

    /// Asks for a check as a `SIGHUP` would: a callback follows if some
    /// file's contents moved.
    pub fn trigger(&self) {
        let _ = self.tx.send(Msg::Trigger(Trigger {
            manual: true,
            ..Trigger::default()
        }));
    }

    /// How many callbacks have started.
    pub fn reloads(&self) -> u64 {
        // Relaxed: a statistic (see the worker).
        self.reloads.load(Ordering::Relaxed)
    }

    /// The watched paths, absolute.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        // Release: pairs with the worker's Acquire load before a callback,
        // so a callback that starts after this store cannot.
        self.stopped.store(true, Ordering::Release);
        let _ = self.tx.send(Msg::Stop);
        if let Some(task) = self.signal.take() {
            task.abort();
        }
    }
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
