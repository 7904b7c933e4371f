//! The layer over Redis (feature `redis`): two service instances, each a real
//! axum server with its own `RedisLimiter` and connection, in front of one
//! real `redis-server` that the test starts (and kills), and a real HTTP
//! client. Quotas are per hour so no expectation depends on the machine's
//! speed.
#![cfg(feature = "redis")]

use std::net::SocketAddr;
use std::time::Duration;

use http::StatusCode;
use limiter_redis::{RedisLimiter, WhenDown};
use limiter_tower::key_encoding::EncodeKey;
use limiter_tower::{Global, Mode, PeerIp, RateLimitLayer, RedisBackend};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

use limiter_test_support::redis as redis_server;

use crate::support::http::{client_from, get_from, hello, per_hour, serve};
use redis_server::RedisServer;

/// One service instance: its own limiter and connection, keys under
/// `prefix` (instances with the same prefix share their quotas).
async fn instance<K: EncodeKey>(
    server: &RedisServer,
    prefix: &str,
    policy: WhenDown,
    layer: impl FnOnce(RedisBackend<K>) -> axum::Router,
) -> SocketAddr {
    let limiter = RedisLimiter::builder(server.manager().await, per_hour(3))
        .key_prefix(prefix)
        .call_timeout(Duration::from_millis(200))
        .retry_interval(Duration::from_secs(60))
        .failure_policy(policy)
        .build()
        .unwrap();
    serve(layer(RedisBackend::new(limiter))).await
}

#[tokio::test]
async fn instances_share_one_quota_per_client_through_redis() {
    let server = RedisServer::start();
    let per_ip = |backend| hello().layer(RateLimitLayer::new(backend, PeerIp::new()));
    let a = instance(&server, "api", WhenDown::Error, per_ip).await;
    let b = instance(&server, "api", WhenDown::Error, per_ip).await;
    let (one, two) = (client_from("127.0.0.1"), client_from("127.0.0.2"));

    // 3 an hour, burst 3: one permit back every 1,200 s. The headers count
    // down across the instances because the state is on Redis.
    for (addr, remaining) in [(a, 2), (b, 1), (a, 0)] {
        let answer = get_from(&one, addr, "/", &[]).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.headers["ratelimit-policy"], "\"default\";q=3;w=3600");
        assert_eq!(
            answer.headers["ratelimit"],
            format!("\"default\";r={remaining};t=1200").as_str()
        );
    }
    let refused = get_from(&one, b, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers["retry-after"], "1200");
    // Another client has its own key on Redis.
    assert_eq!(get_from(&two, b, "/", &[]).await.status, StatusCode::OK);
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]).await;
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, ["{api:127.0.0.1}", "{api:127.0.0.2}"]);
}

#[tokio::test]
async fn delay_mode_on_redis_rejects_a_slot_past_max_delay_consuming_nothing() {
    let server = RedisServer::start();
    let delayed = |backend| {
        let layer = RateLimitLayer::builder(backend, Global)
            .mode(Mode::Delay {
                max_delay: Duration::from_secs(1),
            })
            .build()
            .unwrap();
        hello().layer(layer)
    };
    let addr = instance(&server, "api", WhenDown::Error, delayed).await;
    let client = client_from("127.0.0.1");
    for _ in 0..3 {
        assert_eq!(get_from(&client, addr, "/", &[]).await.status, 200);
    }
    // The next slot is 1,200 s away, past the 1 s allowance: 429 at once.
    let refused = get_from(&client, addr, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers["retry-after"], "1200");
    // Nothing was consumed: the key still holds 3 permits' worth of debt.
    let pttl: i64 = server.cmd(&["PTTL", "{api:global}"]).await;
    assert!(pttl > 3_599_000 && pttl <= 3_600_000, "pttl {pttl}");
}

/// Counter `name` for the layer named `limiter` in a snapshot.
fn counter(snapshot: &[(String, String, u64)], name: &str, limiter: &str) -> u64 {
    snapshot
        .iter()
        .filter(|(n, l, _)| n == name && l == limiter)
        .map(|(_, _, v)| v)
        .sum()
}

#[tokio::test]
async fn a_killed_redis_is_answered_by_the_declared_policy_and_counted() {
    let mut server = RedisServer::start();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // (layer name, limiter policy, layer fail_open, status once Redis is gone)
    let cases = [
        ("open", WhenDown::Error, true, StatusCode::OK),
        (
            "closed",
            WhenDown::Error,
            false,
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        (
            "deny",
            WhenDown::Closed,
            false,
            StatusCode::TOO_MANY_REQUESTS,
        ),
        (
            "local",
            WhenDown::Local { share: 1.0 },
            false,
            StatusCode::OK,
        ),
    ];
    let mut addrs = Vec::new();
    for (name, policy, fail_open, _) in cases {
        let layered = |backend| {
            let layer = metrics::with_local_recorder(&recorder, || {
                RateLimitLayer::builder(backend, Global)
                    .name(name)
                    .fail_open(fail_open)
                    .build()
                    .unwrap()
            });
            hello().layer(layer)
        };
        addrs.push(instance(&server, name, policy, layered).await);
    }
    let client = client_from("127.0.0.1");
    for &addr in &addrs {
        assert_eq!(get_from(&client, addr, "/", &[]).await.status, 200);
    }

    server.kill();
    for (&addr, (name, _, _, status)) in addrs.iter().zip(cases) {
        for _ in 0..2 {
            let answer = get_from(&client, addr, "/", &[]).await;
            assert_eq!(answer.status, status, "{name}");
        }
    }

    let snapshot: Vec<(String, String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let limiter = key.key().labels().find(|l| l.key() == "limiter")?;
            let limiter = limiter.value().to_owned();
            match value {
                DebugValue::Counter(n) => Some((key.key().name().to_owned(), limiter, n)),
                _ => None,
            }
        })
        .collect();
    // Under `Error` both answers after the kill reach the layer as errors
    // and are counted, whichever way `fail_open` sends them; the limiter's
    // own policies (Closed, Local) answer before the layer sees an error.
    assert_eq!(
        counter(&snapshot, "rate_limit_backend_errors_total", "open"),
        2
    );
    assert_eq!(
        counter(&snapshot, "rate_limit_backend_errors_total", "closed"),
        2
    );
    assert_eq!(
        counter(&snapshot, "rate_limit_backend_errors_total", "deny"),
        0
    );
    assert_eq!(counter(&snapshot, "rate_limit_rejected_total", "deny"), 2);
    // Requests let through by `fail_open` are counted as errors, not grants;
    // the local fallback's grants are grants.
    assert_eq!(counter(&snapshot, "rate_limit_allowed_total", "open"), 1);
    assert_eq!(counter(&snapshot, "rate_limit_allowed_total", "local"), 3);
}

#[tokio::test]
async fn a_cost_after_the_response_is_charged_on_redis() {
    let server = RedisServer::start();
    // The upstream reports 4 tokens for every request.
    let tokens = |backend| {
        let layer = RateLimitLayer::builder(backend, PeerIp::new())
            .cost_from_response_header(http::header::HeaderName::from_static("x-tokens-used"))
            .max_debt(Duration::from_secs(3_600))
            .build()
            .unwrap();
        axum::Router::new()
            .route(
                "/",
                axum::routing::get(|| async { ([("x-tokens-used", "4")], "hi") }),
            )
            .layer(layer)
    };
    let a = instance(&server, "tok", WhenDown::Error, tokens).await;
    let b = instance(&server, "tok", WhenDown::Error, tokens).await;
    let client = client_from("127.0.0.1");
    // 3 an hour, burst 3 (t = 1,200 s): 1 up front, 3 after the response,
    // 2 of them from the burst and 1 of debt, charged on Redis before the
    // response came back: the other instance sees it at once.
    assert_eq!(get_from(&client, a, "/", &[]).await.status, StatusCode::OK);
    let refused = get_from(&client, b, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers["retry-after"], "2400");
    // The key lives until its debt is paid: 4 permits, 4,800 s.
    let pttl: i64 = server.cmd(&["PTTL", "{tok:127.0.0.1}"]).await;
    assert!(pttl > 4_799_000 && pttl <= 4_800_000, "pttl {pttl}");
}
