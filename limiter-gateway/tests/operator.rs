//! Shadow mode, explain and the penalty box through the real gateway: a
//! real client, the echo upstream, the admin listener's JSON and
//! `/metrics`, the token-guarded release.

mod support;

use http::{Method, Request, StatusCode, header};
use limiter_gateway::echo::Echo;
use support::{Rig, TempDir, client, empty, sample, text};

const RULES: &str = "\
rate_limits:
  trial:
    algorithm: token_bucket
    rate: 1/h
    burst: 2
    key: header:x-user
    shadow: true
    match: { prefix: \"/trial\" }
  api:
    algorithm: token_bucket
    rate: 1/h
    burst: 1
    key: ip
    penalty: { after: 2, within: 1h, block: 1h }
    match: { prefix: \"/api\" }
";

const TOKEN: &str = "0123456789abcdef-operator";

async fn get(rig: &Rig, path: &str, user: &str) -> (StatusCode, Option<String>) {
    let response = client()
        .request(
            Request::get(rig.url(path))
                .header("x-user", user)
                .body(empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let retry = response
        .headers()
        .get(header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    (response.status(), retry)
}

async fn admin(rig: &Rig, method: Method, path: &str, auth: bool) -> (StatusCode, String) {
    let addr = rig.running.admin_addr().unwrap();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    if auth {
        request = request.header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    }
    let response = client()
        .request(request.body(empty()).unwrap())
        .await
        .unwrap();
    (response.status(), text(response).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_explain_and_the_penalty_box_on_the_real_gateway() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let token = dir.write("token", TOKEN);
    let rig = Rig::start(RULES, &echo.url(), |c| c.admin_token_file = Some(token)).await;
    let before = rig.admin("/metrics").await;
    let shadowed = |m: &str| sample(m, "rate_limit_shadow_rejected_total{limiter=\"trial\"}");

    // Explain first: consuming nothing, however often.
    for _ in 0..50 {
        let (status, json) = admin(
            &rig,
            Method::GET,
            "/explain?method=GET&path=/trial/x&header=x-user:42",
            false,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            json,
            "{\"rule\":\"trial\",\"limit\":\"token_bucket: rate 1/1h (one permit every 1h), burst 2\",\"key\":\"42\",\"shadow\":true,\"cost\":{\"request\":1,\"response_header\":null,\"max_debt_ms\":60000},\"decision\":\"admitted\",\"remaining\":1}"
        );
    }
    // Shadow: five requests over a burst of two all pass; three counted.
    for _ in 0..5 {
        assert_eq!(get(&rig, "/trial/x", "42").await, (StatusCode::OK, None));
    }
    let after = rig.admin("/metrics").await;
    assert_eq!(shadowed(&after) - shadowed(&before), 3.0);
    let (_, json) = admin(
        &rig,
        Method::GET,
        "/explain?path=/trial/x&header=x-user:42",
        false,
    )
    .await;
    assert!(
        json.contains("\"decision\":\"refused\",\"retry_after_ms\":3600000,\"remaining\":0"),
        "{json}"
    );

    // The penalty box: one admitted, two refusals, the second blocks.
    let ip = "127.0.0.1";
    assert_eq!(get(&rig, "/api/a", "u").await.0, StatusCode::OK);
    assert_eq!(
        get(&rig, "/api/a", "u").await,
        (StatusCode::TOO_MANY_REQUESTS, Some("3600".into()))
    );
    assert_eq!(
        get(&rig, "/api/a", "u").await,
        (StatusCode::TOO_MANY_REQUESTS, Some("3600".into()))
    );
    let (_, json) = admin(
        &rig,
        Method::GET,
        &format!("/explain?path=/api/a&ip={ip}"),
        false,
    )
    .await;
    assert!(
        json.contains("\"key\":\"127.0.0.1\",\"shadow\":false,\"cost\":{\"request\":1,\"response_header\":null,\"max_debt_ms\":60000},\"decision\":\"penalized\""),
        "{json}"
    );
    // The rest of the block in whole milliseconds, as a refusal's wait.
    let left: u64 = json
        .split("\"retry_after_ms\":")
        .nth(1)
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a whole number of ms: {json}"));
    assert!((3_500_000..=3_600_000).contains(&left), "{json}");
    assert_eq!(
        get(&rig, "/api/a", "u").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let metrics = rig.admin("/metrics").await;
    assert!(sample(&metrics, "rate_limit_penalized_total{limiter=\"api\"}") >= 1.0);

    // Released early by the admin API: the token is required.
    let release = format!("/rules/api/penalties/{ip}");
    assert_eq!(
        admin(&rig, Method::DELETE, &release, false).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        admin(&rig, Method::DELETE, &release, true).await,
        (StatusCode::OK, "{\"released\":true}".into())
    );
    assert_eq!(
        admin(&rig, Method::DELETE, &release, true).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        admin(&rig, Method::DELETE, "/rules/trial/penalties/42", true)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (_, json) = admin(
        &rig,
        Method::GET,
        &format!("/explain?path=/api/a&ip={ip}"),
        false,
    )
    .await;
    assert!(
        json.contains("\"decision\":\"refused\""),
        "no longer boxed, still limited: {json}"
    );
    assert_eq!(
        admin(&rig, Method::GET, "/explain?path=nope", false)
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    rig.running.shutdown().await;
}
