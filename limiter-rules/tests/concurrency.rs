//! `concurrency` and `adaptive_concurrency` rules: what a file means, and
//! every mistake reported at its line and column with
//! `limiter-concurrency`'s own text where it refuses the numbers.

use std::time::Duration;

use limiter_rules::{
    Algorithm, Bounds, EstimatorSpec, Format, Mode, Problem, QueueOrder, QueueSpec, check_str,
};

fn rules(yaml: &str) -> Vec<limiter_rules::RuleSpec> {
    check_str("c.yaml".as_ref(), yaml, Format::Yaml).unwrap()
}

/// (line, column, field, problem) of every error of `yaml`.
fn errors(yaml: &str) -> Vec<(u32, u32, String, Problem)> {
    check_str("c.yaml".as_ref(), yaml, Format::Yaml)
        .unwrap_err()
        .errors()
        .iter()
        .map(|e| {
            (
                e.pos.line,
                e.pos.column,
                e.field.clone().unwrap_or_default(),
                e.problem.clone(),
            )
        })
        .collect()
}

#[test]
fn a_fixed_limit_with_its_queue_and_defaults() {
    let r = rules(
        "rate_limits:\n  db:\n    algorithm: concurrency\n    limit: 16\n    queue: 64\n    queue_order: lifo\n    mode: delay\n    max_delay: 250ms\n  plain:\n    algorithm: concurrency\n    limit: 4\n",
    );
    assert_eq!(
        r[0].algorithm,
        Algorithm::Concurrency {
            limit: 16,
            queue: QueueSpec {
                capacity: 64,
                order: QueueOrder::Lifo
            }
        }
    );
    assert_eq!(
        r[0].mode,
        Mode::Delay {
            max_delay: Duration::from_millis(250)
        }
    );
    // Defaults: reject mode, a queue as long as the limit, FIFO.
    assert_eq!(
        r[1].algorithm,
        Algorithm::Concurrency {
            limit: 4,
            queue: QueueSpec {
                capacity: 4,
                order: QueueOrder::Fifo
            }
        }
    );
    assert_eq!(r[1].mode, Mode::Reject);
    assert_eq!(
        r[1].algorithm.to_string(),
        "concurrency: limit 4 at once, queue 4 Fifo"
    );
}

#[test]
fn an_adaptive_limit_with_each_estimator() {
    let r = rules(
        "rate_limits:\n  g:\n    algorithm: adaptive_concurrency\n    max_limit: 200\n  v:\n    algorithm: adaptive_concurrency\n    estimator: vegas\n    decay: 0.02\n    initial_limit: 8\n    min_limit: 2\n    max_limit: 64\n    drift_guard: true\n  a:\n    algorithm: adaptive_concurrency\n    estimator: aimd\n    backoff: 0.5\n    timeout: 50ms\n    min_limit: 30\n    queue: 10\n",
    );
    assert_eq!(
        r[0].algorithm,
        Algorithm::AdaptiveConcurrency {
            estimator: EstimatorSpec::Gradient2 {
                tolerance: None,
                smoothing: None
            },
            bounds: Bounds::new(20, 1, 200).unwrap(),
            drift_guard: false,
            queue: QueueSpec {
                capacity: 200,
                order: QueueOrder::Fifo
            },
        }
    );
    assert_eq!(
        r[1].algorithm,
        Algorithm::AdaptiveConcurrency {
            estimator: EstimatorSpec::Vegas { decay: Some(0.02) },
            bounds: Bounds::new(8, 2, 64).unwrap(),
            drift_guard: true,
            queue: QueueSpec {
                capacity: 64,
                order: QueueOrder::Fifo
            },
        }
    );
    // The initial limit defaults to 20 moved into the bounds (here 30).
    assert_eq!(
        r[2].algorithm,
        Algorithm::AdaptiveConcurrency {
            estimator: EstimatorSpec::Aimd {
                backoff: Some(0.5),
                timeout: Some(Duration::from_millis(50))
            },
            bounds: Bounds::new(30, 30, 1000).unwrap(),
            drift_guard: false,
            queue: QueueSpec {
                capacity: 10,
                order: QueueOrder::Fifo
            },
        }
    );
}

#[test]
fn every_mistake_at_its_line_and_column() {
    let yaml = "\
rate_limits:
  zero:
    algorithm: concurrency
    limit: 0
  missing:
    algorithm: concurrency
    queue: 3
  huge:
    algorithm: concurrency
    limit: 3000000000
  order:
    algorithm: concurrency
    limit: 2
    queue_order: random
  keyed:
    algorithm: concurrency
    limit: 2
    key: ip
  headers:
    algorithm: concurrency
    limit: 2
    headers: draft10
  swapped:
    algorithm: adaptive_concurrency
    min_limit: 50
    max_limit: 10
  outside:
    algorithm: adaptive_concurrency
    initial_limit: 5
    min_limit: 10
  no_smoothing:
    algorithm: adaptive_concurrency
    smoothing: 0
  wrong_estimator_field:
    algorithm: adaptive_concurrency
    estimator: vegas
    backoff: 0.5
  unknown_estimator:
    algorithm: adaptive_concurrency
    estimator: bbr
  guard:
    algorithm: adaptive_concurrency
    drift_guard: yes please
  backoff:
    algorithm: adaptive_concurrency
    estimator: aimd
    backoff: 1.5
";
    let got = errors(yaml);
    let at: Vec<(u32, u32, &str)> = got.iter().map(|e| (e.0, e.1, e.2.as_str())).collect();
    assert_eq!(
        at,
        [
            (4, 12, "limit"),
            (6, 5, "limit"),
            (10, 12, "limit"),
            (14, 18, "queue_order"),
            (18, 10, "key"),
            (22, 5, "headers"),
            (25, 16, "min_limit"),
            (29, 20, "initial_limit"),
            (33, 16, "smoothing"),
            (37, 14, "backoff"),
            (40, 16, "estimator"),
            (43, 18, "drift_guard"),
            (47, 14, "backoff"),
        ],
        "{got:#?}"
    );
    let p: Vec<&Problem> = got.iter().map(|e| &e.3).collect();
    assert_eq!(p[0], &Problem::ZeroBurst);
    assert_eq!(p[1], &Problem::MissingField);
    // limiter-concurrency's own refusal, with its text as the fix.
    assert!(matches!(
        p[2],
        Problem::Concurrency(limiter_concurrency::ConfigError::LimitTooLarge {
            value: 3_000_000_000,
            ..
        })
    ));
    assert!(
        p[2].fix().contains("above the largest limit"),
        "{}",
        p[2].fix()
    );
    assert!(matches!(p[3], Problem::InvalidValue { expected, .. } if expected == "fifo or lifo"));
    assert!(
        matches!(p[4], Problem::InvalidValue { reason, .. } if reason.contains("keyed `concurrency`"))
    );
    // headers: not a field of a concurrency rule (it sends no RateLimit
    // headers); the fix lists what it takes.
    assert!(matches!(p[5], Problem::UnknownField { expected, .. }
        if expected.contains(&"queue_order") && !expected.contains(&"headers") && !expected.contains(&"allowlist")));
    assert_eq!(
        p[6],
        &Problem::Concurrency(limiter_concurrency::ConfigError::MinAboveMax { min: 50, max: 10 })
    );
    assert_eq!(
        p[7],
        &Problem::Concurrency(limiter_concurrency::ConfigError::InitialOutOfBounds {
            initial: 5,
            min: 10,
            max: 1000
        })
    );
    assert!(matches!(
        p[8],
        Problem::Concurrency(limiter_concurrency::ConfigError::OutOfRange { name: "smoothing", value, .. }) if *value == 0.0
    ));
    assert!(
        matches!(p[9], Problem::InvalidValue { reason, .. } if reason == "`backoff` is a number of estimator aimd, not of vegas")
    );
    assert!(
        matches!(p[10], Problem::InvalidValue { expected, .. } if expected == "gradient2, vegas or aimd")
    );
    assert!(matches!(
        p[11],
        Problem::WrongType {
            expected: "true or false",
            ..
        }
    ));
    assert!(matches!(
        p[12],
        Problem::Concurrency(limiter_concurrency::ConfigError::OutOfRange {
            name: "backoff",
            ..
        })
    ));
    // The whole message: file, position, rule, field, what, fix.
    let text = check_str("c.yaml".as_ref(), yaml, Format::Yaml)
        .unwrap_err()
        .errors()[6]
        .to_string();
    assert_eq!(
        text,
        "c.yaml:25:16: rule `swapped`, field `min_limit`: the concurrency limiter cannot work with these numbers; fix: min_limit 50 is above max_limit 10; swap them or widen the range"
    );
}

#[test]
fn the_same_rule_in_toml() {
    let toml = "[rate_limits.db]\nalgorithm = \"adaptive_concurrency\"\nestimator = \"aimd\"\nmax_limit = 0\n";
    let e = check_str("c.toml".as_ref(), toml, Format::Toml).unwrap_err();
    let e = &e.errors()[0];
    assert_eq!((e.pos.line, e.pos.column), (4, 13));
    assert_eq!(e.problem, Problem::ZeroBurst);
    let toml = "[rate_limits.db]\nalgorithm = \"concurrency\"\nlimit = 8\nqueue_order = \"lifo\"\n";
    let r = check_str("c.toml".as_ref(), toml, Format::Toml).unwrap();
    assert_eq!(
        r[0].algorithm,
        Algorithm::Concurrency {
            limit: 8,
            queue: QueueSpec {
                capacity: 8,
                order: QueueOrder::Lifo
            }
        }
    );
}
