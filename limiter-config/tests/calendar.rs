//! Calendar quotas (`quota:`) through the rules' HTTP layer on a manual
//! clock set to the instants that matter, as both the rule set's clock and
//! its wall clock: a month end, the leap day with `reset_day: 31`, both
//! daylight-saving changes of Paris, the composite with a rate (all or
//! nothing, headers stating the part that binds), a reload, and explain.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, StatusCode};
use limiter_config::{ExplainRequest, QuotaReading, RuleSet, Verdict};
use limiter_core::ManualClock;
use limiter_tower::PeerAddr;
use support::TempDir;
use tower::ServiceExt;

const NS: u64 = 1_000_000_000;

/// Seconds since the epoch of an RFC 3339 instant (the test's own
/// arithmetic, independent of the crates').
fn secs(rfc3339: &str) -> u64 {
    let ts: jiff::Timestamp = rfc3339.parse().unwrap();
    u64::try_from(ts.as_second()).unwrap()
}

fn set(clock: &ManualClock, rfc3339: &str) {
    clock.set(secs(rfc3339) * NS);
}

fn load(
    yaml: &str,
    at: &str,
) -> (
    TempDir,
    std::path::PathBuf,
    RuleSet<ManualClock>,
    ManualClock,
) {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", yaml);
    let clock = ManualClock::starting_at(secs(at) * NS);
    let rules = RuleSet::load_with_clocks(&path, clock.clone(), clock.clone()).unwrap();
    (dir, path, rules, clock)
}

fn app(rules: &RuleSet<ManualClock>) -> axum::Router {
    axum::Router::new()
        .route("/api/{x}", axum::routing::get(|| async { "ok" }))
        .layer(rules.layer())
}

/// The answer's status and its `RateLimit-Policy`, `RateLimit` and
/// `Retry-After` headers (`-` for one that is absent).
async fn get(app: &axum::Router, tenant: &str) -> (StatusCode, String, String, String) {
    let mut request = Request::get("/api/x")
        .header("x-tenant", tenant)
        .body(axum::body::Body::empty())
        .unwrap();
    let peer: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    request.extensions_mut().insert(PeerAddr(peer));
    let response = app.clone().oneshot(request).await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map_or("-".to_owned(), |v| v.to_str().unwrap().to_owned())
    };
    (
        response.status(),
        header("ratelimit-policy"),
        header("ratelimit"),
        header("retry-after"),
    )
}

fn ok(policy: &str, limit: &str) -> (StatusCode, String, String, String) {
    (StatusCode::OK, policy.into(), limit.into(), "-".into())
}

fn refused(policy: &str, limit: &str, retry: &str) -> (StatusCode, String, String, String) {
    (
        StatusCode::TOO_MANY_REQUESTS,
        policy.into(),
        limit.into(),
        retry.into(),
    )
}

/// A rule of `rate` with `quota`, keyed by the tenant header.
fn rule(rate: &str, quota: &str) -> String {
    format!(
        "rate_limits:\n  monthly:\n    algorithm: token_bucket\n{rate}    key: header:x-tenant\n    quota: {quota}\n    match: {{ prefix: /api }}\n"
    )
}

const GENEROUS: &str = "    rate: 1/h\n    burst: 10\n";

#[tokio::test(start_paused = true)]
async fn a_monthly_quota_resets_at_the_month_end_with_exact_headers() {
    let yaml = rule(GENEROUS, "{ limit: 3, per: month }");
    let (_dir, _path, rules, clock) = load(&yaml, "2024-01-31T23:59:58Z");
    let app = app(&rules);
    // January: 31 days, 2 s left.
    let january = "\"monthly\";q=3;w=2678400";
    assert_eq!(get(&app, "a").await, ok(january, "\"monthly\";r=2;t=2"));
    assert_eq!(get(&app, "a").await, ok(january, "\"monthly\";r=1;t=2"));
    assert_eq!(get(&app, "a").await, ok(january, "\"monthly\";r=0;t=2"));
    assert_eq!(
        get(&app, "a").await,
        refused(january, "\"monthly\";r=0;t=2", "2")
    );
    // Another tenant has its own count.
    assert_eq!(get(&app, "b").await, ok(january, "\"monthly\";r=2;t=2"));
    // One second before the end: still refused, one second to wait.
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        get(&app, "a").await,
        refused(january, "\"monthly\";r=0;t=1", "1")
    );
    // The refusals charged nothing on the rate: 10 − 3 admitted.
    let monthly = rules.get("monthly").unwrap();
    let key = limiter_config::RuleLimiter::<ManualClock>::key("a");
    assert_eq!(monthly.keyed().unwrap().available(&key), 7);

    // 1 February 2024: a 29-day month starts, all of it again.
    set(&clock, "2024-02-01T00:00:00Z");
    let february = "\"monthly\";q=3;w=2505600";
    assert_eq!(
        get(&app, "a").await,
        ok(february, "\"monthly\";r=2;t=2505600")
    );
    assert_eq!(
        monthly.quota_remaining("a"),
        Some((2, Duration::from_secs(29 * 86_400)))
    );
}

#[tokio::test(start_paused = true)]
async fn reset_day_31_ends_february_on_the_leap_day() {
    let yaml = rule(GENEROUS, "{ limit: 2, per: month, reset_day: 31 }");
    let (_dir, _path, rules, clock) = load(&yaml, "2024-02-28T23:00:00Z");
    let app = app(&rules);
    // The period began on 31 January and ends on 29 February: 29 days.
    let to_leap_day = "\"monthly\";q=2;w=2505600";
    assert_eq!(
        get(&app, "a").await,
        ok(to_leap_day, "\"monthly\";r=1;t=3600")
    );
    assert_eq!(
        get(&app, "a").await,
        ok(to_leap_day, "\"monthly\";r=0;t=3600")
    );
    assert_eq!(
        get(&app, "a").await,
        refused(to_leap_day, "\"monthly\";r=0;t=3600", "3600")
    );
    // 29 February 2024: the next period runs to 31 March, 31 days.
    set(&clock, "2024-02-29T00:00:00Z");
    assert_eq!(
        get(&app, "a").await,
        ok("\"monthly\";q=2;w=2678400", "\"monthly\";r=1;t=2678400")
    );
    // A quarter of an hour into the leap day.
    clock.advance(Duration::from_secs(900));
    assert_eq!(
        get(&app, "a").await,
        ok("\"monthly\";q=2;w=2678400", "\"monthly\";r=0;t=2677500")
    );
}

#[tokio::test(start_paused = true)]
async fn a_daily_quota_in_paris_lasts_23_hours_in_spring_and_25_in_autumn() {
    let yaml = rule(GENEROUS, "{ limit: 2, per: day, timezone: Europe/Paris }");
    // 01:30 +01:00 on 31 March 2024; the clocks go to 03:00 at 02:00, and
    // the day ends at 2024-03-31T22:00:00Z (midnight +02:00).
    let (_dir, _path, rules, clock) = load(&yaml, "2024-03-31T00:30:00Z");
    let app = app(&rules);
    let spring = "\"monthly\";q=2;w=82800";
    let left = 21 * 3600 + 1800;
    assert_eq!(
        get(&app, "a").await,
        ok(spring, &format!("\"monthly\";r=1;t={left}"))
    );
    assert_eq!(
        get(&app, "a").await,
        ok(spring, &format!("\"monthly\";r=0;t={left}"))
    );
    assert_eq!(
        get(&app, "a").await,
        refused(
            spring,
            &format!("\"monthly\";r=0;t={left}"),
            &left.to_string()
        )
    );
    // 03:30 +02:00, an hour of wall time later.
    clock.advance(Duration::from_secs(3600));
    let left = left - 3600;
    assert_eq!(
        get(&app, "a").await,
        refused(
            spring,
            &format!("\"monthly\";r=0;t={left}"),
            &left.to_string()
        )
    );

    // 27 October 2024: 03:00 +02:00 goes back to 02:00 +01:00; the day
    // runs from 2024-10-26T22:00:00Z to 2024-10-27T23:00:00Z.
    set(&clock, "2024-10-27T00:30:00Z"); // 02:30 +02:00, the first of two
    let autumn = "\"monthly\";q=2;w=90000";
    let left = 22 * 3600 + 1800;
    assert_eq!(
        get(&app, "a").await,
        ok(autumn, &format!("\"monthly\";r=1;t={left}"))
    );
    set(&clock, "2024-10-27T01:30:00Z"); // 02:30 +01:00, the second
    let left = left - 3600;
    assert_eq!(
        get(&app, "a").await,
        ok(autumn, &format!("\"monthly\";r=0;t={left}"))
    );
    assert_eq!(
        get(&app, "a").await,
        refused(
            autumn,
            &format!("\"monthly\";r=0;t={left}"),
            &left.to_string()
        )
    );
}

#[tokio::test(start_paused = true)]
async fn the_composite_is_all_or_nothing_and_its_headers_state_the_part_that_binds() {
    // 2 per hour at once, 4 per day.
    let yaml = rule("    rate: 1/h\n    burst: 2\n", "{ limit: 4, per: day }");
    let (_dir, _path, rules, clock) = load(&yaml, "2024-06-01T20:00:00Z");
    let app = app(&rules);
    let rate = "\"monthly\";q=2;w=7200";
    let day = "\"monthly\";q=4;w=86400";
    // 3 left in the day, more than the rate's burst: the rate binds.
    assert_eq!(get(&app, "a").await, ok(rate, "\"monthly\";r=1;t=3600"));
    // 2 left in the day: the day binds (4 hours to midnight).
    assert_eq!(get(&app, "a").await, ok(day, "\"monthly\";r=2;t=14400"));
    // The rate refuses; the day's count is not charged.
    assert_eq!(
        get(&app, "a").await,
        refused(rate, "\"monthly\";r=0;t=3600", "3600")
    );
    let monthly = rules.get("monthly").unwrap();
    assert_eq!(
        monthly.quota_remaining("a"),
        Some((2, Duration::from_secs(4 * 3600)))
    );
    // Two hours later: the rate has 2 again, the day 2.
    clock.advance(Duration::from_secs(7200));
    assert_eq!(get(&app, "a").await, ok(day, "\"monthly\";r=1;t=7200"));
    assert_eq!(get(&app, "a").await, ok(day, "\"monthly\";r=0;t=7200"));
    // An hour later the rate would admit, but the day is spent: refused
    // until midnight, and the rate's permit is given back.
    clock.advance(Duration::from_secs(3600));
    let key = limiter_config::RuleLimiter::<ManualClock>::key("a");
    let keyed = monthly.keyed().unwrap();
    assert_eq!(keyed.available(&key), 1);
    assert_eq!(
        get(&app, "a").await,
        refused(day, "\"monthly\";r=0;t=3600", "3600")
    );
    assert_eq!(keyed.available(&key), 1);

    // Explain: the key's quota and the verdict of both, consuming nothing.
    let mut headers = http::HeaderMap::new();
    headers.insert("x-tenant", "a".parse().unwrap());
    let request = ExplainRequest {
        method: http::Method::GET,
        path: "/api/x".into(),
        headers,
        client: None,
    };
    let e = rules.explain(&request);
    assert_eq!(
        e.limit.as_deref(),
        Some("token_bucket: rate 1/1h (one permit every 1h), burst 2; quota 4 per day (UTC)")
    );
    assert_eq!(
        e.quota,
        Some(QuotaReading {
            limit: 4,
            remaining: 0,
            reset_in: Duration::from_secs(3600)
        })
    );
    assert_eq!(
        e.verdict,
        Verdict::Refused {
            retry_after: Duration::from_secs(3600),
            remaining: 0
        }
    );
    // A new tenant: the rate's burst less one and the day's limit.
    let mut other = request.clone();
    other.headers.insert("x-tenant", "b".parse().unwrap());
    let e = rules.explain(&other);
    assert_eq!(e.verdict, Verdict::Admitted { remaining: 1 });
    assert_eq!(e.quota.map(|q| q.remaining), Some(4));
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_the_count_moves_the_limit_and_a_new_period_starts_afresh() {
    let yaml = rule(GENEROUS, "{ limit: 3, per: day }");
    let (dir, path, rules, _clock) = load(&yaml, "2024-06-01T12:00:00Z");
    let app = app(&rules);
    for _ in 0..3 {
        assert_eq!(get(&app, "a").await.0, StatusCode::OK);
    }
    assert_eq!(get(&app, "a").await.0, StatusCode::TOO_MANY_REQUESTS);
    // The limit moves live; the day's count stays: 2 more.
    dir.write("rules.yaml", &rule(GENEROUS, "{ limit: 5, per: day }"));
    let report = rules.reload().unwrap();
    assert_eq!(report.updated, ["monthly"]);
    let app = self::app(&rules);
    let policy = "\"monthly\";q=5;w=86400";
    assert_eq!(get(&app, "a").await, ok(policy, "\"monthly\";r=1;t=43200"));
    // Another period (a week from Monday): a new count; the rate's state
    // is kept (10 − 5 admitted: the refusal by the day charged nothing).
    std::fs::write(&path, rule(GENEROUS, "{ limit: 5, per: week }")).unwrap();
    rules.reload().unwrap();
    let app = self::app(&rules);
    let week = "\"monthly\";q=5;w=604800";
    // 2024-06-01 is a Saturday: the week ends on Monday 3 June.
    assert_eq!(get(&app, "a").await, ok(week, "\"monthly\";r=4;t=129600"));
    let key = limiter_config::RuleLimiter::<ManualClock>::key("a");
    let monthly = rules.get("monthly").unwrap();
    assert_eq!(monthly.keyed().unwrap().available(&key), 5);
}

#[tokio::test(start_paused = true)]
async fn library_calls_take_the_quota_too_all_or_nothing() {
    use limiter_config::RuleError;
    use limiter_core::AcquireError;

    let yaml = "rate_limits:\n  nightly:\n    algorithm: token_bucket\n    rate: 1/h\n    burst: 5\n    quota: { limit: 2, per: day, timezone: America/New_York }\n";
    // 23:00 EST on 9 March 2024; the next day is 23 hours long.
    let (_dir, _path, rules, clock) = load(yaml, "2024-03-10T04:00:00Z");
    let nightly = rules.get("nightly").unwrap();
    nightly.try_acquire().await.unwrap();
    nightly.take().await.unwrap();
    let spent = |r: Result<(), RuleError>, wait: u64| {
        assert!(
            matches!(
                r,
                Err(RuleError::Limited(AcquireError::RateLimited { wait: w }))
                    if w == Duration::from_secs(wait)
            ),
            "{r:?}"
        )
    };
    spent(nightly.try_acquire().await, 3600);
    spent(nightly.take().await, 3600);
    assert!(matches!(
        nightly.try_acquire_n(3).await,
        Err(RuleError::Limited(AcquireError::InsufficientCapacity {
            requested: 3,
            burst: 2
        }))
    ));
    // The refusals charged nothing on the rate: 5 − 2.
    assert_eq!(nightly.gcra().unwrap().available(), 3);
    assert_eq!(
        nightly.quota_remaining(""),
        Some((0, Duration::from_secs(3600)))
    );
    // Midnight EST: a 23-hour day with its whole limit.
    set(&clock, "2024-03-10T05:00:00Z");
    nightly.try_acquire_n(2).await.unwrap();
    spent(nightly.try_acquire().await, 23 * 3600);
}
