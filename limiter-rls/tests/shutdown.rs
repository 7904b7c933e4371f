//! Graceful shutdown of the binary: on SIGTERM the gRPC health service
//! turns NOT_SERVING (seen on a `Watch` stream opened before) and
//! `/healthcheck` answers 500 while the listeners still serve for the
//! drain delay; a call in flight (held up by a blackholed Redis under a
//! long `REDIS_TIMEOUT`) still gets its answer; the process exits 0.

use crate::support;

use std::net::TcpListener;
use std::time::Duration;

use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use support::{Rls, get, temp_dir};
use tonic_health::pb::health_check_response::ServingStatus;

const CONFIG: &str = "domain: test
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_then_finishes_calls_in_flight() {
    // Accepts and never answers: every Redis call waits for REDIS_TIMEOUT.
    let blackhole = TcpListener::bind("127.0.0.1:0").unwrap();
    let redis_port = blackhole.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in blackhole.incoming() {
            match s {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
    });
    let root = temp_dir("shutdown");
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/a.yaml"), CONFIG).unwrap();
    let url = format!("redis://127.0.0.1:{redis_port}/");
    let rls = Rls::start(
        &root,
        0,
        &[
            ("BACKEND_TYPE", "redis"),
            ("REDIS_URL", &url),
            ("RLS_REDIS_FAILURE_POLICY", "open"),
            ("REDIS_TIMEOUT", "3s"),
            ("RLS_DRAIN_DELAY", "3s"),
        ],
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", rls.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let mut watch = health
        .watch(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert_eq!(first.status, ServingStatus::Serving as i32);

    // A call that Redis holds up for REDIS_TIMEOUT, then fail-open answers.
    let mut client = RateLimitClient::new(channel);
    let in_flight = tokio::spawn(async move {
        client
            .should_rate_limit(RateLimitRequest {
                domain: "test".into(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![Entry {
                        key: "user".into(),
                        value: "u".into(),
                    }],
                    limit: None,
                    hits_addend: None,
                    ..Default::default()
                }],
                hits_addend: 0,
            })
            .await
    });
    // Not a timing assertion: the call is in flight or about to be, and
    // either way it is answered (the listeners serve through the drain).
    tokio::time::sleep(Duration::from_millis(300)).await;
    rls.send_term();

    // Bounded waits (generous, for a loaded machine): a missing event
    // fails the test instead of hanging it.
    let next = tokio::time::timeout(Duration::from_secs(20), watch.message())
        .await
        .expect("NOT_SERVING within 20 s of SIGTERM")
        .unwrap()
        .unwrap();
    assert_eq!(next.status, ServingStatus::NotServing as i32);
    let http = rls.http.port();
    let health = tokio::task::spawn_blocking(move || get(http, "/healthcheck", &[]).unwrap())
        .await
        .unwrap();
    assert_eq!(health.status, 500, "{}", health.body);
    drop(watch);

    let answer = tokio::time::timeout(Duration::from_secs(20), in_flight)
        .await
        .expect("the call in flight answered within 20 s")
        .unwrap()
        .unwrap();
    assert_eq!(answer.overall_code, Code::Ok as i32, "fail open");
    let status = tokio::task::spawn_blocking(move || rls.wait())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(root);
    // The blackhole thread blocks in accept until the process ends.
    drop(held);
}
