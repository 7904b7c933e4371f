//! `overrides:`: keys with a quota of their own, read to exact quotas, and
//! every mistake reported at its line and column with the field named in
//! full.

use limiter_core::Quota;
use limiter_rules::{ConfigErrors, Format, KeyOverride, Pos, Problem, check_str};

fn check(text: &str) -> Result<Vec<limiter_rules::RuleSpec>, ConfigErrors> {
    check_str("rules.yaml".as_ref(), text, Format::Yaml)
}

#[test]
fn overrides_are_read_in_file_order() {
    let rules = check(
        "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: 10/s\n    burst: 5\n    key: header:x-tenant\n    overrides:\n      tenant-7: { rate: 100/s, burst: 50 }\n      \"10.0.0.1\": { rate: 1/s }\n",
    )
    .unwrap();
    let o: Vec<(&str, Quota, Pos)> = rules[0]
        .overrides
        .iter()
        .map(
            |KeyOverride {
                 key, quota, pos, ..
             }| (key.as_str(), *quota, *pos),
        )
        .collect();
    assert_eq!(
        o,
        [
            (
                "tenant-7",
                Quota::per_second(100).unwrap().with_burst(50).unwrap(),
                Pos { line: 8, column: 7 }
            ),
            (
                "10.0.0.1",
                Quota::per_second(1).unwrap(),
                Pos { line: 9, column: 7 }
            ),
        ]
    );
    // Overrides are not part of the shape: a reload applies them live.
    let mut other = rules[0].clone();
    other.overrides.clear();
    assert_eq!(other.shape(), rules[0].shape());
}

#[test]
fn each_mistake_is_placed_and_named() {
    let e = check(
        "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: 10\n    key: ip\n    overrides:\n      a: { rate: 0 }\n      b: { rate: 5, burst: 0 }\n      c: { rate: 5, brust: 2 }\n      d: 7\n",
    )
    .unwrap_err();
    let got: Vec<(u32, u32, String, String)> = e
        .errors()
        .iter()
        .map(|e| {
            (
                e.pos.line,
                e.pos.column,
                e.field.clone().unwrap_or_default(),
                e.problem.to_string(),
            )
        })
        .collect();
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(
        (got[0].0, got[0].1, got[0].2.as_str()),
        (7, 18, "overrides.a.rate")
    );
    assert_eq!(
        (got[1].0, got[1].1, got[1].2.as_str()),
        (8, 28, "overrides.b.burst")
    );
    assert_eq!(
        (got[2].0, got[2].1, got[2].2.as_str()),
        (9, 21, "overrides.c.brust")
    );
    assert_eq!(
        (got[3].0, got[3].1, got[3].2.as_str()),
        (10, 10, "overrides.d")
    );
    let text = e.errors()[2].to_string();
    assert!(
        text.contains("rules.yaml:9:21: rule `api`, field `overrides.c.brust`: unknown field `brust`; fix: remove it or use one of: rate, burst"),
        "{text}"
    );
}

#[test]
fn overrides_need_a_keyed_local_gcra_rule() {
    let e = check(
        "rate_limits:\n  g:\n    algorithm: token_bucket\n    rate: 10\n    overrides: { a: { rate: 1 } }\n  w:\n    algorithm: sliding_window\n    limit: 5\n    window: 1s\n    key: ip\n    overrides: { a: { rate: 1 } }\n  r:\n    algorithm: token_bucket\n    rate: 10\n    key: ip\n    backend: redis\n    redis: { url: \"redis://127.0.0.1/\" }\n    overrides: { a: { rate: 1 } }\n",
    )
    .unwrap_err();
    let got: Vec<(u32, String)> = e
        .errors()
        .iter()
        .map(|e| (e.pos.line, e.to_string()))
        .collect();
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got[0].0, 5);
    assert!(got[0].1.contains("`key: global` has one bucket"), "{got:?}");
    assert!(
        got[1].1.contains("a keyed `sliding_window` rule"),
        "{got:?}"
    );
    assert_eq!(got[2].0, 11);
    assert!(got[2].1.contains("need a GCRA rule"), "{got:?}");
    assert_eq!(got[3].0, 18);
    assert!(got[3].1.contains("kept in this process"), "{got:?}");
    assert!(matches!(
        e.errors()[0].problem,
        Problem::InvalidValue { .. }
    ));
}
