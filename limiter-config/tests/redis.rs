//! `backend: redis` rules against a real `redis-server` this test starts on
//! a free port: built into a `RedisLimiter`, shared by two rule sets (two
//! processes), reloaded with the state kept on Redis, and served over HTTP.

use crate::support;

use limiter_test_support::redis as redis_support;

use http::{Request, StatusCode};
use http_body_util::{Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use limiter_config::{RuleError, RuleSet};
use limiter_core::Quota;
use limiter_redis::RedisLimitError;
use redis_support::RedisServer;
use support::TempDir;

fn rules(url: &str, burst: u32) -> String {
    format!(
        r#"rate_limits:
  shared:
    algorithm: token_bucket
    rate: "10/s"
    burst: {burst}
    key: ip
    backend: redis
    redis: {{ url: "{url}", key_prefix: "cfgtest", failure_policy: error, timeout: "2s" }}
    match: {{ route: "/r" }}
"#
    )
}

fn denied(result: Result<(), RuleError>) -> bool {
    matches!(
        result,
        Err(RuleError::Redis(RedisLimitError::RateLimited { .. }))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rules_share_state_and_keep_it_across_reloads() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &rules(&server.url(), 2));
    let a = RuleSet::load(&path).unwrap();
    let b = RuleSet::load(&path).unwrap(); // another process, same Redis
    let rule = a.get("shared").unwrap();
    let redis = rule.redis().expect("a Redis rule builds a RedisLimiter");
    assert_eq!(
        redis.quota(),
        Quota::per_second(10).unwrap().with_burst(2).unwrap()
    );
    assert_eq!(redis.redis_key("1.2.3.4"), "{cfgtest:1.2.3.4}");
    // A keyed rule needs the key.
    assert!(matches!(
        rule.try_acquire().await,
        Err(RuleError::NeedsKey { .. })
    ));

    rule.try_acquire_key_n("1.2.3.4", 2).await.unwrap();
    let other = b.get("shared").unwrap();
    let refused = other.try_acquire_key_n("1.2.3.4", 1).await;
    assert!(
        denied(refused),
        "the second rule set shares the key's state"
    );
    other.try_acquire_key_n("5.6.7.8", 1).await.unwrap();

    // Burst 2 → 3: the key's state stays on Redis, so the drained key gets
    // the one permit the larger burst adds, not a fresh 3.
    std::fs::write(&path, rules(&server.url(), 3)).unwrap();
    assert_eq!(a.reload().unwrap().updated, ["shared"]);
    let rule = a.get("shared").unwrap();
    assert_eq!(rule.redis().unwrap().quota().burst(), 3);
    rule.try_acquire_key_n("1.2.3.4", 1).await.unwrap();
    assert!(denied(rule.try_acquire_key_n("1.2.3.4", 1).await));
    rule.try_acquire_key_n("9.9.9.9", 3).await.unwrap(); // a fresh key: all 3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rules_limit_http_requests() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &rules(&server.url(), 1));
    let rules = RuleSet::load(&path).unwrap();
    let app = axum::Router::new()
        .route("/r", axum::routing::get(|| async { "r" }))
        .layer(rules.layer());
    let addr = support::serve_app(app).await;
    let get = |from: &'static str| async move {
        let mut connector = HttpConnector::new();
        connector.set_local_address(Some(from.parse().unwrap()));
        let client: Client<_, Empty<bytes::Bytes>> =
            Client::builder(TokioExecutor::new()).build(connector);
        let request = Request::get(format!("http://{addr}/r"))
            .body(Empty::new())
            .unwrap();
        client.request(request).await.unwrap()
    };
    let ok = get("127.0.0.1").await;
    assert_eq!(ok.status(), StatusCode::OK);
    // 10/s, burst 1: the steady rate, and the burst beside it.
    assert_eq!(
        ok.headers()["ratelimit-policy"],
        r#""shared";q=10;w=1;limiter-burst=1"#
    );
    assert_eq!(ok.headers()["ratelimit"], r#""shared";r=0;t=1"#);
    assert_eq!(
        get("127.0.0.1").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(get("127.0.0.2").await.status(), StatusCode::OK);
}

/// A GET of `/r` from the socket peer `peer`, through `rules`' layer.
async fn through_layer(rules: &RuleSet, peer: &str) -> StatusCode {
    use tower::{Layer, ServiceExt};
    let inner = tower::service_fn(|_: Request<Empty<bytes::Bytes>>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(Full::<bytes::Bytes>::default()))
    });
    let mut request = Request::get("/r").body(Empty::new()).unwrap();
    request
        .extensions_mut()
        .insert(limiter_tower::PeerAddr(peer.parse().unwrap()));
    rules
        .layer()
        .layer(inner)
        .oneshot(request)
        .await
        .unwrap()
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_and_http_name_one_redis_key_per_client() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let rules = RuleSet::load(dir.write("rules.yaml", &rules(&server.url(), 1))).unwrap();
    let rule = rules.get("shared").unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();

    // HTTP first: the client's one permit, under its /64 written once.
    assert_eq!(
        through_layer(&rules, "[2001:db8:0:7::1]:1").await,
        StatusCode::OK
    );
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys, ["{cfgtest:2001%3Adb8%3A0%3A7%3A%3A}"]);
    // The library names the same key for the same /64: spent.
    assert!(denied(rule.try_acquire_key_n("2001:db8:0:7::", 1).await));

    // Library first, for another address: the HTTP request finds it spent.
    rule.try_acquire_key_n("2001:db8:0:8::", 1).await.unwrap();
    assert_eq!(
        through_layer(&rules, "[2001:db8:0:8::1]:1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    keys.sort();
    assert_eq!(
        keys,
        [
            "{cfgtest:2001%3Adb8%3A0%3A7%3A%3A}",
            "{cfgtest:2001%3Adb8%3A0%3A8%3A%3A}"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_rule_charges_the_cost_after_the_response_on_redis() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    // 60 an hour (t = 1 min), burst 10: per-hour numbers, so the whole
    // seconds of Retry-After do not move with the machine's speed.
    let yaml = format!(
        r#"rate_limits:
  tokens:
    algorithm: token_bucket
    rate: "60/h"
    burst: 10
    key: header:x-user
    backend: redis
    redis: {{ url: "{}", key_prefix: "cost", failure_policy: error, timeout: "2s" }}
    cost: {{ response_header: x-tokens-used, max_debt: 1h }}
    match: {{ prefix: "/t" }}
"#,
        server.url()
    );
    let rules = RuleSet::load(dir.write("rules.yaml", &yaml)).unwrap();
    let app = axum::Router::new()
        .route(
            "/t/{used}",
            axum::routing::get(
                |axum::extract::Path(used): axum::extract::Path<String>| async move {
                    ([("x-tokens-used", used)], "t")
                },
            ),
        )
        .layer(rules.layer());
    let addr = support::serve_app(app).await;
    let get = |path: &'static str| async move {
        let client: Client<_, Empty<bytes::Bytes>> =
            Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        let request = Request::get(format!("http://{addr}{path}"))
            .header("x-user", "ann")
            .body(Empty::new())
            .unwrap();
        client.request(request).await.unwrap()
    };
    assert_eq!(get("/t/25").await.status(), StatusCode::OK);
    // 24 more on Redis before the response came back: tat = 25 min, the
    // next permit 16 min away.
    let refused = get("/t/1").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "960");
    let pttl: i64 = server.cmd(&["PTTL", "{cost:ann}"]).await;
    assert!(pttl > 1_499_000 && pttl <= 1_500_000, "pttl {pttl}");
}

/// A rule with a calendar `quota` on Redis: the count is kept in Redis
/// (`{key_prefix}:quota:{key}:{period start}`, expiring an hour after the
/// period), so a restarted rule set (a new process) continues it; the 429
/// carries the real reset.
#[tokio::test]
async fn a_calendar_quota_on_redis_survives_a_restart() {
    use limiter_core::ManualClock;
    use tower::{Layer, ServiceExt};

    let server = RedisServer::start();
    let dir = TempDir::new();
    let yaml = format!(
        r#"rate_limits:
  monthly:
    algorithm: token_bucket
    rate: "100/s"
    burst: 100
    key: ip
    backend: redis
    redis: {{ url: "{}", key_prefix: "cfgcal", failure_policy: error, timeout: "2s" }}
    quota: {{ limit: 3, per: month, timezone: Europe/Paris }}
    match: {{ route: "/r" }}
"#,
        server.url()
    );
    let path = dir.write("rules.yaml", &yaml);
    // 2024-02-29T22:00:00Z: 23:00 in Paris on the leap day, an hour before
    // March (2024-02-29T23:00:00Z).
    let clock = ManualClock::starting_at(1_709_244_000 * 1_000_000_000);
    let get = |rules: RuleSet<ManualClock>| async move {
        let inner = tower::service_fn(|_: Request<Empty<bytes::Bytes>>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Full::<bytes::Bytes>::default()))
        });
        let mut request = Request::get("/r").body(Empty::new()).unwrap();
        request
            .extensions_mut()
            .insert(limiter_tower::PeerAddr("127.0.0.1:1".parse().unwrap()));
        let response = rules.layer().layer(inner).oneshot(request).await.unwrap();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        (
            response.status(),
            header("ratelimit"),
            header("retry-after"),
        )
    };
    let first = RuleSet::load_with_clocks(&path, clock.clone(), clock.clone()).unwrap();
    let (status, limit, _) = get(first.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(limit.as_deref(), Some(r#""monthly";r=2;t=3600"#));
    assert_eq!(get(first.clone()).await.0, StatusCode::OK);
    drop(first);

    // A restart: a new rule set on the same Redis continues the count.
    let second = RuleSet::load_with_clocks(&path, clock.clone(), clock.clone()).unwrap();
    let (status, limit, _) = get(second.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(limit.as_deref(), Some(r#""monthly";r=0;t=3600"#));
    let (status, limit, retry) = get(second.clone()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limit.as_deref(), Some(r#""monthly";r=0;t=3600"#));
    assert_eq!(retry.as_deref(), Some("3600"));

    // One key for the period (February in Paris began at
    // 2024-01-31T23:00:00Z), expiring an hour after it: two hours to live.
    let keys: Vec<String> = server.cmd(&["KEYS", "cfgcal:quota:*"]).await;
    assert_eq!(keys, ["cfgcal:quota:127.0.0.1:1706742000"]);
    let used: i64 = server.cmd(&["GET", &keys[0]]).await;
    assert_eq!(used, 3);
    let ttl: i64 = server.cmd(&["PTTL", &keys[0]]).await;
    assert!(ttl > 7_190_000 && ttl <= 7_200_000, "{ttl}");

    // March: a new period, a new count.
    clock.set(1_709_247_600 * 1_000_000_000);
    let (status, limit, _) = get(second).await;
    assert_eq!(status, StatusCode::OK);
    // March 2024 in Paris: 31 days less the hour lost on the 31st.
    assert_eq!(
        limit.as_deref(),
        Some(format!("\"monthly\";r=2;t={}", 31 * 86_400 - 3600).as_str())
    );
}
