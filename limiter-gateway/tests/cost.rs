//! A cost after the response through the real gateway: a real client, the
//! echo upstream answering `x-tokens-used`, the rule's layer charging it to
//! the key as capped debt when the upstream's response head passes, and
//! the admin listener's `/metrics` and `/explain`. Rates are per hour, so
//! the whole seconds of `Retry-After` do not move with the machine's speed.

mod support;

use http::{Request, StatusCode, header};
use limiter_gateway::echo::Echo;
use support::{Rig, client, empty, sample};

/// 60 an hour (t = 1 min), burst 10 (tau = 9 min), per `x-user`.
const RULES: &str = "\
rate_limits:
  tokens:
    algorithm: token_bucket
    rate: 60/h
    burst: 10
    key: header:x-user
    cost: { request: 1, response_header: x-tokens-used, max_debt: 1h }
    match: { prefix: \"/tokens\" }
";

async fn get(rig: &Rig, path: &str, user: &str) -> (StatusCode, Option<String>, Option<String>) {
    let response = client()
        .request(
            Request::get(rig.url(path))
                .header("x-user", user)
                .body(empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let value = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    (
        response.status(),
        value(header::RETRY_AFTER.as_str()),
        value("x-tokens-used"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstreams_reported_cost_is_charged_as_debt_through_the_gateway() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    let counter = |m: &str, name: &str| sample(m, &format!("{name}{{limiter=\"tokens\"}}"));
    let before = rig.admin("/metrics").await;

    // 25 in all: 24 more, 9 from the burst and 15 of debt: tat = 25 min,
    // the next permit tat − tau = 16 min away. The header reaches the
    // client unchanged.
    let (status, _, used) = get(&rig, "/tokens/25", "ann").await;
    assert_eq!((status, used.as_deref()), (StatusCode::OK, Some("25")));
    let (status, retry, _) = get(&rig, "/tokens/1", "ann").await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("960"))
    );
    assert_eq!(get(&rig, "/tokens/1", "bob").await.0, StatusCode::OK);

    // Malformed: charges nothing, counted; all 10 of cy's permits remain.
    assert_eq!(get(&rig, "/tokens/25tokens", "cy").await.0, StatusCode::OK);
    for _ in 0..9 {
        assert_eq!(get(&rig, "/tokens/1", "cy").await.0, StatusCode::OK);
    }
    assert_eq!(
        get(&rig, "/tokens/1", "cy").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );

    // Huge: held at the cap, the next permit an hour away; the rest counted.
    assert_eq!(
        get(&rig, "/tokens/999999999999", "dee").await.0,
        StatusCode::OK
    );
    let (status, retry, _) = get(&rig, "/tokens/1", "dee").await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::TOO_MANY_REQUESTS, Some("3600"))
    );

    let after = rig.admin("/metrics").await;
    let delta = |name: &str| counter(&after, name) - counter(&before, name);
    assert_eq!(delta("rate_limit_cost_invalid_total"), 1.0);
    // ann 24; dee up to now + tau + 1 h = 69 min, 1 paid up front: 68.
    assert_eq!(delta("rate_limit_cost_charged_total"), 24.0 + 68.0);
    assert_eq!(
        delta("rate_limit_cost_dropped_total"),
        (999_999_999_998u64 - 68) as f64
    );

    // Explain shows the configured cost.
    let explained = rig
        .admin("/explain?method=GET&path=/tokens/1&header=x-user:bob")
        .await;
    assert!(
        explained.contains(
            "\"cost\":{\"request\":1,\"response_header\":\"x-tokens-used\",\"max_debt_ms\":3600000}"
        ),
        "{explained}"
    );
}
