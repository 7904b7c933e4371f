//! `backend: redis` rules on the deployments a rules file can name, all
//! real and started here: a TLS `redis-server` requiring client
//! certificates from a CA this test makes (`rediss://` with the `tls`
//! table's files) as an ACL user named in the URL, and a Sentinel master
//! (`redis+sentinel://`). Each rule decides on Redis (its burst, then a
//! denial by the script); a `tls` table on a plain URL is refused when the
//! file is checked.

use crate::support;

use limiter_test_support::redis as redis_support;
use limiter_test_support::tls as tls_support;

use std::cell::Cell;

use limiter_config::{RuleError, RuleSet};
use limiter_redis::{RedisLimitError, Source};
use redis_support::RedisServer;
use redis_support::sentinel::{MASTER, RedisSentinels};
use support::TempDir;
use tls_support::TestPki;

/// A global rule of burst 2 on `redis` (the inside of the `redis` table).
fn rules(redis: &str) -> String {
    format!(
        r#"rate_limits:
  remote:
    algorithm: token_bucket
    rate: "1/h"
    burst: 2
    backend: redis
    redis: {{ {redis}, failure_policy: error, timeout: "5s" }}
"#
    )
}

/// Two grants, then the script's denial.
async fn decides(set: &RuleSet) {
    let rule = set.get("remote").unwrap();
    rule.try_acquire().await.unwrap();
    rule.try_acquire().await.unwrap();
    assert!(matches!(
        rule.try_acquire().await,
        Err(RuleError::Redis(RedisLimitError::RateLimited {
            source: Source::Redis,
            ..
        }))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_files_as_an_acl_user() {
    let pki = TestPki::new("config");
    let tls_port = Cell::new(0);
    let _server = RedisServer::start_with(|| {
        tls_port.set(redis_support::free_port());
        let mut args = pki.server_args(tls_port.get());
        args.extend(["--user", "app", "on", ">app-pw", "~*", "+@all"].map(String::from));
        args
    });
    let dir = TempDir::new();
    let redis = format!(
        r#"url: "rediss://app:app-pw@localhost:{}/", tls: {{ ca_file: "{}", cert_file: "{}", key_file: "{}" }}"#,
        tls_port.get(),
        pki.ca.display(),
        pki.client_cert.display(),
        pki.client_key.display()
    );
    let path = dir.write("rules.yaml", &rules(&redis));
    decides(&RuleSet::load(&path).unwrap()).await;

    // The same table on a plain URL: refused when checked.
    let plain = redis.replace("rediss://", "redis://");
    let path = dir.write("plain.yaml", &rules(&plain));
    let e = RuleSet::load(&path).unwrap_err().to_string();
    assert!(e.contains("redis.tls"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_master() {
    let deployment = tokio::task::spawn_blocking(|| RedisSentinels::start(&[], None))
        .await
        .unwrap();
    let dir = TempDir::new();
    let redis = format!(
        r#"url: "redis+sentinel://{}/{MASTER}""#,
        deployment.sentinel_list()
    );
    let path = dir.write("rules.yaml", &rules(&redis));
    decides(&RuleSet::load(&path).unwrap()).await;
    let keys = deployment.server_cmd(deployment.master.port(), "DBSIZE");
    assert!(!keys.starts_with(":0"), "{keys:?}");
}
