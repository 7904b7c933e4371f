//! How a reload turns checked specs and the rule set in force into the next
//! snapshot, rule by rule: kept and moved with `set_quota`, replaced, added
//! or removed (the rules are in `ruleset`'s module docs), then the routed
//! rules in a route table, each with its `limiter-tower` layer.
//! Redis connections are made here, lazily, one per URL, kept across
//! reloads.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::store::{Conns, connection};

use limiter_keyed::{Penalty, PenaltyBox};
use limiter_rules::{
    BackendSpec, ConfigError, ConfigErrors, Matcher, PenaltySpec, Problem, RouteTable, RuleSpec,
};

use crate::key::RuleKeyText;

use crate::RuleClock;
use crate::calendar::{RuleCalendar, WallClock};
use crate::layer::{routed_layer, rule_key};
use crate::limiter::RuleLimiter;
use crate::live::{Core, Live};
use crate::snapshot::{ReloadReport, Routed, Snapshot};

pub(crate) type Built<C> = (Snapshot<C>, ReloadReport);

#[allow(clippy::too_many_arguments)]
pub(crate) fn build<C: RuleClock>(
    path: &Path,
    clock: &C,
    wall: &WallClock,
    specs: Vec<RuleSpec>,
    old: Option<&Snapshot<C>>,
    conns: &mut Conns,
    generation: u64,
    top_keys: bool,
) -> Result<Built<C>, ConfigErrors> {
    let mut report = ReloadReport {
        generation,
        ..ReloadReport::default()
    };
    let mut rules = BTreeMap::new();
    let mut errors = Vec::new();
    for spec in specs {
        let previous = old.and_then(|o| o.rules.get(&spec.name));
        let live = match previous {
            Some(p) if p.spec.shape() == spec.shape() => {
                let (old_q, new_q) = (p.spec.algorithm.quota(), spec.algorithm.quota());
                match (&p.live.core, new_q) {
                    // A concurrency rule: the same limiter with the new
                    // limit, queue and estimator; the permits held stay
                    // counted.
                    (Core::Concurrency(_), _) => {
                        match p.live.retune(&p.spec.algorithm, &spec.algorithm) {
                            Some(changed) => {
                                let list = if changed {
                                    &mut report.updated
                                } else {
                                    &mut report.unchanged
                                };
                                list.push(spec.name.clone());
                                Some(Arc::clone(&p.live))
                            }
                            None => None,
                        }
                    }
                    (_, q) if q == old_q => {
                        report.unchanged.push(spec.name.clone());
                        Some(Arc::clone(&p.live))
                    }
                    #[cfg(feature = "redis")]
                    (Core::Redis { .. }, _) => None,
                    (_, Some(q)) if p.live.set_quota(q) => {
                        report.updated.push(spec.name.clone());
                        Some(Arc::clone(&p.live))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let live = match live {
            Some(live) => live,
            None => {
                let conn = match &spec.backend {
                    BackendSpec::Redis(r) => match connection(conns, r) {
                        Ok(c) => Some(c),
                        Err(problem) => {
                            errors.push(build_error(path, &spec, problem));
                            continue;
                        }
                    },
                    BackendSpec::Local => None,
                };
                match Live::build(&spec, clock, conn) {
                    Ok(live) => {
                        match previous {
                            // Same shape: only a Redis rule's quota moved; its
                            // state is on Redis.
                            Some(p) if p.spec.shape() == spec.shape() => {
                                report.updated.push(spec.name.clone())
                            }
                            Some(_) => report.replaced.push(spec.name.clone()),
                            None => report.added.push(spec.name.clone()),
                        }
                        Arc::new(live)
                    }
                    Err(message) => {
                        // Only a Redis client can fail here.
                        let problem = Problem::InvalidRedisUrl { message };
                        errors.push(build_error(path, &spec, problem));
                        continue;
                    }
                }
            }
        };
        if let Err(message) = live.apply_overrides(&spec, previous.map(|p| &*p.live)) {
            errors.push(ConfigError {
                file: path.to_path_buf(),
                pos: spec.overrides.first().map_or(spec.pos, |o| o.pos),
                rule: Some(spec.name.clone()),
                field: Some("overrides".into()),
                problem: Problem::InvalidValue {
                    reason: message,
                    expected: format!(
                        "at most {} keys with their own quota",
                        limiter_rules::MAX_OVERRIDES
                    ),
                },
            });
            continue;
        }
        if top_keys {
            live.record_top_keys();
        }
        // The penalty box: kept while the limiter and the penalty are.
        let penalty = match (previous, spec.penalty) {
            (Some(p), Some(now)) if Arc::ptr_eq(&p.live, &live) && p.spec.penalty == Some(now) => {
                p.penalty.clone()
            }
            (_, Some(spec_penalty)) => Some(Arc::new(penalty_box(
                spec_penalty,
                spec.max_keys,
                clock.clone(),
            ))),
            (_, None) => None,
        };
        // The calendar count: kept while its period, zone, reset day and
        // store are (its limit moved live), else a new count.
        let calendar = match (&spec.quota, previous) {
            (None, _) => None,
            (Some(_), Some(p)) if p.calendar.as_ref().is_some_and(|c| c.keeps(&p.spec, &spec)) => {
                p.calendar.clone()
            }
            (Some(quota), _) => {
                let conn = match &spec.backend {
                    BackendSpec::Redis(r) => connection(conns, r).ok(),
                    BackendSpec::Local => None,
                };
                Some(Arc::new(RuleCalendar::build(&spec, quota, wall, conn)))
            }
        };
        if let Some(p) = previous
            && p.spec.quota != spec.quota
            && let Some(i) = report.unchanged.iter().position(|n| *n == spec.name)
        {
            // Only the quota changed.
            let name = report.unchanged.remove(i);
            report.updated.push(name);
        }
        let rule = Arc::new(RuleLimiter::new(spec, live, penalty).with_calendar(calendar));
        rules.insert(rule.spec.name.clone(), rule);
    }
    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }
    if let Some(old) = old {
        report.removed = old
            .rules
            .keys()
            .filter(|k| !rules.contains_key(*k))
            .cloned()
            .collect();
    }
    let routed: RouteTable<Routed<C>> = rules
        .values()
        .filter_map(|r| {
            let matcher = Matcher::new(r.spec.matcher.as_ref()?)?;
            let routed = Routed {
                layer: routed_layer(r),
                key: rule_key(&r.spec),
                rule: Arc::clone(r),
            };
            Some((matcher, routed))
        })
        .collect();
    Ok((
        Snapshot {
            generation,
            rules,
            routed,
        },
        report,
    ))
}

/// The penalty box of a checked `penalty` (validation checked its ranges
/// against the box's own).
fn penalty_box<C: RuleClock>(
    spec: PenaltySpec,
    max_keys: usize,
    clock: C,
) -> PenaltyBox<RuleKeyText, C> {
    let penalty = Penalty::new(spec.after, spec.within, spec.block)
        .unwrap_or_else(|e| unreachable!("validated penalty refused: {e}"));
    PenaltyBox::with_clock(penalty, max_keys, clock)
}

fn build_error(path: &Path, spec: &RuleSpec, problem: Problem) -> ConfigError {
    ConfigError {
        file: path.to_path_buf(),
        pos: spec.pos,
        rule: Some(spec.name.clone()),
        field: Some("redis".into()),
        problem,
    }
}
