//! The admin API's authentication on the real gateway: a token file read
//! at start, every mutating call refused without it (`401` with the
//! challenge) or with another token (`403`), reads open; and the refusal
//! to start an admin listener off loopback without a token.

mod support;

use http::{Method, Request, StatusCode, header};
use limiter_gateway::{CHALLENGE, Gateway, GatewayConfig};
use support::{Rig, TempDir, client, empty, text};

const RULES: &str = "\
rate_limits:
  api:
    algorithm: token_bucket
    rate: 5
    burst: 5
    key: ip
    match: { prefix: \"/api\" }
";

const TOKEN: &str = "Zq3kP0v9-Lm2x7Rt4Ws8";

async fn call(
    rig: &Rig,
    method: Method,
    path: &str,
    auth: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    let admin = rig.running.admin_addr().unwrap();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{admin}{path}"));
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    let response = client()
        .request(request.body(empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    (status, challenge, text(response).await)
}

#[tokio::test]
async fn mutating_admin_calls_need_the_token_from_the_file() {
    let dir = TempDir::new();
    let token = dir.write("admin-token", &format!("{TOKEN}\n"));
    let rig = Rig::start(RULES, "http://127.0.0.1:9", |c| {
        c.admin_token_file = Some(token);
    })
    .await;
    let path = "/rules/api/penalties/10.0.0.7";

    let (status, challenge, body) = call(&rig, Method::DELETE, path, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(challenge.as_deref(), Some(CHALLENGE));
    assert!(body.contains("\"status\":401"), "{body}");

    let wrong = format!("Bearer {}", TOKEN.replace("8", "9"));
    let (status, challenge, body) = call(&rig, Method::DELETE, path, Some(&wrong)).await;
    assert_eq!((status, challenge), (StatusCode::FORBIDDEN, None));
    assert!(!body.contains("Zq3k"), "the token is never echoed: {body}");

    // Any mutating method on any path is checked before the path is read.
    let (status, _, _) = call(&rig, Method::POST, "/no/such/thing", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let right = format!("Bearer {TOKEN}");
    let (status, _, _) = call(&rig, Method::POST, "/no/such/thing", Some(&right)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(&rig, Method::PUT, "/metrics", Some(&right)).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    // Reading needs no token.
    let (status, _, body) = call(&rig, Method::GET, "/rules", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("\"name\":\"api\""), "{body}");
    rig.running.shutdown().await;
}

#[tokio::test]
async fn without_a_token_file_nothing_can_be_changed() {
    let rig = Rig::start(RULES, "http://127.0.0.1:9", |_| {}).await;
    let (status, challenge, _) = call(
        &rig,
        Method::DELETE,
        "/rules/api/penalties/10.0.0.7",
        Some(&format!("Bearer {TOKEN}")),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(challenge.as_deref(), Some(CHALLENGE));
    rig.running.shutdown().await;
}

#[tokio::test]
async fn an_admin_listener_off_loopback_needs_a_token_file() {
    let dir = TempDir::new();
    let rules = limiter_config::RuleSet::load(dir.write("rules.yaml", RULES)).unwrap();
    let mut config = GatewayConfig::single(
        "127.0.0.1:0".parse().unwrap(),
        "http://127.0.0.1:9".parse().unwrap(),
    );
    config.admin = Some("0.0.0.0:0".parse().unwrap());
    config.timeouts.drain = std::time::Duration::ZERO;
    let refused = config.validate().unwrap_err().to_string();
    assert!(
        refused.starts_with("`admin`: the admin listener 0.0.0.0:0 is not a loopback address"),
        "{refused}"
    );
    let error = Gateway::new(config.clone(), rules.clone())
        .start()
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("not a loopback address"),
        "{error}"
    );

    // A token file that is too weak stops the start too.
    config.admin_token_file = Some(dir.write("weak", "short\n"));
    let error = Gateway::new(config.clone(), rules.clone())
        .start()
        .await
        .unwrap_err();
    assert!(error.to_string().contains("has 5 characters"), "{error}");

    config.admin_token_file = Some(dir.write("token", TOKEN));
    config.validate().unwrap();
    let running = Gateway::new(config, rules).start().await.unwrap();
    assert!(running.admin_addr().unwrap().ip().is_unspecified());
    running.shutdown().await;
}
