//! [`Snapshot`]: one whole rule set, what a reader sees between two
//! reloads: the rules by name and the routed rules in a [`RouteTable`], each
//! with its `limiter-tower` layer; and [`ReloadReport`], what a reload did.
//!
//! A snapshot is immutable once built; a reload builds the next one beside
//! it and swaps it in.

use std::collections::BTreeMap;
use std::sync::Arc;

use limiter_rules::RouteTable;

use crate::RuleClock;
use crate::layer::RoutedLayer;
use crate::limiter::RuleLimiter;

/// One whole rule set: what a reader sees between two reloads.
pub struct Snapshot<C: RuleClock> {
    pub(crate) generation: u64,
    pub(crate) rules: BTreeMap<String, Arc<RuleLimiter<C>>>,
    /// The routed rules by their matches.
    pub(crate) routed: RouteTable<Routed<C>>,
}

/// A routed rule: the rule and its HTTP layer.
pub(crate) struct Routed<C: RuleClock> {
    pub(crate) rule: Arc<RuleLimiter<C>>,
    pub(crate) layer: RoutedLayer<C>,
    /// The rule's key extractor, for `explain`.
    pub(crate) key: crate::key::RuleKey,
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

    /// The most specific routed rule matching `method` and `path`, and its
    /// layer: one walk of the path's segments (see `RouteTable`), whatever
    /// the number of rules.
    pub(crate) fn routed_rule(&self, method: &http::Method, path: &str) -> Option<&Routed<C>> {
        self.routed.get(method, path)
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
