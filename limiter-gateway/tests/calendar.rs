//! A calendar quota through the real gateway (its server on loopback, the
//! echo upstream, a real client) on the system's wall clock: the third
//! request of a 2-per-day quota is answered 429 with the real time until
//! UTC midnight in `Retry-After` and `RateLimit`, and the admin `/explain`
//! shows the key's quota.

use crate::support;

use std::time::{SystemTime, UNIX_EPOCH};

use http::{Request, StatusCode, header};
use limiter_gateway::echo::Echo;
use support::{Rig, client, empty};

const RULES: &str = "\
rate_limits:
  daily:
    algorithm: token_bucket
    rate: 100/s
    burst: 100
    key: header:x-tenant
    quota: { limit: 2, per: day, timezone: UTC }
    match: { prefix: \"/api\" }
";

/// Seconds from the Unix instant `now_ns` to the next UTC midnight,
/// rounded up (the test's own arithmetic: UTC days are 86 400 s).
fn to_midnight(now_ns: u128) -> u64 {
    let day_ns = 86_400 * 1_000_000_000u128;
    let next = (now_ns / day_ns + 1) * day_ns;
    u64::try_from((next - now_ns).div_ceil(1_000_000_000)).unwrap()
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_calendar_quota_answers_429_with_the_real_reset() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let rig = Rig::start(RULES, &echo.url(), |_| {}).await;
    let get = || async {
        let before = now_ns();
        let response = client()
            .request(
                Request::get(rig.url("/api/x"))
                    .header("x-tenant", "acme")
                    .body(empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let after = now_ns();
        let h = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        // The reset as the gateway saw it lies between these two.
        let reset = to_midnight(after)..=to_midnight(before);
        (
            response.status(),
            h("ratelimit-policy"),
            h("ratelimit"),
            h(header::RETRY_AFTER.as_str()),
            reset,
        )
    };
    let t = |limit: Option<String>, r: u32| -> u64 {
        let limit = limit.unwrap();
        let prefix = format!("\"daily\";r={r};t=");
        limit.strip_prefix(&prefix).expect(&limit).parse().unwrap()
    };
    let (status, policy, limit, _, reset) = get().await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(policy.as_deref(), Some("\"daily\";q=2;w=86400"));
    assert!(reset.contains(&t(limit, 1)));
    assert_eq!(get().await.0, StatusCode::OK);

    let (status, policy, limit, retry, reset) = get().await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(policy.as_deref(), Some("\"daily\";q=2;w=86400"));
    let retry: u64 = retry.unwrap().parse().unwrap();
    assert!(reset.contains(&retry), "{retry} not in {reset:?}");
    assert_eq!(t(limit, 0), retry);
    // Another tenant has its own count.
    let other = client()
        .request(
            Request::get(rig.url("/api/x"))
                .header("x-tenant", "globex")
                .body(empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::OK);

    // The admin listener explains it: refused until the reset, 0 of 2 left.
    let json = rig
        .admin("/explain?method=GET&path=/api/x&header=x-tenant:acme")
        .await;
    assert!(
        json.contains("\"decision\":\"refused\"")
            && json.contains("\"quota\":{\"limit\":2,\"remaining\":0,\"reset_s\":"),
        "{json}"
    );
    assert!(
        json.contains("\"limit\":\"token_bucket: rate 100/s (one permit every 10ms), burst 100; quota 2 per day (UTC)\""),
        "{json}"
    );
}
