//! The admin API's per-key quota calls on a [`RuleSet`]: set, remove and
//! read one key's own quota (`PUT`/`DELETE`/`GET /rules/{rule}/keys/{key}`),
//! on the sources `overrides` keeps beside each keyed rule's limiter.
//! Serialised with reloads by the rule set's reload lock.

use std::sync::PoisonError;

use limiter_core::Quota;
use limiter_keyed::KeyedLimiter;
use limiter_rules::RuleSpec;

use crate::RuleClock;
use crate::key::RuleKeyText;
use crate::live::{Core, Live};
use crate::overrides::{KeyQuota, OverrideRefusal, key_quota, table_key};
use crate::ruleset::RuleSet;

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
            sources.set_admin(keyed, &k, quota)?;
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
            sources.remove_admin(keyed, &k)?;
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
