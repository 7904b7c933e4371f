//! `cost:` on a rule: the up-front cost and the cost after the response,
//! understood exactly, and each mistake reported at its line and column
//! with its fix.

use std::time::Duration;

use http::header::HeaderName;
use limiter_rules::{CostSpec, Format, Problem, check_str};

fn errors(yaml: &str) -> Vec<String> {
    check_str("rules.yaml".as_ref(), yaml, Format::Yaml)
        .unwrap_err()
        .errors()
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// 100 per second (t = 10 ms), burst 50: lines 3 to 6 of every file here.
const RULE: &str =
    "    algorithm: token_bucket\n    key: header:x-tenant\n    rate: 100\n    burst: 50\n";

#[test]
fn the_cost_in_full_scalar_and_default() {
    let yaml = format!(
        "rate_limits:\n  a:\n{RULE}    cost: {{ request: 2, response_header: X-Tokens-Used, max_debt: 30s }}\n  b:\n{RULE}    cost: 3\n  c:\n{RULE}  d:\n{RULE}    cost:\n      response_header: x-rows\n"
    );
    let rules = check_str("r.yaml".as_ref(), &yaml, Format::Yaml).unwrap();
    let costs: Vec<&CostSpec> = rules.iter().map(|r| &r.cost).collect();
    assert_eq!(
        costs,
        [
            &CostSpec {
                request: 2,
                // Header names are case-insensitive: kept in lower case.
                response_header: Some(HeaderName::from_static("x-tokens-used")),
                max_debt: Duration::from_secs(30),
            },
            &CostSpec {
                request: 3,
                response_header: None,
                max_debt: Duration::from_secs(60),
            },
            &CostSpec::default(),
            &CostSpec {
                request: 1,
                response_header: Some(HeaderName::from_static("x-rows")),
                max_debt: Duration::from_secs(60),
            },
        ]
    );
    assert_eq!(CostSpec::default().request, 1);
    // The cost is not part of the shape: changing it keeps the limiter.
    assert_eq!(
        rules[0].shape(),
        {
            let mut c = rules[2].clone();
            c.name = "a".into();
            c
        }
        .shape()
    );

    // TOML, and a Redis GCRA rule.
    let toml = "[rate_limits.a]\nalgorithm = \"leaky_bucket\"\nrate = 10\nburst = 5\nbackend = \"redis\"\nredis = { url = \"redis://127.0.0.1:6379/\" }\ncost = { request = 1, response_header = \"x-tokens-used\", max_debt = \"1m\" }\n";
    let rules = check_str("r.toml".as_ref(), toml, Format::Toml).unwrap();
    assert_eq!(
        rules[0].cost.response_header,
        Some(HeaderName::from_static("x-tokens-used"))
    );
}

#[test]
fn cost_mistakes_are_located() {
    let yaml = format!(
        "rate_limits:
  a:
{RULE}    cost: 0
  b:
{RULE}    cost: {{ request: -2, response_header: \"x tokens\", max_debt: 5ms }}
  c:
{RULE}    cost: {{ request: 51, max_debt: 1m, tokens: 3 }}
  d:
{RULE}    cost: {{ response_header: x-tokens-used, max_debt: 2d }}
  e:
{RULE}    cost: [1]
  f:
{RULE}    cost: {{ response_header: x-tokens-used, max_debt: soon }}
"
    );
    assert_eq!(
        errors(&yaml),
        [
            "rules.yaml:7:11: rule `a`, field `cost`: a request cost of 0 would count nothing; fix: use a whole number of at least 1",
            "rules.yaml:13:22: rule `b`, field `cost.request`: a request cost of -2 is negative; fix: use a whole number of at least 1",
            "rules.yaml:13:43: rule `b`, field `cost.response_header`: `x tokens` is not an HTTP header name; fix: use a header name such as x-tokens-used (letters, digits and -)",
            "rules.yaml:13:65: rule `b`, field `cost.max_debt`: `5ms` is out of range; fix: use a cap from the rule's emission interval (10ms) to 1d",
            "rules.yaml:19:22: rule `c`, field `cost.request`: a request cost of 51 is above the rule's burst of 50: every request would be refused; fix: use a cost of at most 50, or a larger `burst`",
            "rules.yaml:19:36: rule `c`, field `cost.max_debt`: `max_debt` caps the cost after the response, and there is none; fix: use `response_header` with it, or no `max_debt`",
            "rules.yaml:19:40: rule `c`, field `cost.tokens`: unknown field `tokens`; fix: remove it or use one of: request, response_header, max_debt",
            "rules.yaml:25:55: rule `d`, field `cost.max_debt`: `2d` is out of range; fix: use a cap from the rule's emission interval (10ms) to 1d",
            "rules.yaml:31:11: rule `e`, field `cost`: expected a whole number, or a table with `request`, `response_header` and `max_debt`, found a list; fix: write a whole number, or a table with `request`, `response_header` and `max_debt`",
            "rules.yaml:37:55: rule `f`, field `cost.max_debt`: invalid duration: `soon` must start with a number; fix: write a duration such as \"250ms\", \"2s\", \"1m\", \"1h\" (units ns, us, ms, s, m, h, d)",
        ]
    );
}

#[test]
fn a_cost_after_the_response_needs_gcra_debt() {
    let yaml = "rate_limits:
  window:
    algorithm: sliding_window
    limit: 100
    window: 1m
    cost: { request: 2, response_header: x-tokens-used }
  counted:
    algorithm: sliding_window
    limit: 100
    window: 1m
    cost: 2
  pool:
    algorithm: concurrency
    limit: 10
    cost: 2
";
    let got = check_str("rules.yaml".as_ref(), yaml, Format::Yaml).unwrap_err();
    let problems: Vec<(String, &Problem)> = got
        .errors()
        .iter()
        .map(|e| (format!("{}", e.pos), &e.problem))
        .collect();
    assert_eq!(
        problems[0],
        (
            "6:42".to_owned(),
            &Problem::DebtUnsupported {
                algorithm: "sliding_window"
            }
        )
    );
    let texts: Vec<String> = got.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        texts[0],
        "rules.yaml:6:42: rule `window`, field `cost.response_header`: a cost after the response is charged as GCRA debt, which a `sliding_window` rule cannot carry; fix: use algorithm token_bucket or leaky_bucket (local, keyed or on Redis), or remove `cost.response_header`"
    );
    // An up-front cost alone is fine on any rate rule; a concurrency rule takes none.
    assert_eq!(texts.len(), 2, "{texts:#?}");
    assert!(
        texts[1].starts_with("rules.yaml:15:5: rule `pool`, field `cost`: unknown field `cost`"),
        "{}",
        texts[1]
    );
}
