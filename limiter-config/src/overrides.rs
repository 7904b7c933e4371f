//! Per-key quotas of a keyed local GCRA rule, from two sources: the rules
//! file (`overrides:`) and the admin API ([`RuleSet::set_key_quota`]). Both
//! live in the rule's `KeyedLimiter` (`set_quota_for`, which keeps the
//! key's fill level in permits); this module remembers which source each
//! came from, so that a reload re-applies the file's and keeps the admin
//! API's.
//!
//! # Precedence and reloads
//!
//! * An admin-set quota wins over the file's for the same key until it is
//!   removed ([`RuleSet::remove_key_quota`]); the key then goes back to the
//!   file's quota if the file has one, else to the rule's.
//! * A reload that keeps the rule's limiter applies the new file's
//!   overrides (adds, changes, and removes those the file no longer has)
//!   and leaves the admin API's alone; a reload that replaces the limiter
//!   (a new shape) carries the admin API's over to the new one. A rule
//!   removed from the file takes its overrides with it.
//! * Admin calls and reloads are serialised by the rule set's reload lock,
//!   so an admin call never lands on a limiter a reload is replacing.
//!
//! The cap is the rule's: [`MAX_OVERRIDES`] keys from both sources
//! together; one more is [`OverrideRefusal::TooMany`].

use std::collections::HashMap;
use std::fmt;
use std::sync::PoisonError;

use limiter_core::Quota;
use limiter_keyed::{KeyedLimiter, OverrideError};
use limiter_rules::{KeySpec, MAX_OVERRIDES, RuleSpec};

use crate::RuleClock;
use crate::key::{RuleKeyText, library_key};
use crate::live::{Core, Live};
use crate::ruleset::RuleSet;

/// Where a key's quota comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaSource {
    /// The admin API set it.
    Admin,
    /// The rules file's `overrides:`.
    File,
    /// The rule's own quota (the key has no override).
    Rule,
}

impl QuotaSource {
    /// `admin`, `file` or `rule`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaSource::Admin => "admin",
            QuotaSource::File => "file",
            QuotaSource::Rule => "rule",
        }
    }
}

/// A key's quota in force, and how many permits it could take now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyQuota {
    /// The quota the key is decided under.
    pub quota: Quota,
    /// Where it comes from.
    pub source: QuotaSource,
    /// The permits the key could take now.
    pub available: u32,
}

/// Why a per-key quota call was refused. Each variant says what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OverrideRefusal {
    /// No rule of that name is in force.
    UnknownRule {
        /// The name asked for.
        rule: String,
    },
    /// The rule has no per-key table: not keyed, not `token_bucket` or
    /// `leaky_bucket`, or on Redis.
    NotKeyed {
        /// The rule.
        rule: String,
    },
    /// The rule already has [`MAX_OVERRIDES`] keys with their own quota.
    TooMany {
        /// The cap.
        max_overrides: usize,
    },
    /// The key has no admin-set quota to remove.
    NoOverride,
}

impl fmt::Display for OverrideRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverrideRefusal::UnknownRule { rule } => {
                write!(f, "no rule `{rule}` is in force; GET /rules lists them")
            }
            OverrideRefusal::NotKeyed { rule } => write!(
                f,
                "rule `{rule}` has no per-key quotas: only a keyed local token_bucket or leaky_bucket rule has them"
            ),
            OverrideRefusal::TooMany { max_overrides } => write!(
                f,
                "{max_overrides} keys of this rule already have their own quota; remove one first"
            ),
            OverrideRefusal::NoOverride => {
                f.write_str("the key has no quota set by the admin API; nothing to remove")
            }
        }
    }
}

impl std::error::Error for OverrideRefusal {}

impl From<OverrideError> for OverrideRefusal {
    fn from(e: OverrideError) -> OverrideRefusal {
        match e {
            OverrideError::TooManyOverrides { max_overrides } => {
                OverrideRefusal::TooMany { max_overrides }
            }
            // Non-exhaustive: any other refusal is the cap's.
            _ => OverrideRefusal::TooMany {
                max_overrides: MAX_OVERRIDES,
            },
        }
    }
}

/// The overrides of one rule by source, beside its `KeyedLimiter`.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    file: HashMap<RuleKeyText, Quota>,
    admin: HashMap<RuleKeyText, Quota>,
}

/// The table key of an override's text under `key`: a one-part key's value
/// is written as the HTTP layer writes it; a key of several parts is the
/// encoded key itself.
pub(crate) fn table_key(key: &KeySpec, text: &str) -> RuleKeyText {
    if key.parts.len() == 1 {
        library_key(text)
    } else {
        RuleKeyText::from_encoded(text)
    }
}

/// Puts `spec`'s file overrides in force on `live` (kept across the reload
/// or new), carrying the admin API's from `previous` when `live` is new.
/// An error is the cap, exceeded by the file and the admin API together.
pub(crate) fn apply<C: RuleClock>(
    live: &Live<C>,
    spec: &RuleSpec,
    previous: Option<&Live<C>>,
) -> Result<(), String> {
    let Core::Keyed(keyed) = &live.core else {
        return Ok(());
    };
    let mut sources = live
        .overrides
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(previous) = previous
        && !std::ptr::eq(previous, live)
    {
        let old = previous
            .overrides
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sources.admin = old.admin.clone();
        for (k, q) in &sources.admin {
            keyed.set_quota_for(k, *q).map_err(|e| e.to_string())?;
        }
    }
    let file: HashMap<RuleKeyText, Quota> = spec
        .overrides
        .iter()
        .map(|o| (table_key(&spec.key, &o.key), o.quota))
        .collect();
    for k in sources.file.keys() {
        if !file.contains_key(k) && !sources.admin.contains_key(k) {
            keyed.remove_quota_for(k);
        }
    }
    for (k, q) in &file {
        if !sources.admin.contains_key(k) {
            keyed
                .set_quota_for(k, *q)
                .map_err(|e| format!("{e} (the file's overrides and the admin API's together)"))?;
        }
    }
    sources.file = file;
    Ok(())
}

impl<C: RuleClock> RuleSet<C> {
    /// Gives `key` of rule `rule` its own `quota` now, as the admin API's
    /// `PUT /rules/{rule}/keys/{key}` does: kept across reloads of the file
    /// (it wins over the file's override for the key) until
    /// [`remove_key_quota`](RuleSet::remove_key_quota). The key keeps its
    /// fill level in permits. `key` is the key's text as in the file's
    /// `overrides:`. Returns the key's quota now.
    ///
    /// # Errors
    ///
    /// [`OverrideRefusal`]: no such rule, a rule without per-key quotas, or
    /// the cap.
    pub fn set_key_quota(
        &self,
        rule: &str,
        key: &str,
        quota: Quota,
    ) -> Result<KeyQuota, OverrideRefusal> {
        self.with_keyed(rule, |live, keyed, spec| {
            let k = table_key(&spec.key, key);
            let mut sources = live
                .overrides
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            keyed.set_quota_for(&k, quota)?;
            sources.admin.insert(k.clone(), quota);
            Ok(key_quota(keyed, &sources, &k))
        })
    }

    /// Removes the admin-set quota of `key` of rule `rule` (the admin API's
    /// `DELETE /rules/{rule}/keys/{key}`): the key goes back to the file's
    /// override, if any, else to the rule's quota, keeping its fill level
    /// in permits. Returns the key's quota now.
    ///
    /// # Errors
    ///
    /// [`OverrideRefusal`]: no such rule, a rule without per-key quotas,
    /// or [`NoOverride`](OverrideRefusal::NoOverride) when the admin API
    /// had set none for the key.
    pub fn remove_key_quota(&self, rule: &str, key: &str) -> Result<KeyQuota, OverrideRefusal> {
        self.with_keyed(rule, |live, keyed, spec| {
            let k = table_key(&spec.key, key);
            let mut sources = live
                .overrides
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if sources.admin.remove(&k).is_none() {
                return Err(OverrideRefusal::NoOverride);
            }
            match sources.file.get(&k) {
                Some(q) => {
                    keyed.set_quota_for(&k, *q)?;
                }
                None => {
                    keyed.remove_quota_for(&k);
                }
            }
            Ok(key_quota(keyed, &sources, &k))
        })
    }

    /// The quota `key` of rule `rule` is decided under, where it comes
    /// from, and the permits it could take now (the admin API's
    /// `GET /rules/{rule}/keys/{key}`). Consumes nothing.
    ///
    /// # Errors
    ///
    /// [`OverrideRefusal`]: no such rule, or a rule without per-key quotas.
    pub fn key_quota(&self, rule: &str, key: &str) -> Result<KeyQuota, OverrideRefusal> {
        let found = self.get(rule).ok_or_else(|| OverrideRefusal::UnknownRule {
            rule: rule.to_owned(),
        })?;
        let Core::Keyed(keyed) = &found.live.core else {
            return Err(OverrideRefusal::NotKeyed {
                rule: rule.to_owned(),
            });
        };
        let k = table_key(&found.spec.key, key);
        let sources = found
            .live
            .overrides
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(key_quota(keyed, &sources, &k))
    }

    fn with_keyed<T>(
        &self,
        rule: &str,
        f: impl FnOnce(&Live<C>, &KeyedLimiter<RuleKeyText, C>, &RuleSpec) -> Result<T, OverrideRefusal>,
    ) -> Result<T, OverrideRefusal> {
        let _reload = self.reload_lock();
        let found = self.get(rule).ok_or_else(|| OverrideRefusal::UnknownRule {
            rule: rule.to_owned(),
        })?;
        let Core::Keyed(keyed) = &found.live.core else {
            return Err(OverrideRefusal::NotKeyed {
                rule: rule.to_owned(),
            });
        };
        f(&found.live, keyed, &found.spec)
    }
}

fn key_quota<C: RuleClock>(
    keyed: &KeyedLimiter<RuleKeyText, C>,
    sources: &Sources,
    k: &RuleKeyText,
) -> KeyQuota {
    let source = if sources.admin.contains_key(k) {
        QuotaSource::Admin
    } else if sources.file.contains_key(k) {
        QuotaSource::File
    } else {
        QuotaSource::Rule
    };
    KeyQuota {
        quota: keyed.quota_of(k),
        source,
        available: keyed.available(k),
    }
}
