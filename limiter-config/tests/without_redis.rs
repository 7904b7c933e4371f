//! limiter-config built without its `redis` feature (`cargo test -p
//! limiter-config --no-default-features --test without_redis`; `.ci/run`
//! runs it): the rules file is checked as before, and a rule set holding a
//! `backend: redis` rule is refused with a typed error at the rule's
//! position that names the feature, while local rules build as usual.
#![cfg(not(feature = "redis"))]

use limiter_config::{Problem, RuleSet};
use limiter_core::ManualClock;

mod support;

const RULES: &str = r#"rate_limits:
  local:
    algorithm: token_bucket
    rate: "10/s"
    burst: 2
  shared:
    algorithm: token_bucket
    rate: "10/s"
    burst: 2
    backend: redis
    redis: { url: "redis://127.0.0.1:1/" }
"#;

#[test]
fn a_redis_rule_is_refused_with_the_feature_named_and_local_rules_still_build() {
    let dir = support::TempDir::new();
    let path = dir.write("rules.yaml", RULES);

    // The file itself is valid: the check does not need Redis.
    assert_eq!(limiter_config::check_file(&path).unwrap().len(), 2);

    let errors = RuleSet::load_with_clock(&path, ManualClock::new()).unwrap_err();
    let [error] = errors.errors() else {
        panic!("one error expected, got {errors}");
    };
    assert_eq!(error.rule.as_deref(), Some("shared"));
    assert_eq!((error.pos.line, error.pos.column), (6, 3));
    let Problem::InvalidValue { reason, expected } = &error.problem else {
        panic!("unexpected problem {:?}", error.problem);
    };
    assert!(reason.contains("`redis` feature"), "{reason}");
    assert!(expected.contains("backend: local"), "{expected}");

    std::fs::write(
        &path,
        "rate_limits:\n  local:\n    algorithm: token_bucket\n    rate: 10\n    burst: 2\n",
    )
    .unwrap();
    let rules = RuleSet::load_with_clock(&path, ManualClock::new()).unwrap();
    assert!(
        rules
            .get("local")
            .unwrap()
            .gcra()
            .unwrap()
            .try_acquire()
            .is_ok()
    );
}
