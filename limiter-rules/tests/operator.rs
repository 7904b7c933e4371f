//! The operator settings of a rules file: `shadow` (per rule and for the
//! whole file), `shadow_headers` and `penalty`, understood exactly, and each
//! mistake reported at its line and column with its fix.

use std::time::Duration;

use limiter_rules::{Format, PenaltySpec, check_str};

fn errors(yaml: &str) -> Vec<String> {
    check_str("rules.yaml".as_ref(), yaml, Format::Yaml)
        .unwrap_err()
        .errors()
        .iter()
        .map(ToString::to_string)
        .collect()
}

const RULE: &str = "    algorithm: token_bucket\n    rate: 10\n    burst: 5\n";

#[test]
fn shadow_per_rule_and_for_the_whole_file() {
    let yaml = format!(
        "shadow: true\nrate_limits:\n  a:\n{RULE}  b:\n{RULE}    shadow: false\n  c:\n{RULE}    shadow_headers: true\n"
    );
    let rules = check_str("r.yaml".as_ref(), &yaml, Format::Yaml).unwrap();
    let got: Vec<(bool, bool)> = rules.iter().map(|r| (r.shadow, r.shadow_headers)).collect();
    assert_eq!(got, [(true, false), (false, false), (true, true)]);

    let yaml = format!("rate_limits:\n  a:\n{RULE}  b:\n{RULE}    shadow: true\n");
    let rules = check_str("r.toml".as_ref(), &yaml, Format::Yaml).unwrap();
    assert_eq!((rules[0].shadow, rules[1].shadow), (false, true));
    // Shadow is not part of the shape: switching it keeps the limiter.
    assert_eq!(
        rules[0].shape(),
        {
            let mut b = rules[1].clone();
            b.name = "a".into();
            b
        }
        .shape()
    );

    let toml = "shadow = true\n[rate_limits.a]\nalgorithm = \"token_bucket\"\nrate = 10\nshadow_headers = true\n";
    let rules = check_str("r.toml".as_ref(), toml, Format::Toml).unwrap();
    assert_eq!((rules[0].shadow, rules[0].shadow_headers), (true, true));
}

#[test]
fn shadow_mistakes_are_located() {
    let yaml = format!(
        "shadow: yes please\nrate_limits:\n  a:\n{RULE}    shadow: 1\n  b:\n{RULE}    shadow: false\n    shadow_headers: true\nshadows: true\n"
    );
    assert_eq!(
        errors(&yaml),
        [
            "rules.yaml:1:9: field `shadow`: expected true or false, found a string; fix: write true or false",
            "rules.yaml:7:13: rule `a`, field `shadow`: expected true or false, found an integer; fix: write true or false",
            "rules.yaml:13:21: rule `b`, field `shadow_headers`: `shadow_headers` has no effect on a rule with `shadow: false`; fix: use `shadow: true` with it, or no `shadow_headers`",
            "rules.yaml:14:1: field `shadows`: unknown field `shadows`; fix: remove it or use one of: rate_limits, shadow",
        ]
    );
}

#[test]
fn a_penalty_is_understood_exactly() {
    let yaml = format!(
        "rate_limits:\n  a:\n{RULE}    key: ip\n    penalty: {{ after: 10, within: 1m, block: 5m }}\n"
    );
    let rules = check_str("r.yaml".as_ref(), &yaml, Format::Yaml).unwrap();
    assert_eq!(
        rules[0].penalty,
        Some(PenaltySpec {
            after: 10,
            within: Duration::from_secs(60),
            block: Duration::from_secs(300),
        })
    );
    let toml = "[rate_limits.a]\nalgorithm = \"token_bucket\"\nrate = 10\nkey = \"header:x-user\"\npenalty = { after = 1048575, within = \"1ms\", block = \"250ms\" }\n";
    let rules = check_str("r.toml".as_ref(), toml, Format::Toml).unwrap();
    let p = rules[0].penalty.unwrap();
    assert_eq!(
        (p.after, p.within, p.block),
        (
            1_048_575,
            Duration::from_millis(1),
            Duration::from_millis(250)
        )
    );
}

#[test]
fn penalty_mistakes_are_located() {
    let keyed = format!("{RULE}    key: ip\n");
    let yaml = format!(
        "rate_limits:\n  global:\n{RULE}    penalty: {{ after: 3, within: 1m, block: 1m }}\n  a:\n{keyed}    penalty: {{ after: 0, within: 1500us, block: 0s, jail: 1 }}\n  b:\n{keyed}    penalty: {{ after: 1048576, within: soon }}\n  c:\n{keyed}    penalty: 5\n"
    );
    assert_eq!(
        errors(&yaml),
        [
            "rules.yaml:6:14: rule `global`, field `penalty`: a penalty on a global rule would block every client; fix: use a keyed rule (`key: ip`, `key: header:NAME`, ...) for `penalty`",
            "rules.yaml:12:23: rule `a`, field `penalty.after`: 0 admits nothing; fix: use at least 1",
            "rules.yaml:12:34: rule `a`, field `penalty.within`: `1500us` is out of range; fix: use a whole number of milliseconds, at least 1ms and under 139 years",
            "rules.yaml:12:49: rule `a`, field `penalty.block`: `0s` is out of range; fix: use a duration above 0 and at most 36 years",
            "rules.yaml:12:53: rule `a`, field `penalty.jail`: unknown field `jail`; fix: remove it or use one of: after, within, block",
            "rules.yaml:18:14: rule `b`, field `penalty.block`: missing; fix: add this field",
            "rules.yaml:18:23: rule `b`, field `penalty.after`: 1048576 refusals cannot be counted; fix: use at most 1048575",
            "rules.yaml:18:40: rule `b`, field `penalty.within`: invalid duration: `soon` must start with a number; fix: write a duration such as \"250ms\", \"2s\", \"1m\", \"1h\" (units ns, us, ms, s, m, h, d)",
            "rules.yaml:24:14: rule `c`, field `penalty`: expected a table with `after`, `within` and `block`, found an integer; fix: write a table with `after`, `within` and `block`",
        ]
    );
}
