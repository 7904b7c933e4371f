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
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use limiter_core::DefaultClock;
use redis::aio::ConnectionManager;
use tokio::sync::watch;

use crate::build::build;
use crate::error::{ConfigError, ConfigErrors, Problem};
use crate::http::RuleLayer;
use crate::limiter::RuleLimiter;
use crate::routes::Matcher;
use crate::schema::RuleSpec;
use crate::source::{Format, Pos, parse};
use crate::validate::validate;

/// The metric counting reloads refused because the file had problems.
pub const CONFIG_ERRORS: &str = "rate_limit_config_errors_total";
/// The gauge of the generation of the rules in force.
pub const CONFIG_GENERATION: &str = "rate_limit_config_generation";

/// Reads and checks `path`: the rules as understood, or every problem.
///
/// # Errors
///
/// [`ConfigErrors`]: every problem of the file, in file order.
///
/// # Examples
///
/// ```
/// use limiter_config::{Problem, check_file};
///
/// # let dir = std::env::temp_dir().join(format!("limiter-config-check-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("bad.yaml");
/// std::fs::write(&path, "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: 0\n    burst: 0\n")?;
/// let errors = check_file(&path).unwrap_err();
/// assert_eq!(errors.errors().len(), 2); // both, not just the first
/// assert_eq!((errors.errors()[0].pos.line, errors.errors()[0].pos.column), (4, 11));
/// assert!(matches!(errors.errors()[1].problem, Problem::ZeroBurst));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_file(path: &Path) -> Result<Vec<RuleSpec>, ConfigErrors> {
    let one = |problem| {
        ConfigErrors(vec![ConfigError {
            file: path.to_path_buf(),
            pos: Pos { line: 1, column: 1 },
            rule: None,
            field: None,
            problem,
        }])
    };
    let format = Format::of(path).ok_or_else(|| one(Problem::UnknownFormat))?;
    let text = std::fs::read_to_string(path).map_err(|e| {
        one(Problem::Io {
            message: e.to_string(),
        })
    })?;
    check_str(path, &text, format)
}

/// Checks `text` as the contents of `path` in `format`.
///
/// # Errors
///
/// As [`check_file`].
pub fn check_str(path: &Path, text: &str, format: Format) -> Result<Vec<RuleSpec>, ConfigErrors> {
    let root = parse(text, format).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: path.to_path_buf(),
            pos: e.pos,
            rule: None,
            field: None,
            problem: Problem::Syntax { message: e.message },
        }])
    })?;
    validate(path, &root).map_err(ConfigErrors)
}

/// One whole rule set: what a reader sees between two reloads.
pub struct Snapshot<C: RuleClock> {
    pub(crate) generation: u64,
    pub(crate) rules: BTreeMap<String, Arc<RuleLimiter<C>>>,
    /// The routed rules, most specific first.
    pub(crate) routed: Vec<Routed<C>>,
}

/// A routed rule: its compiled match, the rule and its HTTP layer.
pub(crate) struct Routed<C: RuleClock> {
    pub(crate) matcher: Matcher,
    pub(crate) rule: Arc<RuleLimiter<C>>,
    pub(crate) layer: RuleLayer<C>,
}

impl<C: RuleClock> std::fmt::Debug for Snapshot<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("generation", &self.generation)
            .field("rules", &self.rules.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<C: RuleClock> Snapshot<C> {
    /// The generation: 1 for the first load, one more per applied reload.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The rule named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<RuleLimiter<C>>> {
        self.rules.get(name)
    }

    /// The rules by name.
    pub fn rules(&self) -> impl Iterator<Item = &Arc<RuleLimiter<C>>> {
        self.rules.values()
    }
}

/// What a reload did, rule by rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadReport {
    /// The generation now in force.
    pub generation: u64,
    /// Rules that are new.
    pub added: Vec<String>,
    /// Rules that are gone.
    pub removed: Vec<String>,
    /// Rules whose live limiter took a new quota, state kept.
    pub updated: Vec<String>,
    /// Rules whose limiter was replaced (algorithm, key kind or backend
    /// changed, or numbers `set_quota` cannot move).
    pub replaced: Vec<String>,
    /// Rules whose limiter is untouched (perhaps a new mode, match or
    /// headers).
    pub unchanged: Vec<String>,
}

struct Shared<C: RuleClock> {
    path: PathBuf,
    clock: C,
    current: ArcSwap<Snapshot<C>>,
    reload: Mutex<HashMap<String, ConnectionManager>>,
    generation: watch::Sender<u64>,
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
        let path = path.as_ref().to_path_buf();
        let specs = check_file(&path)?;
        let mut conns = HashMap::new();
        let (snapshot, _) = build(&path, &clock, specs, None, &mut conns, 1)?;
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
                current: ArcSwap::from_pointee(snapshot),
                reload: Mutex::new(conns),
                generation: watch::channel(1).0,
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
                specs,
                Some(&old),
                &mut conns,
                old.generation + 1,
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

    /// The file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }
}
