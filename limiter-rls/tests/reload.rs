//! Reload through limiter-reload's directory mode, on the binary: a file
//! added under the config directory puts its domain in force and removing
//! it takes the domain away; with `RUNTIME_WATCH_ROOT` (the default) a swap
//! of the runtime root itself (a `current` symlink moved to a new
//! directory) reloads too. (In-place edits, the ConfigMap `..data` swap, a
//! bad file keeping the old config and state kept are in tests/envoy.rs.)

use crate::support;

use std::time::Duration;

use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use support::{Rls, temp_dir};

fn req(domain: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "k".into(),
                value: "v".into(),
            }],
            limit: None,
            hits_addend: None,
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// `domain: <d>` blocking every request on `k`.
fn blocking(domain: &str) -> String {
    format!(
        "domain: {domain}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 0}}\n"
    )
}

async fn code(c: &mut RateLimitClient, domain: &str) -> Code {
    let r = c.should_rate_limit(req(domain)).await.unwrap();
    Code::try_from(r.overall_code).unwrap()
}

async fn eventually_code(c: &mut RateLimitClient, domain: &str, want: Code, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while code(c, domain).await != want {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_added_and_removed_and_a_root_swap_reload() {
    let base = temp_dir("reload");
    for v in ["v1", "v2"] {
        std::fs::create_dir_all(base.join(v).join("config")).unwrap();
    }
    std::fs::write(base.join("v1/config/a.yaml"), blocking("a")).unwrap();
    std::fs::write(base.join("v2/config/a.yaml"), blocking("a")).unwrap();
    std::fs::write(base.join("v2/config/c.yaml"), blocking("c")).unwrap();
    std::os::unix::fs::symlink("v1", base.join("current")).unwrap();
    let rls = Rls::start(&base.join("current"), 0, &[]);
    let mut c = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();
    assert_eq!(code(&mut c, "a").await, Code::OverLimit);
    assert_eq!(code(&mut c, "b").await, Code::Ok, "no domain b yet");

    std::fs::write(base.join("v1/config/b.yaml"), blocking("b")).unwrap();
    eventually_code(&mut c, "b", Code::OverLimit, "an added file is loaded").await;
    std::fs::remove_file(base.join("v1/config/b.yaml")).unwrap();
    eventually_code(&mut c, "b", Code::Ok, "a removed file is unloaded").await;

    // The root swap: `current` now points at v2 (with domain c).
    std::os::unix::fs::symlink("v2", base.join("current_tmp")).unwrap();
    std::fs::rename(base.join("current_tmp"), base.join("current")).unwrap();
    eventually_code(&mut c, "c", Code::OverLimit, "a root swap is loaded").await;
    assert_eq!(code(&mut c, "a").await, Code::OverLimit);
    drop(rls);
    let _ = std::fs::remove_dir_all(base);
}
