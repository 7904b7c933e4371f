//! limiter-rls on the Redis deployments envoyproxy/ratelimit's variables
//! describe, all real and started here: `REDIS_TYPE=sentinel` with the
//! master's name and the sentinels in `REDIS_URL`, an ACL user in
//! `REDIS_AUTH` and the sentinels' password in `REDIS_SENTINEL_AUTH`; and
//! `REDIS_TLS` with a CA, a client certificate and key, and the host name
//! check skipped. Each decides (three grants, then over the limit, which
//! only Redis can say under `RLS_REDIS_FAILURE_POLICY=error`); a wrong CA
//! makes every request fail.

use crate::support;

use limiter_test_support::redis as redis_support;
use limiter_test_support::tls as tls_support;

use std::cell::Cell;
use std::path::Path;

use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use redis_support::RedisServer;
use redis_support::sentinel::{MASTER, RedisSentinels};
use support::{Rls, temp_dir};
use tls_support::TestPki;

const CONFIG: &str = "domain: test
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
";

/// An ACL user on the data servers (their `default` user stays open, for
/// the sentinels and the replication).
fn acl_user() -> Vec<String> {
    ["--user", "limiter", "on", ">limiter-pw", "~*", "+@all"]
        .map(String::from)
        .to_vec()
}

fn req(user: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "test".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: user.into(),
            }],
            limit: None,
            hits_addend: None,
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// An RLS with `env` (and the limits above), Redis failures returned.
fn rls(root: &Path, env: &[(&str, &str)]) -> Rls {
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/a.yaml"), CONFIG).unwrap();
    let mut all = vec![
        ("BACKEND_TYPE", "redis"),
        ("RLS_REDIS_FAILURE_POLICY", "error"),
        ("REDIS_TIMEOUT", "5s"),
    ];
    all.extend_from_slice(env);
    Rls::start(root, 0, &all)
}

/// Three grants then over the limit, for `user`.
async fn decides(rls: &Rls, user: &str) {
    let mut c = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();
    for expected in [Code::Ok, Code::Ok, Code::Ok, Code::OverLimit] {
        let r = c.should_rate_limit(req(user)).await.unwrap();
        assert_eq!(r.overall_code, expected as i32, "{user}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_with_an_acl_user_and_a_sentinel_password() {
    let deployment =
        tokio::task::spawn_blocking(|| RedisSentinels::start(&acl_user(), Some("sentinel-pw")))
            .await
            .unwrap();
    let url = format!("{MASTER},{}", deployment.sentinel_list());
    let root = temp_dir("sentinel");
    let rls = rls(
        &root,
        &[
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_URL", &url),
            ("REDIS_AUTH", "limiter:limiter-pw"),
            ("REDIS_SENTINEL_AUTH", "sentinel-pw"),
        ],
    );
    decides(&rls, "u1").await;
    // The counts are on the master, written as the ACL user.
    let keys = deployment.server_cmd(deployment.master.port(), "DBSIZE");
    assert!(!keys.starts_with(":0"), "{keys:?}");

    // The sentinels' password is required: without it, no master is found.
    let root2 = temp_dir("sentinel-noauth");
    let refused = rls_fails(
        &root2,
        &[
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_URL", &url),
            ("REDIS_AUTH", "limiter:limiter-pw"),
        ],
    )
    .await;
    assert!(
        refused,
        "a request succeeded without the sentinels' password"
    );
    drop(deployment);
    let _ = std::fs::remove_dir_all(root);
    let _ = std::fs::remove_dir_all(root2);
}

/// Whether every request of an RLS with `env` fails (Redis unreachable as
/// configured, failures returned).
async fn rls_fails(root: &Path, env: &[(&str, &str)]) -> bool {
    let rls = rls(root, env);
    let mut c = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();
    c.should_rate_limit(req("u9")).await.is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate_and_an_acl_user() {
    let pki = TestPki::new("rls");
    let tls_port = Cell::new(0);
    let _server = RedisServer::start_with(|| {
        tls_port.set(redis_support::free_port());
        let mut args = pki.server_args(tls_port.get());
        args.extend(acl_user());
        args
    });
    let path = |p: &Path| p.display().to_string();
    let (ca, cert, key) = (path(&pki.ca), path(&pki.client_cert), path(&pki.client_key));
    let other_ca = path(&pki.other_ca());
    let by_name = format!("localhost:{}", tls_port.get());
    let by_address = format!("127.0.0.1:{}", tls_port.get());
    let root = temp_dir("tls");
    let rls1 = rls(
        &root,
        &[
            ("REDIS_URL", &by_name),
            ("REDIS_AUTH", "limiter:limiter-pw"),
            ("REDIS_TLS", "true"),
            ("REDIS_TLS_CACERT", &ca),
            ("REDIS_TLS_CLIENT_CERT", &cert),
            ("REDIS_TLS_CLIENT_KEY", &key),
        ],
    );
    decides(&rls1, "u1").await;
    drop(rls1);

    // By address, which the certificate does not name: only with the host
    // name check skipped.
    let root2 = temp_dir("tls-address");
    let by_address_env = |skip: &'static str| {
        vec![
            ("REDIS_URL", by_address.clone()),
            ("REDIS_AUTH", "limiter:limiter-pw".to_owned()),
            ("REDIS_TLS", "true".to_owned()),
            ("REDIS_TLS_CACERT", ca.clone()),
            ("REDIS_TLS_CLIENT_CERT", cert.clone()),
            ("REDIS_TLS_CLIENT_KEY", key.clone()),
            ("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", skip.to_owned()),
        ]
    };
    let env = by_address_env("false");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert!(
        rls_fails(&root2, &env).await,
        "a certificate for another name was accepted"
    );
    let env = by_address_env("true");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let rls2 = rls(&root2, &env);
    decides(&rls2, "u2").await;
    drop(rls2);

    // Another CA: every request fails.
    let root3 = temp_dir("tls-wrong-ca");
    let refused = rls_fails(
        &root3,
        &[
            ("REDIS_URL", &by_name),
            ("REDIS_AUTH", "limiter:limiter-pw"),
            ("REDIS_TLS", "true"),
            ("REDIS_TLS_CACERT", &other_ca),
            ("REDIS_TLS_CLIENT_CERT", &cert),
            ("REDIS_TLS_CLIENT_KEY", &key),
        ],
    )
    .await;
    assert!(refused, "a server signed by another CA was accepted");
    for r in [root, root2, root3] {
        let _ = std::fs::remove_dir_all(r);
    }
}
