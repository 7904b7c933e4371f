//! The binary on its own: gRPC `ShouldRateLimit` (statuses in request
//! order, `hits_addend` rules, the limit override, quota mode, headers,
//! dynamic metadata), `POST /json` (200 and 429), `/healthcheck`,
//! `/rlconfig`, `/metrics` without request values in labels, gRPC health,
//! and statsd under envoyproxy/ratelimit's exact names, caught by a UDP
//! listener the test runs.

use crate::support;

use std::collections::HashMap;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::{
    Code, Entry, RateLimitDescriptor, RateLimitOverride, RateLimitRequest, UInt64Value, Unit,
};
use support::{Rls, TempDir, get, request, temp_dir};

const CONFIG: &str = "domain: test
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: ip
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: tagged
    metadata: {tier: gold}
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
";

fn descriptor(k: &str, v: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: k.into(),
            value: v.into(),
        }],
        limit: None,
        hits_addend: None,
        ..Default::default()
    }
}

fn req(ds: Vec<RateLimitDescriptor>, hits: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: "test".into(),
        descriptors: ds,
        hits_addend: hits,
    }
}

fn start(env: &[(&str, &str)]) -> (Rls, TempDir) {
    let root = temp_dir("binary");
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/a.yaml"), CONFIG).unwrap();
    (Rls::start(&root, 0, env), root)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_semantics() {
    let (rls, root) = start(&[
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ("RESPONSE_DYNAMIC_METADATA", "true"),
    ]);
    let mut c = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();

    // hits_addend 0 at request level is 1; 2 takes two.
    let r = c
        .should_rate_limit(req(vec![descriptor("user", "a")], 0))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 2);
    let r = c
        .should_rate_limit(req(vec![descriptor("user", "a")], 2))
        .await
        .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 0);
    let limit = r.statuses[0].current_limit.clone().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit),
        (3, Unit::Minute as i32)
    );
    let headers: HashMap<_, _> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(headers["RateLimit-Limit"], "3");
    assert_eq!(headers["RateLimit-Remaining"], "0");
    // A set per-descriptor 0 checks without spending: over now (nothing left).
    let mut check = descriptor("user", "b");
    check.hits_addend = Some(UInt64Value { value: 0 });
    let r = c
        .should_rate_limit(req(vec![check.clone()], 5))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 3, "a check spends nothing");
    // Statuses in request order; a descriptor without a rule is OK.
    let r = c
        .should_rate_limit(req(
            vec![descriptor("nothing", "x"), descriptor("user", "a")],
            0,
        ))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].code, Code::Ok as i32);
    assert!(r.statuses[0].current_limit.is_none());
    assert_eq!(r.statuses[1].code, Code::OverLimit as i32);
    // The limit override: 1 per hour for this descriptor only.
    let mut o = descriptor("anything", "z");
    o.limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: Unit::Hour as i32,
    });
    let r = c.should_rate_limit(req(vec![o.clone()], 0)).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    let r = c.should_rate_limit(req(vec![o], 0)).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    // Quota mode: over only if every quota descriptor is; a normal one that
    // passes is charged.
    let r = c
        .should_rate_limit(req(
            vec![descriptor("quota", "q"), descriptor("user", "c")],
            0,
        ))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    let r = c
        .should_rate_limit(req(
            vec![descriptor("quota", "q"), descriptor("user", "c")],
            0,
        ))
        .await
        .unwrap();
    assert_eq!(
        r.overall_code,
        Code::OverLimit as i32,
        "the only quota descriptor is over"
    );
    let r = c
        .should_rate_limit(req(
            vec![
                descriptor("quota", "q"),
                descriptor("quota", "q2"),
                descriptor("user", "c"),
            ],
            0,
        ))
        .await
        .unwrap();
    assert_eq!(
        r.overall_code,
        Code::Ok as i32,
        "one quota descriptor of two is over"
    );
    assert_eq!(
        r.statuses[2].limit_remaining, 1,
        "user c: 1 of 3 charged before, this one now"
    );
    // Dynamic metadata carries the passed descriptor's metadata.
    let r = c
        .should_rate_limit(req(vec![descriptor("tagged", "t")], 0))
        .await
        .unwrap();
    let md = r.dynamic_metadata.unwrap();
    let meta = format!("{:?}", md.fields["metadata"]);
    assert!(meta.contains("gold"), "{meta}");
    // Invalid requests.
    let e = c.should_rate_limit(req(vec![], 0)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);

    // gRPC health.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", rls.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let h = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        h.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    // HTTP: /json 200 then 429, /healthcheck, /rlconfig.
    let port = rls.http.port();
    let body = r#"{"domain":"test","descriptors":[{"entries":[{"key":"user","value":"json"}]}],"hitsAddend":3}"#;
    let ok = tokio::task::spawn_blocking(move || {
        request(
            port,
            "POST",
            "/json",
            &[("content-type", "application/json")],
            body,
        )
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(ok.body.contains(r#""overallCode":"OK""#), "{}", ok.body);
    let over = tokio::task::spawn_blocking(move || request(port, "POST", "/json", &[], body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(over.status, 429);
    assert!(over.body.contains("OVER_LIMIT"));
    let bad =
        tokio::task::spawn_blocking(move || request(port, "POST", "/json", &[], "{\"domain\":1}"))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(bad.status, 400);
    let debug = rls.debug.port();
    let (health, config) = tokio::task::spawn_blocking(move || {
        (
            get(port, "/healthcheck", &[]).unwrap(),
            get(debug, "/rlconfig", &[]).unwrap(),
        )
    })
    .await
    .unwrap();
    assert_eq!(health.status, 200);
    assert!(
        config
            .body
            .contains("test.user: unit=MINUTE requests_per_unit=3"),
        "{}",
        config.body
    );
    assert!(rls.terminate().success());
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_names_are_theirs_and_prometheus_labels_are_bounded() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let port = udp.local_addr().unwrap().port().to_string();
    let (rls, root) = start(&[
        ("USE_STATSD", "true"),
        ("STATSD_HOST", "127.0.0.1"),
        ("STATSD_PORT", &port),
        ("STATS_FLUSH_INTERVAL", "50ms"),
    ]);
    let mut c = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();
    for _ in 0..4 {
        c.should_rate_limit(req(vec![descriptor("user", "bob")], 0))
            .await
            .unwrap();
    }
    c.should_rate_limit(req(vec![descriptor("ip", "10.0.0.1")], 0))
        .await
        .unwrap();
    // Shadow mode: the second is over, answered OK, counted as shadow.
    for _ in 0..2 {
        let r = c
            .should_rate_limit(req(vec![descriptor("shadow", "s")], 0))
            .await
            .unwrap();
        assert_eq!(r.overall_code, Code::Ok as i32);
    }
    // value_to_metric: the request's value in the statsd name.
    c.should_rate_limit(req(vec![descriptor("path", "/api")], 0))
        .await
        .unwrap();
    // A per-descriptor limit override keyed by an address: statsd keeps
    // their per-value name, Prometheus one bounded `rule` label.
    for ip in ["10.0.0.2", "10.0.0.3"] {
        let mut d = descriptor("remote_address", ip);
        d.limit = Some(RateLimitOverride {
            requests_per_unit: 5,
            unit: Unit::Second as i32,
        });
        c.should_rate_limit(req(vec![d], 0)).await.unwrap();
    }
    let want = [
        ("ratelimit.service.rate_limit.test.user.total_hits", 4),
        ("ratelimit.service.rate_limit.test.user.within_limit", 3),
        ("ratelimit.service.rate_limit.test.user.over_limit", 1),
        ("ratelimit.service.rate_limit.test.user.near_limit", 1),
        (
            "ratelimit.service.rate_limit.test.ip_10_0_0_1.total_hits",
            1,
        ),
        (
            "ratelimit.service.rate_limit.test.remote_address_10_0_0_2.total_hits",
            1,
        ),
        ("ratelimit.service.rate_limit.test.shadow.total_hits", 2),
        ("ratelimit.service.rate_limit.test.shadow.over_limit", 1),
        ("ratelimit.service.rate_limit.test.shadow.shadow_mode", 1),
        ("ratelimit.service.rate_limit.test.path_/api.total_hits", 1),
        (
            "ratelimit.service.rate_limit.test.path_/api.within_limit",
            1,
        ),
    ];
    let got = tokio::task::spawn_blocking(move || {
        let mut sums: HashMap<String, u64> = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 2048];
        while Instant::now() < deadline
            && !want.iter().all(|(n, v)| sums.get(*n) == Some(&(*v as u64)))
        {
            if let Ok(n) = udp.recv(&mut buf) {
                for line in String::from_utf8_lossy(&buf[..n]).lines() {
                    let (name, rest) = line.split_once(':').unwrap();
                    let v: u64 = rest.strip_suffix("|c").unwrap().parse().unwrap();
                    *sums.entry(name.to_owned()).or_default() += v;
                }
            }
        }
        sums
    })
    .await
    .unwrap();
    for (name, v) in want {
        assert_eq!(got.get(name), Some(&(v as u64)), "{name} in {got:?}");
    }
    let debug = rls.debug.port();
    let metrics = tokio::task::spawn_blocking(move || get(debug, "/metrics", &[]).unwrap().body)
        .await
        .unwrap();
    assert!(
        metrics
            .contains(r#"ratelimit_rate_limit_total_hits_total{domain="test",rule="test.ip"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics
            .contains(r#"ratelimit_rate_limit_total_hits_total{domain="test",rule="override"} 2"#),
        "{metrics}"
    );
    for ip in ["10.0.0.1", "10_0_0_1", "10.0.0.2", "10_0_0_2", "10.0.0.3"] {
        assert!(!metrics.contains(ip), "a request value ({ip}) in a label");
    }
    drop(rls);
    let _ = std::fs::remove_dir_all(root);
}
