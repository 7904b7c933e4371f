//! limiter-rls on a real redis-server behind a real Envoy: both algorithms
//! decide on Redis (the fixed window under envoyproxy/ratelimit's key
//! names), and with Redis killed each failure policy gives Envoy the
//! answer it promises: `open` admits, `closed` refuses with 429, `local`
//! keeps the limit in process, `error` fails the call (Envoy's
//! `failure_mode_deny: false` then admits).

use crate::support;

use limiter_test_support::redis as redis_support;

use redis_support::RedisServer;
use std::time::Duration;

use support::{Envoy, Rls, clear_of_a_window_end, envoy_in_front, free_port, temp_dir, upstream};

/// The unit of the fixed windows below, and the time a window must have
/// left for a few requests to fall in it on a loaded machine.
const MINUTE: Duration = Duration::from_secs(60);
const MARGIN: Duration = Duration::from_secs(5);

const CONFIG: &str = "domain: test
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tight
    rate_limit: {unit: minute, requests_per_unit: 0}
";

fn statuses(envoy: &Envoy, user: &str, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| envoy.get(&[("x-user", user)]).status)
        .collect()
}

#[test]
fn failure_policies_behind_envoy() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let root = temp_dir("redis-root");
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/a.yaml"), CONFIG).unwrap();
    let mut redis = RedisServer::start();
    let grpc = free_port();
    let envoy = envoy_in_front(upstream(), Some(grpc), false);
    for (policy, algorithm, while_down) in [
        ("open", "gcra", vec![200, 200, 200, 200]),
        ("closed", "gcra", vec![429, 429]),
        ("local", "gcra", vec![200, 200, 200, 429]),
        ("error", "gcra", vec![200, 200, 200, 200]),
        ("open", "fixed_window", vec![200, 200, 200, 200]),
        ("closed", "fixed_window", vec![429, 429]),
        ("local", "fixed_window", vec![200, 200, 200, 429]),
        ("error", "fixed_window", vec![200, 200, 200, 200]),
    ] {
        let url = redis.url();
        let rls = Rls::start(
            &root,
            grpc,
            &[
                ("BACKEND_TYPE", "redis"),
                ("REDIS_URL", &url),
                ("RLS_REDIS_FAILURE_POLICY", policy),
                ("RLS_ALGORITHM", algorithm),
                // Generous, so a loaded machine's slow Redis call is not
                // taken for a failure; below Envoy's 2 s, so with Redis
                // down the policy answers, not Envoy's own timeout.
                ("REDIS_TIMEOUT", "1s"),
            ],
        );
        let user = format!("{policy}-{algorithm}");
        // Envoy reaches the new process (a blocked descriptor answers 429
        // only from limiter-rls; a failed call is admitted).
        support::eventually(
            Duration::from_secs(10),
            "envoy reaches the new limiter-rls",
            || envoy.get(&[("x-tight", "probe")]).status == 429,
        );
        // Redis up: the limit, decided on Redis (in one window).
        clear_of_a_window_end(MINUTE, MARGIN);
        assert_eq!(
            statuses(&envoy, &user, 4),
            [200, 200, 200, 429],
            "{policy} {algorithm}"
        );
        if algorithm == "fixed_window" {
            let keys: Vec<String> =
                runtime.block_on(redis.cmd(&["KEYS", &format!("test_user_{user}_*")]));
            assert_eq!(keys.len(), 1, "{keys:?}");
            let window: u64 = keys[0].rsplit('_').next().unwrap().parse().unwrap();
            assert_eq!(
                window % 60,
                0,
                "a minute window starts on a minute: {}",
                keys[0]
            );
            let count: String = runtime.block_on(redis.cmd(&["GET", &keys[0]]));
            assert_eq!(count, "3", "refused requests are not counted");
        }
        redis.kill();
        let down = format!("{user}-down");
        clear_of_a_window_end(MINUTE, MARGIN);
        assert_eq!(
            statuses(&envoy, &down, while_down.len()),
            while_down,
            "{policy} {algorithm} with Redis down"
        );
        drop(rls);
        redis.restart();
    }
    let _ = std::fs::remove_dir_all(&root);
}
