//! The admin API's per-key quotas on the real gateway:
//! `PUT /rules/{rule}/keys/{key}` with a JSON quota (401 without the token,
//! 403 with another), `GET` to read one, `DELETE` to go back to the file's
//! or the rule's quota; the new quota decides the proxied requests at once
//! and survives a reload of the rules file.

use crate::support;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use limiter_gateway::echo::Echo;
use support::{ChannelBody, ClientBody, Rig, TempDir, client, empty, text};

/// One per hour with a burst: no permit comes back during the test, so
/// every count below is exact.
const RULES: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 1/h
    burst: 1
    key: header:x-tenant
    match: { prefix: \"/api\" }
    overrides:
      gold: { rate: 1/h, burst: 3 }
";

const TOKEN: &str = "Zq3kP0v9-Lm2x7Rt4Ws8";

fn body(json: &str) -> ClientBody {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.try_send(Bytes::from(json.to_owned())).unwrap();
    http_body_util::Either::Right(ChannelBody(rx))
}

async fn admin(
    rig: &Rig,
    method: Method,
    path: &str,
    auth: Option<&str>,
    json: Option<&str>,
) -> (StatusCode, String) {
    let addr = rig.running.admin_addr().unwrap();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    let b = json.map_or_else(empty, body);
    let response = client().request(request.body(b).unwrap()).await.unwrap();
    (response.status(), text(response).await)
}

/// How many of `n` proxied requests of `tenant` are admitted.
async fn admitted(rig: &Rig, tenant: &str, n: u32) -> u32 {
    let mut ok = 0;
    for _ in 0..n {
        let request = Request::get(rig.url("/api/x"))
            .header("x-tenant", tenant)
            .body(empty())
            .unwrap();
        let response = client().request(request).await.unwrap();
        match response.status() {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("unexpected {other}"),
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_quota_set_live_decides_at_once_and_survives_a_reload() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let token = dir.write("admin-token", &format!("{TOKEN}\n"));
    let rig = Rig::start(RULES, &echo.url(), |c| c.admin_token_file = Some(token)).await;
    let right = format!("Bearer {TOKEN}");
    let quota = r#"{"rate": "1/h", "burst": 5}"#;
    let path = "/rules/api/keys/acme";

    // Reading is open; the file's override shows as such.
    let (status, json) = admin(&rig, Method::GET, "/rules/api/keys/gold", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        json.contains("\"burst\":3,") && json.contains("\"source\":\"file\""),
        "{json}"
    );

    // No token, another token: refused, nothing changes.
    let (status, _) = admin(&rig, Method::PUT, path, None, Some(quota)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let wrong = format!("Bearer {}", TOKEN.replace('8', "9"));
    let (status, _) = admin(&rig, Method::PUT, path, Some(&wrong), Some(quota)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = admin(&rig, Method::DELETE, path, Some(&wrong), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, json) = admin(&rig, Method::GET, path, None, None).await;
    assert!(json.contains("\"source\":\"rule\""), "{json}");

    // One request of acme's burst of 1 is used before the change.
    assert_eq!(admitted(&rig, "acme", 1).await, 1);
    let (status, json) = admin(&rig, Method::PUT, path, Some(&right), Some(quota)).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert!(
        json.contains("\"source\":\"admin\"") && json.contains("\"available\":4"),
        "{json}"
    );
    // Still one permit owed: 4 more of the burst of 5, then refused.
    assert_eq!(admitted(&rig, "acme", 6).await, 4);
    assert_eq!(admitted(&rig, "other", 2).await, 1); // the rule's quota
    assert_eq!(admitted(&rig, "gold", 4).await, 3); // the file's

    // A bad body: every problem, positioned in the body.
    let (status, json) = admin(
        &rig,
        Method::PUT,
        path,
        Some(&right),
        Some(r#"{"rate": 0, "brust": 2}"#),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        json.contains("body:1:10: field `rate`") && json.contains("body:1:13: field `brust`"),
        "{json}"
    );

    // A reload of the file keeps the admin API's quota.
    std::fs::write(&rig.file, RULES.replace("burst: 3", "burst: 2")).unwrap();
    rig.rules.reload().unwrap();
    let (_, json) = admin(&rig, Method::GET, path, None, None).await;
    assert!(
        json.contains("\"source\":\"admin\"") && json.contains("\"burst\":5,"),
        "{json}"
    );
    let (_, json) = admin(&rig, Method::GET, "/rules/api/keys/gold", None, None).await;
    assert!(json.contains("\"burst\":2,"), "{json}");

    // DELETE: back to the rule's quota, still owing its permits.
    let (status, json) = admin(&rig, Method::DELETE, path, Some(&right), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        json.contains("\"source\":\"rule\"") && json.contains("\"available\":0"),
        "{json}"
    );
    let (status, _) = admin(&rig, Method::DELETE, path, Some(&right), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = admin(&rig, Method::GET, "/rules/nope/keys/acme", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = admin(&rig, Method::POST, path, Some(&right), None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

/// A keyed rule with a penalty box: the first refusal boxes the key.
const BOXED: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 1/h
    burst: 1
    key: header:x-tenant
    penalty: { after: 1, within: 1h, block: 1h }
    match: { prefix: \"/api\" }
";

/// The value of the string field `field` of a flat JSON object.
fn field<'a>(json: &'a str, field: &str) -> &'a str {
    let start = json
        .find(&format!("\"{field}\":\""))
        .unwrap_or_else(|| panic!("no `{field}` in {json}"))
        + field.len()
        + 4;
    let len = json[start..].find('"').unwrap();
    &json[start..start + len]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_explain_shows_addresses_its_quota_and_its_penalty() {
    let echo = Echo::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = TempDir::new();
    let token = dir.write("admin-token", &format!("{TOKEN}\n"));
    let rig = Rig::start(BOXED, &echo.url(), |c| c.admin_token_file = Some(token)).await;
    let right = format!("Bearer {TOKEN}");
    // A value the key encoding escapes: a space and a `:`.
    let tenant = "acme corp:eu";
    assert_eq!(admitted(&rig, tenant, 2).await, 1); // the refusal boxes it

    // The operator reads the key from explain...
    let (status, json) = admin(
        &rig,
        Method::GET,
        "/explain?path=/api/x&header=x-tenant:acme%20corp%3Aeu",
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(json.contains("\"decision\":\"penalized\""), "{json}");
    let key = field(&json, "key");
    assert_eq!(key, "acme%20corp%3Aeu");
    // ...and writes it as a path segment (`%` as `%25`) in both calls.
    let segment = key.replace('%', "%25");

    let quota = r#"{"rate": "1/h", "burst": 5}"#;
    let keys = format!("/rules/api/keys/{segment}");
    let (status, json) = admin(&rig, Method::PUT, &keys, Some(&right), Some(quota)).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(
        field(&json, "key"),
        key,
        "the answer names the key as explain does"
    );
    assert!(
        json.contains("\"source\":\"admin\"") && json.contains("\"available\":4"),
        "{json}"
    );
    let (status, json) = admin(&rig, Method::GET, &keys, None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(json.contains("\"burst\":5,"), "{json}");

    // The raw value is not the key's text: refused, not another key.
    let (status, json) = admin(
        &rig,
        Method::GET,
        "/rules/api/keys/acme%20corp:eu",
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert!(
        json.contains("acme%20corp%3Aeu"),
        "the detail shows the text: {json}"
    );

    let penalties = format!("/rules/api/penalties/{segment}");
    let (status, json) = admin(&rig, Method::DELETE, &penalties, Some(&right), None).await;
    assert_eq!(
        (status, json.as_str()),
        (StatusCode::OK, "{\"released\":true}")
    );
    // Out of the box, under its own quota: the one permit it took stays
    // owed, so 4 of the burst of 5.
    assert_eq!(admitted(&rig, tenant, 6).await, 4);
}
