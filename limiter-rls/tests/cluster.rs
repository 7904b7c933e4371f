//! limiter-rls on a real Redis Cluster (three masters, three replicas):
//! both algorithms, each limit exact, and a request whose second
//! descriptor refuses charges neither (GCRA: one script on the domain's
//! slot; fixed windows: per-key calls with give-back).

use crate::support;

use limiter_test_support::redis as redis_support;

use std::time::Duration;

use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use redis_support::cluster::RedisCluster;
use support::{Rls, clear_of_a_window_end, temp_dir};

const CONFIG: &str = "domain: test
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tight
    rate_limit: {unit: minute, requests_per_unit: 1}
";

fn req(pairs: &[(&str, &str)]) -> RateLimitRequest {
    RateLimitRequest {
        domain: "test".into(),
        descriptors: pairs
            .iter()
            .map(|(k, v)| RateLimitDescriptor {
                entries: vec![Entry {
                    key: (*k).into(),
                    value: (*v).into(),
                }],
                limit: None,
                hits_addend: None,
                ..Default::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_algorithms_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let urls = cluster.urls().join(",");
    let root = temp_dir("cluster");
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/a.yaml"), CONFIG).unwrap();
    for algorithm in ["gcra", "fixed_window"] {
        let rls = Rls::start(
            &root,
            0,
            &[
                ("BACKEND_TYPE", "redis"),
                ("REDIS_TYPE", "cluster"),
                ("REDIS_URL", &urls),
                ("RLS_ALGORITHM", algorithm),
                ("RLS_REDIS_FAILURE_POLICY", "error"),
                // Nothing fails here: generous, so that a loaded
                // machine's slow call is not taken for a failure.
                ("REDIS_TIMEOUT", "5s"),
            ],
        );
        let mut c = RateLimitClient::connect(format!("http://{}", rls.grpc))
            .await
            .unwrap();
        let code = |r: limiter_rls::proto::RateLimitResponse| r.overall_code;
        let both = [("user", "u1"), ("tight", "t1")];
        // Fixed windows of a minute: the requests below fall in one.
        clear_of_a_window_end(Duration::from_secs(60), Duration::from_secs(5));
        assert_eq!(
            code(c.should_rate_limit(req(&both)).await.unwrap()),
            Code::Ok as i32,
            "{algorithm}"
        );
        assert_eq!(
            code(c.should_rate_limit(req(&both)).await.unwrap()),
            Code::OverLimit as i32,
            "{algorithm}"
        );
        // u1 paid once: two left.
        for expected in [Code::Ok, Code::Ok, Code::OverLimit] {
            let r = c.should_rate_limit(req(&[("user", "u1")])).await.unwrap();
            assert_eq!(code(r), expected as i32, "{algorithm}");
        }
        drop(rls);
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(root);
}
