//! Shadow mode, the penalty box and explain, with exact values under a
//! manual clock, through the rules' HTTP layer.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, StatusCode};
use limiter_config::{ExplainRequest, RuleSet, Verdict};
use limiter_core::ManualClock;
use limiter_tower::PeerAddr;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use support::TempDir;
use tower::ServiceExt;

fn app(rules: &RuleSet<ManualClock>) -> axum::Router {
    axum::Router::new()
        .route("/api/{x}", axum::routing::get(|| async { "ok" }))
        .layer(rules.layer())
}

async fn get(app: &axum::Router, from: &str, path: &str) -> http::Response<axum::body::Body> {
    let mut request = Request::get(path).body(axum::body::Body::empty()).unwrap();
    let peer: SocketAddr = format!("{from}:4000").parse().unwrap();
    request.extensions_mut().insert(PeerAddr(peer));
    app.clone().oneshot(request).await.unwrap()
}

/// The counters of a rule set: a snapshot hands out what was counted since
/// the last one, so the totals are kept here.
struct Counters {
    snapshotter: Snapshotter,
    totals: std::cell::RefCell<std::collections::HashMap<(String, String), u64>>,
}

/// The total of counter `name` of rule `rule`.
fn counter(counters: &Counters, name: &str, rule: &str) -> u64 {
    let mut totals = counters.totals.borrow_mut();
    for (key, _, _, value) in counters.snapshotter.snapshot().into_vec() {
        let k = key.key();
        if let (DebugValue::Counter(v), Some(l)) =
            (value, k.labels().find(|l| l.key() == "limiter"))
        {
            *totals
                .entry((k.name().to_owned(), l.value().to_owned()))
                .or_default() += v;
        }
    }
    totals
        .get(&(name.to_owned(), rule.to_owned()))
        .copied()
        .unwrap_or(0)
}

fn load(
    yaml: &str,
    clock: &ManualClock,
) -> (TempDir, std::path::PathBuf, RuleSet<ManualClock>, Counters) {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", yaml);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let rules = metrics::with_local_recorder(&recorder, || {
        RuleSet::load_with_clock(&path, clock.clone()).unwrap()
    });
    let counters = Counters {
        snapshotter,
        totals: Default::default(),
    };
    (dir, path, rules, counters)
}

const SHADOW: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 10
    burst: 3
    key: ip
    shadow: true
    match: { prefix: \"/api\" }
";

#[tokio::test(start_paused = true)]
async fn a_shadowed_rule_refuses_nothing_counts_and_charges_what_it_admits() {
    let clock = ManualClock::new();
    let (_dir, path, rules, snap) = load(SHADOW, &clock);
    let app = app(&rules);
    for _ in 0..5 {
        let r = get(&app, "10.0.0.1", "/api/x").await;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(
            r.headers().get("ratelimit").is_none(),
            "invisible by default"
        );
    }
    assert_eq!(counter(&snap, "rate_limit_shadow_rejected_total", "api"), 2);
    let api = rules.get("api").unwrap();
    let key = limiter_config::RuleLimiter::<ManualClock>::key("10.0.0.1");
    // Charged three (the burst), the two refusals nothing: one permit back
    // after one emission interval, exactly.
    assert_eq!(api.keyed().unwrap().available(&key), 0);
    clock.advance(Duration::from_millis(100));
    assert_eq!(api.keyed().unwrap().available(&key), 1);

    // Enforcing by reload: the same limiter, its state kept.
    std::fs::write(&path, SHADOW.replace("    shadow: true\n", "")).unwrap();
    let report = rules.reload().unwrap();
    assert_eq!(report.unchanged, ["api"]);
    assert_eq!(
        get(&app, "10.0.0.1", "/api/x").await.status(),
        StatusCode::OK
    );
    let refused = get(&app, "10.0.0.1", "/api/x").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(counter(&snap, "rate_limit_shadow_rejected_total", "api"), 2);
}

#[tokio::test(start_paused = true)]
async fn shadow_headers_and_a_whole_file_in_shadow() {
    let clock = ManualClock::new();
    let yaml = format!(
        "shadow: true\n{}",
        SHADOW.replace("shadow: true", "shadow_headers: true")
    );
    let (_dir, _path, rules, snap) = load(&yaml, &clock);
    let app = app(&rules);
    for expected in ["r=2, t=1", "r=1, t=1", "r=0, t=1", "r=0, t=1"] {
        let r = get(&app, "10.0.0.2", "/api/x").await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()["ratelimit"],
            format!("\"api\";{}", expected.replace(", ", ";"))
        );
    }
    assert_eq!(counter(&snap, "rate_limit_shadow_rejected_total", "api"), 1);
}

const DELAY: &str = "\
rate_limits:
  paced:
    algorithm: leaky_bucket
    rate: 10
    max_delay: 1s
    shadow: true
    match: { prefix: \"/api\" }
";

#[tokio::test(start_paused = true)]
async fn a_shadowed_delay_rule_charges_the_grant_and_does_not_wait() {
    let clock = ManualClock::new();
    let (_dir, _path, rules, snap) = load(DELAY, &clock);
    let app = app(&rules);
    let started = tokio::time::Instant::now();
    for _ in 0..12 {
        assert_eq!(
            get(&app, "10.0.0.3", "/api/x").await.status(),
            StatusCode::OK
        );
    }
    assert_eq!(started.elapsed(), Duration::ZERO, "nothing waited");
    // 1 at once, 10 held (100 ms .. 1 s), the 12th (1.1 s) refused.
    assert_eq!(
        counter(&snap, "rate_limit_shadow_delayed_total", "paced"),
        10
    );
    assert_eq!(
        counter(&snap, "rate_limit_shadow_rejected_total", "paced"),
        1
    );
}

const PENALTY: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 10
    burst: 1
    key: ip
    penalty: { after: 3, within: 1m, block: 5m }
    match: { prefix: \"/api\" }
";

#[tokio::test(start_paused = true)]
async fn a_key_refused_too_often_is_boxed_for_the_block_and_released_early() {
    let clock = ManualClock::new();
    let (_dir, _path, rules, snap) = load(PENALTY, &clock);
    let app = app(&rules);
    assert_eq!(
        get(&app, "10.0.0.4", "/api/x").await.status(),
        StatusCode::OK
    );
    for retry in ["1", "1"] {
        let r = get(&app, "10.0.0.4", "/api/x").await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()["retry-after"], retry);
    }
    // The third refusal blocks: its Retry-After is the whole block.
    let r = get(&app, "10.0.0.4", "/api/x").await;
    assert_eq!(r.headers()["retry-after"], "300");
    clock.advance(Duration::from_secs(100));
    let r = get(&app, "10.0.0.4", "/api/x").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "200", "the rest of the block");
    assert_eq!(counter(&snap, "rate_limit_penalized_total", "api"), 1);
    // Another client is not affected.
    assert_eq!(
        get(&app, "10.0.0.5", "/api/x").await.status(),
        StatusCode::OK
    );
    // Explain shows the block.
    let explain = ExplainRequest {
        method: http::Method::GET,
        path: "/api/x".into(),
        headers: http::HeaderMap::new(),
        client: Some("10.0.0.4".parse().unwrap()),
    };
    assert_eq!(
        rules.explain(&explain).verdict,
        Verdict::Penalized {
            retry_after: Duration::from_secs(200)
        }
    );
    assert!(rules.get("api").unwrap().release_penalty("10.0.0.4"));
    assert!(!rules.get("api").unwrap().release_penalty("10.0.0.4"));
    assert_eq!(
        get(&app, "10.0.0.4", "/api/x").await.status(),
        StatusCode::OK
    );
}

#[tokio::test(start_paused = true)]
async fn explain_consumes_nothing() {
    let clock = ManualClock::new();
    let (_dir, _path, rules, _snap) = load(&PENALTY.replace("burst: 1", "burst: 3"), &clock);
    let request = |ip: &str, path: &str| ExplainRequest {
        method: http::Method::GET,
        path: path.into(),
        headers: http::HeaderMap::new(),
        client: Some(ip.parse().unwrap()),
    };
    let e = rules.explain(&request("203.0.113.9", "/api/orders"));
    assert_eq!(
        (e.rule.as_deref(), e.key.as_deref()),
        (Some("api"), Some("203.0.113.9"))
    );
    assert_eq!(e.verdict, Verdict::Admitted { remaining: 2 });
    for _ in 0..1000 {
        assert_eq!(rules.explain(&request("203.0.113.9", "/api/orders")), e);
    }
    let api = rules.get("api").unwrap();
    assert_eq!(api.keys_in_use(), Some(0), "explain inserts no key");
    let app = app(&rules);
    let r = get(&app, "203.0.113.9", "/api/orders").await;
    assert_eq!(r.headers()["ratelimit"], "\"api\";r=2;t=1");
    for _ in 0..2 {
        get(&app, "203.0.113.9", "/api/orders").await;
    }
    assert_eq!(
        rules
            .explain(&request("203.0.113.9", "/api/orders"))
            .verdict,
        Verdict::Refused {
            retry_after: Duration::from_millis(100),
            remaining: 0
        }
    );
    let none = rules.explain(&request("203.0.113.9", "/other"));
    assert_eq!((none.rule, none.verdict), (None, Verdict::Unlimited));
}
