//! Per-key quotas from the file (`overrides:`) and from the admin calls
//! (`RuleSet::set_key_quota`), under a `ManualClock`: each key keeps its
//! fill level in permits when its quota changes, the admin API's quotas
//! survive reloads (and a replacement of the rule's limiter), the file's
//! are re-applied, and every refusal is typed.

use crate::support;

use std::time::Duration;

use limiter_config::{KeyQuota, OverrideRefusal, QuotaSource, RuleLimiter, RuleSet};
use limiter_core::{ManualClock, Quota};
use support::TempDir;

fn rules(rate: &str, algorithm: &str, overrides: &str) -> String {
    format!(
        "rate_limits:\n  api:\n    algorithm: {algorithm}\n    rate: \"{rate}\"\n    burst: 4\n    key: header:x-tenant\n    mode: reject\n{overrides}  global:\n    algorithm: token_bucket\n    rate: 1\n"
    )
}

fn q(per_second: u32, burst: u32) -> Quota {
    Quota::per_second(per_second)
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

#[test]
fn file_and_admin_overrides_through_reloads() {
    let dir = TempDir::new();
    let file_gold = "    overrides:\n      gold: { rate: 100/s, burst: 40 }\n      silver: { rate: 20/s, burst: 8 }\n";
    let path = dir.write("rules.yaml", &rules("10/s", "token_bucket", file_gold));
    let clock = ManualClock::new();
    let set = RuleSet::load_with_clock(&path, clock.clone()).unwrap();
    let key = RuleLimiter::<ManualClock>::key;
    let keys = || set.get("api").unwrap();

    // The file's overrides are in force from the start.
    assert_eq!(
        set.key_quota("api", "gold"),
        Ok(KeyQuota {
            quota: q(100, 40),
            source: QuotaSource::File,
            available: 40
        })
    );
    assert_eq!(
        set.key_quota("api", "bronze").unwrap().source,
        QuotaSource::Rule
    );
    keys()
        .keyed()
        .unwrap()
        .try_acquire_n(&key("bronze"), 3)
        .unwrap(); // 3 owed

    // The admin API gives bronze its own quota: still 3 owed.
    let now = set.set_key_quota("api", "bronze", q(1, 10)).unwrap();
    assert_eq!(
        (now.quota, now.source, now.available),
        (q(1, 10), QuotaSource::Admin, 7)
    );
    // ... and overrides the file's for silver.
    set.set_key_quota("api", "silver", q(2, 2)).unwrap();

    // A reload that changes the rule's rate and drops gold from the file,
    // keeping the limiter: admin quotas stay, the file's are re-applied.
    let file_silver =
        "    overrides:\n      silver: { rate: 50/s, burst: 5 }\n      tin: { rate: 5/s }\n";
    dir.write("rules.yaml", &rules("20/s", "token_bucket", file_silver));
    assert_eq!(set.reload().unwrap().updated, ["api"]);
    assert_eq!(
        set.key_quota("api", "gold").unwrap().source,
        QuotaSource::Rule
    );
    assert_eq!(set.key_quota("api", "gold").unwrap().quota, q(20, 4));
    assert_eq!(set.key_quota("api", "tin").unwrap().quota, q(5, 1));
    let silver = set.key_quota("api", "silver").unwrap();
    assert_eq!((silver.quota, silver.source), (q(2, 2), QuotaSource::Admin));
    let bronze = set.key_quota("api", "bronze").unwrap();
    assert_eq!((bronze.quota, bronze.available), (q(1, 10), 7));

    // Removing the admin quota of silver falls back to the file's.
    let back = set.remove_key_quota("api", "silver").unwrap();
    assert_eq!((back.quota, back.source), (q(50, 5), QuotaSource::File));
    assert_eq!(
        set.remove_key_quota("api", "silver"),
        Err(OverrideRefusal::NoOverride)
    );

    // A reload that replaces the limiter (another algorithm) carries the
    // admin API's quotas over.
    dir.write("rules.yaml", &rules("20/s", "leaky_bucket", ""));
    assert_eq!(set.reload().unwrap().replaced, ["api"]);
    assert_eq!(set.key_quota("api", "bronze").unwrap().quota, q(1, 10));
    assert_eq!(
        set.key_quota("api", "tin").unwrap().source,
        QuotaSource::Rule
    );

    // Removing bronze's puts it on the rule's quota.
    clock.advance(Duration::from_secs(1));
    let back = set.remove_key_quota("api", "bronze").unwrap();
    assert_eq!((back.quota, back.source), (q(20, 4), QuotaSource::Rule));
}

#[test]
fn refusals_are_typed() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &rules("10/s", "token_bucket", ""));
    let set = RuleSet::load_with_clock(&path, ManualClock::new()).unwrap();
    assert_eq!(
        set.set_key_quota("nope", "k", q(1, 1)),
        Err(OverrideRefusal::UnknownRule {
            rule: "nope".into()
        })
    );
    let global = set.set_key_quota("global", "k", q(1, 1)).unwrap_err();
    assert_eq!(
        global,
        OverrideRefusal::NotKeyed {
            rule: "global".into()
        }
    );
    assert!(global.to_string().contains("only a keyed local"));
    assert_eq!(set.key_quota("api", "k").unwrap().available, 4);
}
