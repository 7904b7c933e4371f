//! [`RuleSet`]: the rules of one file, built into limiters, swapped
//! atomically on reload.
//!
//! The rules in force are one immutable [`Snapshot`] behind an `ArcSwap`:
//! a reader loads the snapshot once and sees one whole rule set, old or new,
//! never a mix. Reloads are serialised by a mutex that readers never touch.
//!
//! A reload reads and checks the whole file first; a file with any problem
//! changes nothing (the old snapshot stays in force), logs every problem and
//! increments `rate_limit_config_errors_total`. A good file becomes a new snapshot,
//! rule by rule against the old one:
//!
//! * same name, same shape (algorithm, global or keyed, backend, and the
//!   numbers `set_quota` cannot change), new quota: the live limiter moves
//!   to the new quota with `set_quota`, keeping its state (for a keyed rule,
//!   every key's); a Redis rule gets a new client-side limiter, its state
//!   stays on Redis;
//! * same name, other shape: a new limiter replaces it (fresh state);
//! * new name: added; name gone: removed.
//!
//! Then the snapshot is swapped in, the generation (1 for the first load)
//! goes up by one and `rate_limit_config_generation` shows it.

use crate::RuleClock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::store::Conns;
use arc_swap::ArcSwap;
use limiter_core::DefaultClock;
use tokio::sync::watch;

use crate::build::build;
use crate::calendar::WallClock;
use crate::limiter::RuleLimiter;
// ReloadReport also under this path, where the watcher names it.
pub(crate) use crate::snapshot::ReloadReport;
use crate::snapshot::Snapshot;
use limiter_rules::{ConfigErrors, check_file};

/// The metric counting reloads refused because the file had problems.
pub const CONFIG_ERRORS: &str = "rate_limit_config_errors_total";
/// The gauge of the generation of the rules in force.
pub const CONFIG_GENERATION: &str = "rate_limit_config_generation";

struct Shared<C: RuleClock> {
    path: PathBuf,
    clock: C,
    /// The wall clock calendar quotas are decided on (Unix nanoseconds).
    wall: WallClock,
    current: ArcSwap<Snapshot<C>>,
    reload: Mutex<Conns>,
    generation: watch::Sender<u64>,
    /// Whether rules record their refusals per key (`record_top_keys`).
    top_keys: AtomicBool,
}

/// The rules of one file, as limiters by name and as an HTTP layer
/// ([`RuleSet::layer`]), reloadable without losing state.
///
/// Clones share everything.
///
/// # Examples
///
/// ```
/// use limiter_config::RuleSet;
/// use limiter_core::ManualClock;
///
/// # let dir = std::env::temp_dir().join(format!("limiter-config-rs-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("rules.toml");
/// std::fs::write(&path, "[rate_limits.api]\nalgorithm = \"token_bucket\"\nrate = 10\nburst = 2\n")?;
/// let rules = RuleSet::load_with_clock(&path, ManualClock::new())?;
/// let api = rules.get("api").expect("in the file");
/// api.gcra().expect("a global GCRA").try_acquire_n(2)?; // drained
///
/// std::fs::write(&path, "[rate_limits.api]\nalgorithm = \"token_bucket\"\nrate = 1\nburst = 2\n")?;
/// let report = rules.reload()?;
/// assert_eq!((report.generation, report.updated.as_slice()), (2, &["api".to_owned()][..]));
/// assert_eq!(rules.get("api").unwrap().gcra().unwrap().available(), 0); // still drained
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RuleSet<C: RuleClock = DefaultClock> {
    shared: Arc<Shared<C>>,
}

impl<C: RuleClock> Clone for RuleSet<C> {
    fn clone(&self) -> Self {
        RuleSet {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C: RuleClock> std::fmt::Debug for RuleSet<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleSet")
            .field("path", &self.shared.path)
            .field("current", &*self.shared.current.load())
            .finish()
    }
}

impl RuleSet<DefaultClock> {
    /// Loads `path` on the default clock.
    ///
    /// # Errors
    ///
    /// Every problem of the file ([`ConfigErrors`]).
    pub fn load(path: impl AsRef<Path>) -> Result<RuleSet<DefaultClock>, ConfigErrors> {
        RuleSet::load_with_clock(path, DefaultClock::default())
    }
}

impl<C: RuleClock> RuleSet<C> {
    /// Loads `path`, every limiter reading `clock`.
    ///
    /// # Errors
    ///
    /// Every problem of the file ([`ConfigErrors`]), or a Redis rule whose
    /// client could not be made.
    pub fn load_with_clock(path: impl AsRef<Path>, clock: C) -> Result<RuleSet<C>, ConfigErrors> {
        RuleSet::load_with_clocks(path, clock, limiter_calendar::UnixClock)
    }

    /// Loads `path`, every rate limiter reading `clock` and every calendar
    /// `quota` reading `wall`, which must count nanoseconds since the Unix
    /// epoch (the system's wall clock, `limiter_calendar::UnixClock`, is what
    /// [`load_with_clock`](RuleSet::load_with_clock) gives them). Tests
    /// pass one `ManualClock` set to a Unix instant as both.
    ///
    /// # Errors
    ///
    /// As [`load_with_clock`](RuleSet::load_with_clock).
    pub fn load_with_clocks(
        path: impl AsRef<Path>,
        clock: C,
        wall: impl limiter_core::Clock + 'static,
    ) -> Result<RuleSet<C>, ConfigErrors> {
        let wall: WallClock = Arc::new(wall);
        let path = path.as_ref().to_path_buf();
        let specs = check_file(&path)?;
        let mut conns = HashMap::new();
        let (snapshot, _) = build(&path, &clock, &wall, specs, None, &mut conns, 1, false)?;
        metrics::describe_gauge!(
            CONFIG_GENERATION,
            "The generation of the rules in force: 1 for the first load, one more per applied reload."
        );
        metrics::describe_counter!(
            CONFIG_ERRORS,
            "Reloads refused because the rules file had problems (the previous rules stay in force)."
        );
        metrics::gauge!(CONFIG_GENERATION).set(1.0);
        // Registered at 0, so the series exists before the first failure.
        metrics::counter!(CONFIG_ERRORS).increment(0);
        Ok(RuleSet {
            shared: Arc::new(Shared {
                path,
                clock,
                wall,
                current: ArcSwap::from_pointee(snapshot),
                reload: Mutex::new(conns),
                generation: watch::channel(1).0,
                top_keys: AtomicBool::new(false),
            }),
        })
    }

    /// Reads the file again and, if it is good, puts its rules in force.
    ///
    /// # Errors
    ///
    /// Every problem of the file; the rules in force stay as they were, the
    /// problems are logged and `rate_limit_config_errors_total` counts one.
    pub fn reload(&self) -> Result<ReloadReport, ConfigErrors> {
        let mut conns = self
            .shared
            .reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let result = check_file(&self.shared.path).and_then(|specs| {
            let old = self.shared.current.load_full();
            build(
                &self.shared.path,
                &self.shared.clock,
                &self.shared.wall,
                specs,
                Some(&old),
                &mut conns,
                old.generation + 1,
                // Relaxed: read under the reload mutex, which
                // `record_top_keys` takes too.
                self.shared.top_keys.load(Ordering::Relaxed),
            )
        });
        match result {
            Ok((snapshot, report)) => {
                let generation = snapshot.generation;
                self.shared.current.store(Arc::new(snapshot));
                metrics::gauge!(CONFIG_GENERATION).set(generation as f64);
                self.shared.generation.send_replace(generation);
                tracing::info!(
                    generation,
                    added = ?report.added,
                    removed = ?report.removed,
                    updated = ?report.updated,
                    replaced = ?report.replaced,
                    "rate-limit rules reloaded"
                );
                Ok(report)
            }
            Err(errors) => {
                metrics::counter!(CONFIG_ERRORS).increment(1);
                // One line: each problem joined by "; ".
                let problems = errors.to_string().lines().collect::<Vec<_>>().join("; ");
                tracing::error!(
                    file = %self.shared.path.display(),
                    problems = %problems,
                    "rate-limit rules not reloaded; the previous rules stay in force"
                );
                Err(errors)
            }
        }
    }

    /// The rules in force, as one snapshot: hold it for decisions that must
    /// see one rule set.
    pub fn snapshot(&self) -> Arc<Snapshot<C>> {
        self.shared.current.load_full()
    }

    /// The rules in force for one request: a guard of the `ArcSwap` (no
    /// reference count touched on the fast path), held while the request's
    /// rule is found and its future made.
    pub(crate) fn current(&self) -> arc_swap::Guard<Arc<Snapshot<C>>> {
        self.shared.current.load()
    }

    /// The rule named `name` in force now.
    pub fn get(&self, name: &str) -> Option<Arc<RuleLimiter<C>>> {
        self.shared.current.load().get(name).cloned()
    }

    /// The generation in force.
    pub fn generation(&self) -> u64 {
        self.shared.current.load().generation
    }

    /// A receiver of the generation, updated on every applied reload (for
    /// waiting until a watched edit has been applied).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.generation.subscribe()
    }

    /// The reload lock (held by a reload, and by an admin call that
    /// changes a live limiter so it never lands on one being replaced).
    pub(crate) fn reload_lock(&self) -> std::sync::MutexGuard<'_, Conns> {
        self.shared
            .reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// From now on every rule (and every rule a reload adds) records its
    /// refusals per key in a fixed heavy-hitters summary
    /// ([`RuleLimiter::top_keys`]): 128 counters per rule, one shard's
    /// mutex per refusal, nothing per admitted request.
    pub fn record_top_keys(&self) {
        let _reload = self
            .shared
            .reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Relaxed: the reload mutex orders it with the next build.
        self.shared.top_keys.store(true, Ordering::Relaxed);
        for rule in self.shared.current.load().rules() {
            rule.live.record_top_keys();
        }
    }
}
