//! envoyproxy/ratelimit's YAML configuration, read as it is: the model
//! ([`RuleSet`], [`Rule`]), the reader ([`RuleSet::load_dir`],
//! [`RuleSet::from_files`]) and its errors.
//!
//! A rule set is immutable once built; a reload builds a new one and swaps
//! it in whole (see `reload`). Matching a request descriptor against it is
//! `matcher`'s job.
//!
//! The model mirrors theirs: per domain, a tree of descriptor levels; each
//! level maps `key_value` (or `key` alone, the default for any value) to a
//! descriptor, and keeps the wildcard patterns (values with `*`) in file
//! order, the order they are tried in.

mod error;
mod schema;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use metrics::Counter;

pub use error::{ConfigError, ConfigErrors, Problem};
pub use limiter_rules::{Fixable, Pos};

use crate::proto::Unit;

/// A limit as configured: `requests_per_unit` per `unit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimitSpec {
    /// Requests per unit; 0 blocks every request.
    pub requests_per_unit: u32,
    /// The unit (never [`Unit::Unknown`] for a configured limit; an Envoy
    /// override may carry it, and then the descriptor is refused).
    pub unit: Unit,
}

/// A `rate_limit` of the config (or an override from the request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The composite key, `domain.key_value.key2`: the stats name base and
    /// the Prometheus `rule` label ([`OVERRIDE_RULE`](crate::OVERRIDE_RULE)
    /// for a request's override).
    pub full_key: String,
    /// The limit (unused when `unlimited`).
    pub limit: LimitSpec,
    /// `unlimited: true`: always OK, `limit_remaining = u32::MAX`.
    pub unlimited: bool,
    /// `shadow_mode: true`: decided and counted, answered OK.
    pub shadow_mode: bool,
    /// `quota_mode: true`: over the limit only if every quota descriptor is.
    pub quota_mode: bool,
    /// `name`, for `replaces` (empty when none).
    pub name: String,
    /// The names this rule replaces.
    pub replaces: Vec<String>,
    /// `detailed_metric: true`: stats per full request value.
    pub detailed_metric: bool,
    pub(crate) counters: RuleCounters,
}

/// A rule's Prometheus counters (`stats::Recorder::record`), registered
/// (all five, so a scrape shows zeros) with the global `metrics` recorder at
/// the rule's first decision and only incremented after: no label strings or
/// registry lookup per decision. A reload registers the same series again.
#[derive(Clone, Default)]
pub(crate) struct RuleCounters(pub(crate) OnceLock<[Counter; 5]>);

impl std::fmt::Debug for RuleCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuleCounters")
    }
}

/// A cache, not part of what a rule says.
impl PartialEq for RuleCounters {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RuleCounters {}

/// One descriptor of the tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Descriptor {
    pub(crate) rule: Option<Arc<Rule>>,
    pub(crate) children: Level,
    pub(crate) value_to_metric: bool,
    pub(crate) share_threshold: bool,
    /// The `key_value` pattern when `share_threshold` is set.
    pub(crate) wildcard_pattern: String,
    pub(crate) metadata: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

/// A wildcard pattern of a level: its map key and its parts split on `*`.
#[derive(Debug, Clone)]
pub(crate) struct Wildcard {
    pub(crate) key: String,
    pub(crate) parts: Vec<String>,
}

/// The children of a descriptor (or a domain's top level).
#[derive(Debug, Clone, Default)]
pub(crate) struct Level {
    pub(crate) map: HashMap<String, Descriptor>,
    pub(crate) wildcards: Vec<Wildcard>,
}

/// Every domain's descriptor tree, as loaded from one directory.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    pub(crate) domains: HashMap<String, Level>,
    /// The files read, with their text, for `/rlconfig`.
    files: Vec<(PathBuf, String)>,
}

impl RuleSet {
    /// Reads every `.yaml`/`.yml` file under `dir` (recursively, following
    /// symlinks, skipping names that start with `.`: the Kubernetes
    /// ConfigMap layout's `..data` and timestamped directories are reached
    /// through the symlinks beside them).
    ///
    /// # Errors
    ///
    /// Every problem of every file, or the directory's I/O error.
    ///
    /// # Examples
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("rls-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.yaml"), "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n")?;
    /// let rules = limiter_rls::RuleSet::load_dir(&dir)?;
    /// assert_eq!(rules.domains().collect::<Vec<_>>(), ["d"]);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_dir(dir: &Path) -> Result<RuleSet, ConfigErrors> {
        RuleSet::from_files(read_dir(dir)?)
    }

    /// Builds a rule set from `(name, text)` pairs, in the order given.
    ///
    /// # Errors
    ///
    /// Every problem found, in file order.
    pub fn from_files(files: Vec<(PathBuf, String)>) -> Result<RuleSet, ConfigErrors> {
        let mut set = RuleSet::default();
        let mut first_file: HashMap<String, PathBuf> = HashMap::new();
        let mut errors = Vec::new();
        for (path, text) in &files {
            schema::load_file(path, text, &mut set.domains, &mut first_file, &mut errors);
        }
        if errors.is_empty() {
            set.files = files;
            Ok(set)
        } else {
            Err(limiter_rules::ConfigErrors(errors))
        }
    }

    /// The domains, in no particular order.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    /// Whether no file declared a domain.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The files read and their text, in load order (`/rlconfig`).
    pub fn files(&self) -> &[(PathBuf, String)] {
        &self.files
    }

    /// Every rule, as `full_key: unit=… requests_per_unit=…` lines sorted
    /// by key (the dump envoyproxy/ratelimit serves at `/rlconfig`).
    pub fn dump(&self) -> String {
        fn walk(level: &Level, out: &mut Vec<String>) {
            for d in level.map.values() {
                if let Some(r) = &d.rule {
                    out.push(format!(
                        "{}: unit={} requests_per_unit={}, shadow_mode: {}, quota_mode: {}, unlimited: {}",
                        r.full_key,
                        r.limit.unit.name().to_ascii_uppercase(),
                        r.limit.requests_per_unit,
                        r.shadow_mode,
                        r.quota_mode,
                        r.unlimited
                    ));
                }
                walk(&d.children, out);
            }
        }
        let mut lines = Vec::new();
        for level in self.domains.values() {
            walk(level, &mut lines);
        }
        lines.sort();
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        // `metadata` follows symlinks: a ConfigMap's `a.yaml -> ..data/a.yaml`.
        let meta = std::fs::metadata(&path)?;
        if meta.is_dir() {
            collect(&path, out)?;
        } else if meta.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Every config file under `dir` with its text, in name order (see
/// [`RuleSet::load_dir`]).
pub(crate) fn read_dir(dir: &Path) -> Result<Vec<(PathBuf, String)>, ConfigErrors> {
    let mut paths = Vec::new();
    collect(dir, &mut paths).map_err(|e| {
        limiter_rules::ConfigErrors(vec![ConfigError {
            file: dir.to_path_buf(),
            pos: Pos { line: 1, column: 1 },
            rule: None,
            field: None,
            problem: Problem::Io {
                message: e.to_string(),
            },
        }])
    })?;
    paths.sort();
    let mut files = Vec::with_capacity(paths.len());
    let mut errors = Vec::new();
    for path in paths {
        match std::fs::read_to_string(&path) {
            Ok(text) => files.push((path, text)),
            Err(e) => errors.push(ConfigError {
                file: path,
                pos: Pos { line: 1, column: 1 },
                rule: None,
                field: None,
                problem: Problem::Io {
                    message: e.to_string(),
                },
            }),
        }
    }
    if !errors.is_empty() {
        return Err(limiter_rules::ConfigErrors(errors));
    }
    Ok(files)
}
