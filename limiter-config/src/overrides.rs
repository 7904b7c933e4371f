//! Per-key quotas of a keyed local GCRA rule, from two sources: the rules
//! file (`overrides:`) and the admin API ([`RuleSet::set_key_quota`], in
//! `key_quotas`). Both
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
use std::sync::{Mutex, PoisonError};

use limiter_core::Quota;
use limiter_keyed::{KeyedLimiter, OverrideError};
use limiter_rules::{KeySpec, MAX_OVERRIDES, RuleSpec};

use crate::RuleClock;
use crate::key::{RuleKeyText, library_key};

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

impl Sources {
    /// Gives `k` the admin API's own `quota` in `keyed` (it wins over the
    /// file's until removed).
    pub(crate) fn set_admin<C: RuleClock>(
        &mut self,
        keyed: &KeyedLimiter<RuleKeyText, C>,
        k: &RuleKeyText,
        quota: Quota,
    ) -> Result<(), OverrideRefusal> {
        keyed.set_quota_for(k, quota)?;
        self.admin.insert(k.clone(), quota);
        Ok(())
    }

    /// Removes the admin API's quota of `k`: the key goes back to the
    /// file's override, else to the rule's quota.
    pub(crate) fn remove_admin<C: RuleClock>(
        &mut self,
        keyed: &KeyedLimiter<RuleKeyText, C>,
        k: &RuleKeyText,
    ) -> Result<(), OverrideRefusal> {
        if self.admin.remove(k).is_none() {
            return Err(OverrideRefusal::NoOverride);
        }
        match self.file.get(k) {
            Some(q) => {
                keyed.set_quota_for(k, *q)?;
            }
            None => {
                keyed.remove_quota_for(k);
            }
        }
        Ok(())
    }
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

/// Puts `spec`'s file overrides in force on `keyed` (the rule's table,
/// kept across the reload or new, with its `sources`), carrying the admin
/// API's from `previous` (the sources of the limiter it replaces) when
/// there is one. An error is the cap, exceeded by the file and the admin
/// API together.
pub(crate) fn apply<C: RuleClock>(
    keyed: &KeyedLimiter<RuleKeyText, C>,
    sources: &Mutex<Sources>,
    spec: &RuleSpec,
    previous: Option<&Mutex<Sources>>,
) -> Result<(), String> {
    let mut sources = sources.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(previous) = previous {
        let old = previous.lock().unwrap_or_else(PoisonError::into_inner);
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

pub(crate) fn key_quota<C: RuleClock>(
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
