//! `quota:` (a calendar quota beside a rule's rate) understood exactly,
//! and each mistake reported at its line and column with its fix.

use limiter_rules::{CalendarQuota, Format, Period, check_str};

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
fn a_quota_is_understood_exactly() {
    let yaml = format!(
        "rate_limits:\n  a:\n{RULE}    quota: {{ limit: 10000, per: month, timezone: Europe/Paris, reset_day: 15 }}\n  b:\n{RULE}    key: ip\n    quota: {{ limit: 3, per: day }}\n"
    );
    let rules = check_str("r.yaml".as_ref(), &yaml, Format::Yaml).unwrap();
    let expected = CalendarQuota::new(10_000, Period::Month)
        .unwrap()
        .with_reset_day(15)
        .unwrap()
        .in_zone("Europe/Paris")
        .unwrap();
    assert_eq!(rules[0].quota, Some(expected));
    let daily = rules[1].quota.as_ref().unwrap();
    assert_eq!(
        (
            daily.limit(),
            daily.period(),
            daily.reset_day(),
            daily.zone_name()
        ),
        (3, Period::Day, 0, "UTC")
    );

    let toml = "[rate_limits.a]\nalgorithm = \"leaky_bucket\"\nrate = \"100/s\"\nquota = { limit = 7, per = \"week\", reset_day = 7, timezone = \"UTC\" }\n";
    let rules = check_str("r.toml".as_ref(), toml, Format::Toml).unwrap();
    let weekly = rules[0].quota.as_ref().unwrap();
    assert_eq!(
        (weekly.limit(), weekly.period(), weekly.reset_day()),
        (7, Period::Week, 7)
    );
    // A rule without `quota` has none.
    let rules = check_str(
        "r.yaml".as_ref(),
        &format!("rate_limits:\n  a:\n{RULE}"),
        Format::Yaml,
    )
    .unwrap();
    assert_eq!(rules[0].quota, None);
}

#[test]
fn the_quota_is_not_part_of_the_shape() {
    // Its count is kept apart from the rate's state: changing or removing
    // the quota never replaces the rate's limiter.
    let rule = |quota: &str| {
        let yaml = format!("rate_limits:\n  a:\n{RULE}{quota}");
        check_str("r.yaml".as_ref(), &yaml, Format::Yaml)
            .unwrap()
            .remove(0)
    };
    let base = rule("    quota: { limit: 10, per: month }\n");
    for other in [
        "    quota: { limit: 20, per: month }\n",
        "    quota: { limit: 10, per: week, timezone: Asia/Tokyo }\n",
        "",
    ] {
        let other = rule(other);
        assert_eq!(base.shape(), other.shape());
        assert_ne!(base, other);
    }
}

#[test]
fn quota_mistakes_are_located() {
    let yaml = format!(
        "rate_limits:\n  a:\n{RULE}    quota: {{ limit: 0, per: fortnight, timezone: Mars/Olympus_Mons }}\n  b:\n{RULE}    quota: {{ limit: 10, per: week, reset_day: 8 }}\n  c:\n{RULE}    quota: {{ limit: 10, per: month, reset_day: 0, resets: 1 }}\n  d:\n{RULE}    quota: {{ limit: 10, per: day, reset_day: 1 }}\n  e:\n{RULE}    quota: {{ per: month, reset_day: 32 }}\n  f:\n{RULE}    quota: 10000\n  g:\n    algorithm: sliding_window\n    limit: 10\n    window: 1m\n    quota: {{ limit: 10, per: day }}\n  h:\n{RULE}    quota: {{ limit: 4294967296, per: Month, timezone: 7 }}\n"
    );
    assert_eq!(
        errors(&yaml),
        [
            "rules.yaml:6:21: rule `a`, field `quota.limit`: 0 admits nothing; fix: use at least 1",
            "rules.yaml:6:29: rule `a`, field `quota.per`: unknown calendar period `fortnight`; fix: use day, week or month",
            "rules.yaml:6:50: rule `a`, field `quota.timezone`: unknown time zone `Mars/Olympus_Mons`; fix: use `UTC` or an IANA zone name such as `Europe/Paris` or `America/New_York`",
            "rules.yaml:11:47: rule `b`, field `quota.reset_day`: `reset_day: 8` is not a day of a week; fix: use 1 to 7 (1 = Monday, 7 = Sunday)",
            "rules.yaml:16:48: rule `c`, field `quota.reset_day`: `reset_day: 0` is not a day of a month; fix: use 1 to 31 (a shorter month resets on its last day)",
            "rules.yaml:16:51: rule `c`, field `quota.resets`: unknown field `resets`; fix: remove it or use one of: limit, per, timezone, reset_day",
            "rules.yaml:21:46: rule `d`, field `quota.reset_day`: `reset_day` does not apply to `per: day`, which resets at every local midnight; fix: use no `reset_day` with `per: day`, or `per: week` or `per: month`",
            "rules.yaml:26:12: rule `e`, field `quota.limit`: missing; fix: add this field",
            "rules.yaml:26:37: rule `e`, field `quota.reset_day`: `reset_day: 32` is not a day of a month; fix: use 1 to 31 (a shorter month resets on its last day)",
            "rules.yaml:31:12: rule `f`, field `quota`: expected a table with `limit`, `per`, `timezone` and `reset_day`, found an integer; fix: write a table with `limit`, `per`, `timezone` and `reset_day`",
            "rules.yaml:36:12: rule `g`, field `quota`: a calendar quota goes beside a rate, and this algorithm has none it can share; fix: use algorithm token_bucket or leaky_bucket with `quota`",
            "rules.yaml:41:21: rule `h`, field `quota.limit`: too large; fix: use at most 4294967295",
            "rules.yaml:41:38: rule `h`, field `quota.per`: unknown calendar period `Month`; fix: use day, week or month",
            "rules.yaml:41:55: rule `h`, field `quota.timezone`: expected a string, found an integer; fix: write a string",
        ]
    );
}

#[test]
fn toml_quota_mistakes_are_located() {
    let toml = "[rate_limits.a]\nalgorithm = \"token_bucket\"\nrate = 10\n[rate_limits.a.quota]\nlimit = 5\nper = \"month\"\ntimezone = \"Europe/Pariss\"\nreset_day = 40\n";
    let e = check_str("rules.toml".as_ref(), toml, Format::Toml).unwrap_err();
    let got: Vec<String> = e.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "rules.toml:7:12: rule `a`, field `quota.timezone`: unknown time zone `Europe/Pariss`; fix: use `UTC` or an IANA zone name such as `Europe/Paris` or `America/New_York`",
            "rules.toml:8:13: rule `a`, field `quota.reset_day`: `reset_day: 40` is not a day of a month; fix: use 1 to 31 (a shorter month resets on its last day)",
        ]
    );
}
