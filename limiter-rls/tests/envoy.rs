//! limiter-rls behind a real Envoy (its HTTP `ratelimit` filter, descriptors
//! from request headers and the remote address) in front of an upstream:
//! Envoy's 429 at exactly the configured count with `x-envoy-ratelimited`,
//! all or nothing across descriptors, shadow mode, `replaces`, `unlimited`,
//! wildcards, and reloads (in place and by ConfigMap symlink swap) under
//! traffic keeping state. One Envoy serves every scenario; each scenario
//! uses its own descriptor values, so their counters never meet.

use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use support::{Envoy, Rls, envoy_in_front, eventually, metric, temp_dir, upstream};

const CONFIG: &str = "domain: test
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: user
    value: vip
    rate_limit: {unlimited: true}
  - key: user
    value: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: tight
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: /wild/*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: plan
    value: free
    rate_limit: {unit: minute, requests_per_unit: 2, name: free}
  - key: plan
    value: special
    rate_limit:
      unit: minute
      requests_per_unit: 5
      replaces: [{name: free}]
  - key: from
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 2}
";

/// A ConfigMap-shaped directory: `config/a.yaml -> ..data/a.yaml`,
/// `..data -> ..v1`.
fn configmap(root: &Path, version: &str, text: &str) {
    let config = root.join("config");
    std::fs::create_dir_all(&config).unwrap();
    let data = config.join(format!("..{version}"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("a.yaml"), text).unwrap();
    let tmp = config.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
    // rename(2) over the old link: the atomic swap kubelet does.
    std::fs::rename(&tmp, config.join("..data")).unwrap();
    let link = config.join("a.yaml");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink("..data/a.yaml", &link).unwrap();
    }
}

fn statuses(envoy: &Envoy, headers: &[(&str, &str)], n: usize) -> Vec<u16> {
    (0..n).map(|_| envoy.get(headers).status).collect()
}

#[test]
fn behind_envoy() {
    let root = temp_dir("envoy-root");
    configmap(&root, "v1", CONFIG);
    let rls = Rls::start(&root, 0, &[]);
    let up = upstream();
    let envoy = envoy_in_front(up, Some(rls.grpc.port()), false);

    // The configured count exactly, then Envoy's 429 with its header.
    assert_eq!(statuses(&envoy, &[("x-user", "bob")], 3), [200, 200, 200]);
    let refused = envoy.get(&[("x-user", "bob")]);
    assert_eq!(refused.status, 429);
    assert_eq!(
        refused
            .headers
            .get("x-envoy-ratelimited")
            .map(String::as_str),
        Some("true")
    );

    // Two descriptors, one refusing: neither is charged.
    assert_eq!(
        envoy.get(&[("x-user", "carol"), ("x-tight", "t1")]).status,
        200
    );
    assert_eq!(
        envoy.get(&[("x-user", "carol"), ("x-tight", "t1")]).status,
        429
    );
    assert_eq!(
        envoy.get(&[("x-user", "carol"), ("x-tight", "t1")]).status,
        429
    );
    // carol paid for one request: two are left, not zero.
    assert_eq!(statuses(&envoy, &[("x-user", "carol")], 3), [200, 200, 429]);

    // Shadow mode: over the limit, answered OK, counted.
    assert_eq!(
        statuses(&envoy, &[("x-user", "shadow")], 3),
        [200, 200, 200]
    );
    let shadow = metric(
        rls.debug,
        "ratelimit_rate_limit_shadow_mode_total",
        r#"domain="test",rule="test.user_shadow""#,
    );
    assert_eq!(shadow, Some(2.0));

    // Unlimited.
    assert!(
        statuses(&envoy, &[("x-user", "vip")], 10)
            .iter()
            .all(|&s| s == 200)
    );

    // Wildcards: each matching value has the wildcard's limit.
    assert_eq!(
        statuses(&envoy, &[("x-path", "/wild/a")], 3),
        [200, 200, 429]
    );
    assert_eq!(
        statuses(&envoy, &[("x-path", "/wild/b")], 3),
        [200, 200, 429]
    );
    assert!(
        statuses(&envoy, &[("x-path", "/tame")], 4)
            .iter()
            .all(|&s| s == 200)
    );

    // `replaces`: with `special` present, `free` (2/min) does not apply.
    let both = [("x-plan-a", "free"), ("x-plan-b", "special")];
    assert_eq!(statuses(&envoy, &both, 6), [200, 200, 200, 200, 200, 429]);

    // Nested descriptor with Envoy's remote address.
    assert_eq!(statuses(&envoy, &[("x-remote", "yes")], 3), [200, 200, 429]);

    // Reload under traffic: traffic on other keys never sees an error.
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let traffic = {
        let (stop, bad, port) = (Arc::clone(&stop), Arc::clone(&bad), envoy.port);
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let user = format!("load-{i}");
                match support::get(port, "/", &[("x-user", &user)]) {
                    Ok(r) if r.status == 200 => {}
                    _ => {
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            i
        })
    };
    assert!(
        statuses(&envoy, &[("x-reload", "r1")], 3)
            .iter()
            .all(|&s| s == 200)
    );
    // A bad file keeps the old config.
    configmap(
        &root,
        "v2",
        "domain: test\ndescriptors:\n  - key: reload\n    rate_limit: {unit: fortnight}\n",
    );
    eventually(Duration::from_secs(10), "config_load_error counted", || {
        metric(rls.debug, "ratelimit_service_config_load_error_total", "").is_some()
            || support::get(rls.debug.port(), "/metrics", &[]).is_ok_and(|r| {
                r.body
                    .contains("ratelimit_service_config_load_error_total 1")
            })
    });
    assert_eq!(
        envoy.get(&[("x-user", "bob")]).status,
        429,
        "old config and state kept"
    );
    // The swap to a good version: `reload` gets a limit, bob keeps his state.
    let v3 = format!(
        "{CONFIG}  - key: reload\n    rate_limit: {{unit: minute, requests_per_unit: 1}}\n"
    );
    configmap(&root, "v3", &v3);
    eventually(
        Duration::from_secs(10),
        "the swapped config in force",
        || envoy.get(&[("x-reload", "r2")]).status == 429,
    );
    assert_eq!(
        envoy.get(&[("x-user", "bob")]).status,
        429,
        "state kept across the reload"
    );
    // An in-place edit of the file works too.
    let data = root.join("config/..v3/a.yaml");
    std::fs::write(
        &data,
        format!("{CONFIG}  - key: reload\n    rate_limit: {{unlimited: true}}\n"),
    )
    .unwrap();
    eventually(
        Duration::from_secs(10),
        "the edited config in force",
        || envoy.get(&[("x-reload", "r2")]).status == 200,
    );
    stop.store(true, Ordering::Relaxed);
    let sent = traffic.join().unwrap();
    assert!(sent > 0);
    assert_eq!(
        bad.load(Ordering::Relaxed),
        0,
        "a request failed during reloads"
    );

    // SIGTERM: a graceful exit.
    drop(envoy);
    assert!(rls.terminate().success());
    let _ = std::fs::remove_dir_all(&root);
}
