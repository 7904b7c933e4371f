//! The schema: seed 004's file to exact quotas, YAML and TOML to identical
//! rule sets, and every error class with its line and column.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Method;
use limiter_core::{Quota, QuotaError};
use limiter_rules::{
    Algorithm, BackendSpec, ControllerSpec, Format, HeaderSpec, KeyPart, Mode, PathMatch, Pos,
    Problem, Rate, RuleSpec, WhenRedisDown, check_file, check_str,
};

/// The path of a file under tests/files.
fn file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/files")
        .join(name)
}

fn without_positions(mut rules: Vec<RuleSpec>) -> Vec<RuleSpec> {
    for r in &mut rules {
        r.pos = Pos::default();
    }
    rules
}

#[test]
fn seed_004_means_exactly_this() {
    let rules = check_file(&file("seed004.yaml")).unwrap();
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["api_gateway", "order_service", "payment_gateway"]);

    // token_bucket 5000/s, burst 10000: GCRA, one permit every 200 µs.
    let api = &rules[0];
    let q = Quota::per_second(5000).unwrap().with_burst(10_000).unwrap();
    assert_eq!(api.algorithm.quota(), Some(q));
    assert_eq!((q.period_nanos(), q.burst()), (200_000, 10_000));
    assert!(matches!(api.algorithm, Algorithm::TokenBucket { .. }));
    assert_eq!(api.mode, Mode::Reject);
    assert!(api.key.is_global());
    assert_eq!(api.backend, BackendSpec::Local);

    // leaky_bucket 800/s: strict pacing (burst 1), delay mode, 1 s queue.
    let order = &rules[1];
    assert!(matches!(order.algorithm, Algorithm::LeakyBucket { .. }));
    assert_eq!(
        order.algorithm.quota(),
        Some(Quota::per_second(800).unwrap())
    );
    assert_eq!(order.algorithm.quota().unwrap().period_nanos(), 1_250_000);
    assert_eq!(order.algorithm.quota().unwrap().burst(), 1);
    assert_eq!(
        order.mode,
        Mode::Delay {
            max_delay: Duration::from_secs(1)
        }
    );

    // per_ip: keyed by client IP.
    let pay = &rules[2];
    let q = Quota::per_second(100).unwrap().with_burst(200).unwrap();
    assert_eq!(pay.algorithm.quota(), Some(q));
    assert_eq!(pay.key.parts, [KeyPart::Ip]);
    assert_eq!(pay.mode, Mode::Reject);
}

#[test]
fn toml_and_yaml_give_identical_rule_sets() {
    let yaml = check_file(&file("seed004.yaml")).unwrap();
    let toml = check_file(&file("seed004.toml")).unwrap();
    assert_eq!(without_positions(yaml), without_positions(toml));

    let yaml = without_positions(check_file(&file("full.yaml")).unwrap());
    let toml = without_positions(check_file(&file("full.toml")).unwrap());
    assert_eq!(yaml.len(), 7);
    assert_eq!(yaml, toml);
}

#[test]
fn every_field_beyond_the_seed() {
    let rules = check_file(&file("full.yaml")).unwrap();
    let by = |name: &str| rules.iter().find(|r| r.name == name).unwrap();

    let search = by("search");
    assert_eq!(
        search.algorithm.quota(),
        Some(Quota::per_minute(6000).unwrap().with_burst(50).unwrap())
    );
    assert_eq!(search.key.parts.len(), 2);
    assert!(matches!(&search.key.parts[0], KeyPart::Header(h) if h == "x-user-id"));
    assert_eq!(search.key.parts[1], KeyPart::Route);
    let m = search.matcher.as_ref().unwrap();
    assert_eq!(m.path, PathMatch::Route("/search/{kind}".into()));
    assert_eq!(m.methods, [Method::GET, Method::POST]);
    assert_eq!(
        (search.headers, search.max_keys),
        (HeaderSpec::Legacy, 5000)
    );

    let uploads = by("uploads");
    assert_eq!(
        uploads.mode,
        Mode::Delay {
            max_delay: Duration::from_millis(250)
        }
    );
    assert_eq!(
        uploads.matcher.as_ref().unwrap().path,
        PathMatch::Prefix("/upload".into())
    );
    assert_eq!(
        uploads.trusted_proxies,
        [
            "10.0.0.0/8".parse().unwrap(),
            "192.168.1.1/32".parse().unwrap()
        ]
    );
    assert_eq!(uploads.allowlist, ["127.0.0.0/8".parse().unwrap()]);

    assert_eq!(
        by("billing").algorithm,
        Algorithm::SlidingWindow {
            limit: 1000,
            window: Duration::from_secs(60)
        }
    );
    let Algorithm::WarmUp {
        warm_up,
        cold_factor,
        quota,
        ..
    } = by("cold_start").algorithm
    else {
        panic!("warm_up");
    };
    assert_eq!(
        (warm_up, cold_factor, quota.burst()),
        (Duration::from_secs(30), 4.0, 1)
    );
    assert_eq!(
        by("downstream").algorithm,
        Algorithm::Adaptive {
            controller: ControllerSpec::Percentile {
                target: Duration::from_millis(50)
            },
            min_rate: 10.0,
            max_rate: 500.0,
            burst: 5
        }
    );
    let Algorithm::Priority {
        classes,
        class_header,
        ..
    } = &by("tiers").algorithm
    else {
        panic!("priority");
    };
    assert_eq!(class_header.as_ref().unwrap(), "x-priority");
    assert_eq!(
        classes,
        &[
            ("critical".into(), 1.0),
            ("normal".into(), 0.7),
            ("batch".into(), 0.3)
        ]
    );
    assert_eq!(
        by("tiers").mode,
        Mode::Delay {
            max_delay: Duration::from_secs(1)
        }
    );

    let shared = by("shared");
    assert!(
        matches!(shared.algorithm, Algorithm::TokenBucket { rate: Rate::PerSecond(r), .. } if r == 0.5)
    );
    assert_eq!(
        shared.algorithm.quota().unwrap().period(),
        Duration::from_secs(2)
    );
    let BackendSpec::Redis(r) = &shared.backend else {
        panic!("redis");
    };
    assert_eq!(r.url, "redis://127.0.0.1:6390/");
    assert_eq!(r.key_prefix, "edge");
    assert_eq!(r.failure_policy, WhenRedisDown::Closed);
    assert_eq!(r.timeout, Duration::from_millis(50));
    assert_eq!(shared.headers, HeaderSpec::None);
}

/// (line, column, rule, field) of each error of bad.yaml, all reported at once.
#[test]
fn every_error_class_with_line_and_column() {
    let errors = check_file(&file("bad.yaml")).unwrap_err();
    let got: Vec<(u32, u32, &str, &str)> = errors
        .errors()
        .iter()
        .map(|e| {
            (
                e.pos.line,
                e.pos.column,
                e.rule.as_deref().unwrap_or(""),
                e.field.as_deref().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (3, 16, "api", "algorithm"),
            (7, 11, "zero", "rate"),
            (8, 12, "zero", "burst"),
            (11, 11, "negative", "rate"),
            (15, 12, "huge", "burst"),
            (19, 10, "keyed", "key"),
            (25, 12, "remote", "redis.url"),
            (29, 5, "typo", "brust"),
            (37, 12, "second", "match"),
        ]
    );
    let p: Vec<&Problem> = errors.errors().iter().map(|e| &e.problem).collect();
    assert!(matches!(p[0], Problem::UnknownAlgorithm { found } if found == "token-bucket"));
    assert!(
        p[0].fix()
            .contains("token_bucket, leaky_bucket, sliding_window")
    );
    assert!(matches!(p[1], Problem::InvalidRate { reason } if reason.contains("0 permits")));
    assert_eq!(p[2], &Problem::ZeroBurst);
    assert!(matches!(p[3], Problem::InvalidRate { reason } if reason.contains("negative")));
    assert!(matches!(
        p[4],
        Problem::Quota(QuotaError::SpanTooLong {
            burst: 4_000_000_000,
            ..
        })
    ));
    // The core's own text is the fix.
    assert!(p[4].fix().contains("lower the burst or shorten the period"));
    assert!(matches!(p[5], Problem::UnknownKeyKind { found } if found == "cookie:session"));
    assert!(matches!(p[6], Problem::InvalidRedisUrl { .. }));
    assert!(
        matches!(p[7], Problem::UnknownField { found, expected } if found == "brust" && expected.contains(&"burst"))
    );
    assert!(matches!(p[8], Problem::AmbiguousMatch { other, .. } if other == "first"));
    // The message names the file, the position, the rule, the field and the fix.
    let text = errors.errors()[7].to_string();
    assert!(text.ends_with(
        "bad.yaml:29:5: rule `typo`, field `brust`: unknown field `brust`; fix: remove it or use one of: algorithm, key, per_ip, match, mode, max_delay, backend, redis, allowlist, trusted_proxies, headers, max_keys, overrides, shadow, shadow_headers, penalty, cost, quota, rate, burst"
    ), "{text}");
}

fn errors_of(text: &str, format: Format) -> Vec<(u32, u32, String)> {
    check_str("t".as_ref(), text, format)
        .unwrap_err()
        .errors()
        .iter()
        .map(|e| (e.pos.line, e.pos.column, e.problem.to_string()))
        .collect()
}

#[test]
fn the_same_errors_in_toml() {
    let toml = "[rate_limits.api]\nalgorithm = \"token-bucket\"\nrate = 0\n\n[rate_limits.b]\nalgorithm = \"token_bucket\"\nrate = 10\nburst = 0\nkey = \"cookie\"\n";
    let got = errors_of(toml, Format::Toml);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!((got[0].0, got[0].1), (2, 13));
    assert!(got[0].2.contains("unknown algorithm"));
    assert_eq!((got[1].0, got[1].1), (8, 9));
    assert_eq!((got[2].0, got[2].1), (9, 7));
    assert!(got[2].2.contains("unknown key kind"));
}

#[test]
fn syntax_errors_and_structure_errors() {
    let got = errors_of("rate_limits:\n  api: [1,\n", Format::Yaml);
    assert_eq!(got.len(), 1);
    assert!(got[0].2.starts_with("syntax error"), "{got:?}");
    let got = errors_of("rate_limts:\n  api: {}\n", Format::Yaml);
    assert!(
        got.iter()
            .any(|e| e.2.contains("unknown field `rate_limts`"))
    );
    assert!(got.iter().any(|e| e.2 == "missing"));
    let got = errors_of("rate_limits:\n  api:\n    rate: 10\n", Format::Yaml);
    assert_eq!(got, [(2, 3, "missing".to_owned())]); // algorithm
    // A field of another algorithm is unknown for this one.
    let got = errors_of(
        "rate_limits:\n  w:\n    algorithm: sliding_window\n    limit: 5\n    window: \"1s\"\n    burst: 3\n",
        Format::Yaml,
    );
    assert_eq!(got, [(6, 5, "unknown field `burst`".to_owned())]);
    // Wrong types, bad durations, max_delay without delay, bad CIDR, bad
    // method, Redis with a period not in whole µs.
    let got = errors_of(
        "rate_limits:\n  a:\n    algorithm: token_bucket\n    rate: [1]\n    max_delay: \"5 parsecs\"\n  b:\n    algorithm: token_bucket\n    rate: 3\n    max_delay: \"1s\"\n    allowlist: [\"10.0.0.0/33\"]\n    match: { route: \"/x\", methods: [\"GE T\"] }\n  c:\n    algorithm: token_bucket\n    rate: 3\n    backend: redis\n    redis: { url: \"redis://localhost/\" }\n",
        Format::Yaml,
    );
    let lines: Vec<u32> = got.iter().map(|e| e.0).collect();
    assert_eq!(lines, [4, 5, 9, 10, 11, 14], "{got:?}");
    assert!(got[5].2.contains("whole number of microseconds"));
}

#[test]
fn bad_rates_are_rejected_with_the_core_text() {
    // 2·10^9 per second is past one per nanosecond.
    let got = errors_of(
        "rate_limits:\n  a:\n    algorithm: token_bucket\n    rate: \"2000000000/s\"\n",
        Format::Yaml,
    );
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].0, got[0].1), (4, 11));
    let e = check_str(
        "t".as_ref(),
        "rate_limits:\n  a:\n    algorithm: token_bucket\n    rate: \"2000000000/s\"\n",
        Format::Yaml,
    )
    .unwrap_err();
    assert!(matches!(
        e.errors()[0].problem,
        Problem::Quota(QuotaError::RateTooHigh { .. })
    ));
}
