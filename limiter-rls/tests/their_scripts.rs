//! envoyproxy/ratelimit's own integration checks, behind a real Envoy:
//! the request sequences and expectations of their `replaces.sh`,
//! `token-quota.sh` and `multiservice-tokenquota.sh`, against the same
//! rules (their example config's descriptors, written here as our own
//! YAML) and the same Envoy routes (their proxy's rate limits, per-route
//! `hits_addend` and `apply_on_stream_done` for quota mode, the quota
//! service picked from the rate limit's dynamic metadata by a subset load
//! balancer). A check passes as theirs does: a 2xx answer (`curl -f`), a
//! limited one is Envoy's 429, and for the multi-service routes the upstream
//! that answered (its body).
//!
//! Each script runs against its own limiter-rls and Envoy (the scripts
//! share descriptors), all three at once; once with GCRA in memory, once
//! with fixed windows on a real `redis-server` (their algorithm and keys).
//! Their scripts wait a minute for the quota to come back: so do these, in
//! real time (Envoy and the server run on the real clock), so each test
//! takes a little over a minute. The quota charged on the response path
//! reaches the server after Envoy answered the client, so after each
//! request the test waits until the server counted it (its Prometheus
//! `total_hits`), as a client slower than `curl` in a loop would.

use crate::support;

use limiter_test_support::redis as redis_support;

use std::net::SocketAddr;
use std::time::Duration;

use redis_support::RedisServer;
use support::{
    Envoy, Reply, Rls, TempDir, clear_of_a_window_end, eventually, free_port, metric, temp_dir,
    upstream_saying,
};

/// Their example config's descriptors for these scripts, as our YAML.
const RULES: &str = "domain: rl
descriptors:
  - key: category
    value: account
    rate_limit:
      unit: minute
      requests_per_unit: 4
      replaces: [{name: bkthomps}, {name: fake_name}]
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bkthomps
        rate_limit: {unit: minute, requests_per_unit: 2, replaces: [{name: bkthomps}]}
      - key: destination_cluster
        value: mock
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: destination_cluster
        value: override
        rate_limit: {unit: minute, requests_per_unit: 2, replaces: [{name: banned_limit}]}
      - key: destination_cluster
        value: fake
        rate_limit: {unit: minute, requests_per_unit: 2, name: fake_name}
  - key: foo
    rate_limit: {unit: minute, requests_per_unit: 2}
    descriptors:
      - key: bar
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: bar
        value: bkthomps
        rate_limit: {unit: minute, requests_per_unit: 1, name: bkthomps}
      - key: bar
        value: banned
        rate_limit: {unit: minute, requests_per_unit: 0, name: banned_limit}
      - key: baz
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {service_with_quota: {name: service_1}}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
    metadata: {service_with_quota: {name: service_2}}
";

/// One descriptor from a request header (their `request_headers` actions).
fn header(name: &str) -> String {
    format!("{{request_headers: {{header_name: {name}, descriptor_key: {name}}}}}")
}

/// Their proxy's routes and filters for these scripts, on `port` with
/// admin on `admin`: the upstreams `mock` (Service 1) and `mock2`
/// (Service 2), limiter-rls on `rls`. The filter's timeout is generous
/// (their config leaves Envoy's 20 ms default): a loaded test machine is
/// not what these checks are about.
fn envoy_yaml(port: u16, admin: u16, mock: u16, mock2: u16, rls: u16) -> String {
    let (h_foo, h_bar, h_baz) = (header("foo"), header("bar"), header("baz"));
    let (src, dst, cat) = (
        header("source_cluster"),
        header("destination_cluster"),
        header("category"),
    );
    let service = |v: &str, hits: u32, on_done: bool| {
        format!(
            "{{actions: [{{generic_key: {{descriptor_key: service, descriptor_value: {v}}}}}], \
             hits_addend: {{number: {hits}}}, apply_on_stream_done: {on_done}}}"
        )
    };
    let per_route = |limits: Vec<String>| {
        format!(
            r#"
                typed_per_filter_config:
                  envoy.filters.http.ratelimit:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
                    vh_rate_limits: INCLUDE
                    override_option: INCLUDE_POLICY
                    rate_limits: [{}]"#,
            limits.join(", ")
        )
    };
    let token = per_route(vec![
        service("service_2", 0, false),
        service("service_2", 1, true),
    ]);
    let multi = per_route(vec![
        service("service_1", 0, false),
        service("service_2", 0, false),
        "{actions: [{metadata: {descriptor_key: service, source: CLUSTER_LOCALITY_ENTRY, \
         metadata_key: {key: envoy.cluster.locality, path: [{key: name}]}}}], \
         hits_addend: {number: 1}, apply_on_stream_done: true}"
            .to_owned(),
    ]);
    let locality = |region: &str, name: &str, port: u16| {
        format!(
            "{{locality: {{region: {region}}}, \
             metadata: {{filter_metadata: {{envoy.cluster.locality: {{name: {name}}}}}}}, \
             lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}, \
             metadata: {{filter_metadata: {{envoy.lb: {{service: {name}}}}}}}}}]}}"
        )
    };
    let (l1, l2) = (
        locality("region_1", "service_1", mock),
        locality("region_2", "service_2", mock2),
    );
    format!(
        r#"admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}
static_resources:
  listeners:
  - name: main
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          http_filters:
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: rl
              failure_mode_deny: false
              timeout: 2s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {{envoy_grpc: {{cluster_name: rls}}, timeout: 2s}}
          - name: envoy.filters.http.set_header
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
              mutations:
                request_mutations:
                - append:
                    header:
                      key: x-envoy-service-with-quota
                      value: "%DYNAMIC_METADATA(envoy.filters.http.ratelimit:metadata:service_with_quota:name)%"
                    append_action: OVERWRITE_IF_EXISTS_OR_ADD
          - name: envoy.filters.http.header_to_metadata
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config
              request_rules:
              - header: x-envoy-service-with-quota
                on_header_present: {{metadata_namespace: envoy.lb, key: service, type: STRING}}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
          route_config:
            virtual_hosts:
            - name: backend
              domains: ["*"]
              routes:
              - match: {{prefix: /twoheader}}
                route:
                  cluster: mock
                  rate_limits:
                  - actions: [{h_foo}, {h_bar}]
                  - actions: [{h_foo}, {h_baz}]
              - match: {{prefix: /fourheader}}
                route:
                  cluster: mock
                  rate_limits:
                  - actions: [{h_foo}, {h_bar}]
                  - actions: [{src}, {dst}]
              - match: {{prefix: /fiveheader}}
                route:
                  cluster: mock
                  rate_limits:
                  - actions: [{h_foo}, {h_bar}]
                  - actions: [{src}, {dst}]
                  - actions: [{cat}]
              - match: {{prefix: /tokenquota}}
                route: {{cluster: mock}}{token}
              - match: {{prefix: /multiservice-tokenquota}}
                route: {{cluster: multiservice}}{multi}
  clusters:
  - name: mock
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: mock
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {mock}}}}}}}}}]}}]
  - name: multiservice
    type: STATIC
    connect_timeout: 1s
    lb_subset_config:
      fallback_policy: ANY_ENDPOINT
      subset_selectors: [{{keys: [service]}}]
    load_assignment:
      cluster_name: multiservice
      endpoints: [{l1}, {l2}]
  - name: rls
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: rls
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {rls}}}}}}}}}]}}]
"#
    )
}

/// One script's world: limiter-rls with [`RULES`] and `env`, Envoy in
/// front of two upstreams.
struct Stage {
    envoy: Envoy,
    rls: Rls,
    root: TempDir,
    /// Fixed windows: a script's requests before its wait must fall in one.
    windows: bool,
}

impl Stage {
    fn start(env: &[(&str, &str)]) -> Stage {
        let root = temp_dir("scripts");
        std::fs::create_dir_all(root.join("config")).unwrap();
        std::fs::write(root.join("config/rl.yaml"), RULES).unwrap();
        let mut env = env.to_vec();
        env.push(("RESPONSE_DYNAMIC_METADATA", "true"));
        let rls = Rls::start(&root, 0, &env);
        let mock = upstream_saying("Hello World from Service 1");
        let mock2 = upstream_saying("Hello World from Service 2");
        let (port, admin) = (free_port(), free_port());
        let yaml = envoy_yaml(port, admin, mock, mock2, rls.grpc.port());
        let envoy = Envoy::start(&yaml, port, admin);
        let windows = env.contains(&("RLS_ALGORITHM", "fixed_window"));
        Stage {
            envoy,
            rls,
            root,
            windows,
        }
    }

    /// Before a script's first request: under fixed windows, at least 20 s
    /// of the minute left for the requests before its wait.
    fn begin(&self) {
        if self.windows {
            clear_of_a_window_end(Duration::from_secs(60), Duration::from_secs(20));
        }
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.envoy.get_path(path, headers)
    }

    /// Waits until the server has counted `hits` for `service` (the quota
    /// Envoy charges on the response path, after the client has its
    /// answer).
    fn counted(&self, service: &str, hits: u32) {
        let debug: SocketAddr = self.rls.debug;
        let labels = format!(r#"domain="rl",rule="rl.service_{service}""#);
        eventually(
            Duration::from_secs(10),
            &format!("{hits} hits on {service}"),
            || {
                metric(debug, "ratelimit_rate_limit_total_hits_total", &labels)
                    == Some(f64::from(hits))
            },
        );
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// `curl -f` succeeds: a 2xx answer.
fn ok(r: &Reply) -> bool {
    (200..300).contains(&r.status)
}

/// `replaces.sh`: `replaces` raises a banned limit, leaves the replaced
/// limit in force where it applies alone, and replaces several names.
fn replaces(stage: &Stage) {
    let check = |path: &str, headers: &[(&str, &str)], want_ok: bool, step: &str| {
        let r = stage.get(path, headers);
        assert_eq!(
            ok(&r),
            want_ok,
            "replaces.sh, {step}: {} {headers:?}",
            r.status
        );
        if !want_ok {
            assert_eq!(r.status, 429, "replaces.sh, {step}");
        }
    };
    stage.begin();
    let banned = [("foo", "bkthomps"), ("bar", "banned")];
    check("/twoheader", &banned, false, "banned");
    let mock = [
        ("foo", "bkthomps"),
        ("bar", "banned"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "mock"),
    ];
    check("/fourheader", &mock, false, "banned, not replaced");
    let over = [
        ("foo", "bkthomps"),
        ("bar", "banned"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "override"),
    ];
    for (i, want) in [true, true, false].into_iter().enumerate() {
        check("/fourheader", &over, want, &format!("override {i}"));
    }
    let own = [
        ("foo", "my_foo"),
        ("bar", "bkthomps"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "bkthomps"),
    ];
    for (i, want) in [true, true, false].into_iter().enumerate() {
        check("/fourheader", &own, want, &format!("replacing {i}"));
    }
    let not_own = [
        ("foo", "my_foo"),
        ("bar", "bkthomps"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "not_bkthomps"),
    ];
    for (i, want) in [true, false].into_iter().enumerate() {
        check("/fourheader", &not_own, want, &format!("not replaced {i}"));
    }
    check("/fourheader", &own, false, "replacing again");
    let five = [
        ("foo", "my_foo"),
        ("bar", "bkthomps"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "fake"),
        ("category", "account"),
    ];
    for (i, want) in [true, true, true, true, false].into_iter().enumerate() {
        check("/fiveheader", &five, want, &format!("several {i}"));
    }
    let two = [("foo", "foo_2"), ("bar", "bkthomps")];
    for (i, want) in [true, false].into_iter().enumerate() {
        check("/twoheader", &two, want, &format!("bkthomps alone {i}"));
    }
    let fake = [
        ("foo", "foo_3"),
        ("bar", "bar_3"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "fake"),
    ];
    for (i, want) in [true, true, false].into_iter().enumerate() {
        check("/fourheader", &fake, want, &format!("fake_name alone {i}"));
    }
    check("/fiveheader", &five, false, "several again");
}

/// `token-quota.sh`: service_2 (2 a minute) checked on the request path
/// and charged on the response path: three requests pass, the fourth is
/// refused, and a minute later the quota is back.
fn token_quota(stage: &Stage) {
    stage.begin();
    for n in 1..=3_u32 {
        let r = stage.get("/tokenquota", &[("request-no", &n.to_string())]);
        assert!(ok(&r), "token-quota.sh: request {n} refused ({})", r.status);
        stage.counted("service_2", n);
    }
    let r = stage.get("/tokenquota", &[("request-no", "4")]);
    assert_eq!(
        r.status, 429,
        "token-quota.sh: quota limiting should fail request 4"
    );
    std::thread::sleep(Duration::from_secs(60));
    let r = stage.get("/tokenquota", &[("request-no", "5")]);
    assert!(
        ok(&r),
        "token-quota.sh: the quota should be refreshed ({})",
        r.status
    );
}

/// `multiservice-tokenquota.sh`: both services checked on the request
/// path, the one with quota picked (service_1 first), charged on the
/// response path: service_1 serves two, service_2 three, the sixth is
/// refused, and a minute later service_1 serves again.
fn multiservice(stage: &Stage) {
    stage.begin();
    let mut charged = [0, 0];
    for (n, s) in [1, 1, 2, 2, 2].into_iter().enumerate() {
        let no = (n + 1).to_string();
        let r = stage.get("/multiservice-tokenquota", &[("request-no", &no)]);
        let want = format!("from Service {s}");
        assert!(
            ok(&r) && r.body.contains(&want),
            "multiservice-tokenquota.sh: request {no} should be served {want}: {} {:?}",
            r.status,
            r.body
        );
        charged[s - 1] += 1;
        stage.counted(&format!("service_{s}"), charged[s - 1]);
    }
    let r = stage.get("/multiservice-tokenquota", &[("request-no", "6")]);
    assert!(
        !r.body.contains("Hello World from Service"),
        "multiservice-tokenquota.sh: quota limiting should fail request 6: {} {:?}",
        r.status,
        r.body
    );
    assert_eq!(r.status, 429);
    std::thread::sleep(Duration::from_secs(60));
    let r = stage.get("/multiservice-tokenquota", &[("request-no", "7")]);
    assert!(
        ok(&r) && r.body.contains("from Service 1"),
        "multiservice-tokenquota.sh: the quota should be refreshed, service 1 used: {} {:?}",
        r.status,
        r.body
    );
}

/// The three scripts at once, each on its own stage made by `stage`
/// (given the script's name).
fn all_three(stage: impl Fn(&str) -> Stage + Sync) {
    std::thread::scope(|s| {
        let runs: Vec<_> = [
            ("replaces", replaces as fn(&Stage)),
            ("token", token_quota),
            ("multi", multiservice),
        ]
        .into_iter()
        .map(|(name, script)| {
            let stage = &stage;
            s.spawn(move || script(&stage(name)))
        })
        .collect();
        for run in runs {
            if let Err(panic) = run.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

#[test]
fn their_scripts_with_gcra_in_memory() {
    all_three(|_| Stage::start(&[]));
}

#[test]
fn their_scripts_with_fixed_windows_on_redis() {
    let redis = RedisServer::start();
    let url = redis.url();
    all_three(|name| {
        let prefix = format!("{name}_");
        Stage::start(&[
            ("BACKEND_TYPE", "redis"),
            ("REDIS_URL", &url),
            ("REDIS_TIMEOUT", "2s"),
            ("RLS_ALGORITHM", "fixed_window"),
            ("CACHE_KEY_PREFIX", &prefix),
        ])
    });
}
