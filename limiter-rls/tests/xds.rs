//! `CONFIG_TYPE=GRPC_XDS_SOTW` against an xDS server of this test's own,
//! behaving as envoyproxy/ratelimit's examples/xds-sotw-config-server: it
//! serves a snapshot of `RateLimitConfig` resources over the aggregated
//! discovery service (state of the world) and pushes each new snapshot to
//! the open streams, recording every request it receives (subscription,
//! ACK, NACK). The `limiter-rls` binary is the client; the last test puts
//! a real Envoy in front of it.

use crate::support;

use std::pin::Pin;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use futures::Stream;
use limiter_rls::grpc::RateLimitClient;
use limiter_rls::proto::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use limiter_rls::proto::config::{
    RateLimitConfig, RateLimitDescriptor as ConfDescriptor, RateLimitPolicy, TYPE_URL,
};
use limiter_rls::proto::{
    Any, Code, DiscoveryRequest, DiscoveryResponse, Entry, RateLimitDescriptor, RateLimitRequest,
};
use prost::Message;
use support::{Rls, free_port, temp_dir};
use tokio::sync::{mpsc, watch};
use tonic::{Request, Response, Status, Streaming};

/// A version and its resources.
type Snapshot = Option<(String, Vec<Any>)>;

type Responses = Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, Status>> + Send>>;

/// The test's xDS server: the snapshot in force, what it was sent, and a
/// counter whose every step fails the open streams.
struct XdsServer {
    snapshot: watch::Receiver<Snapshot>,
    seen: mpsc::UnboundedSender<DiscoveryRequest>,
    breaks: watch::Receiver<u32>,
    /// Each stream's gRPC metadata.
    streams: mpsc::UnboundedSender<tonic::metadata::MetadataMap>,
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for XdsServer {
    type StreamAggregatedResourcesStream = Responses;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Responses>, Status> {
        let _ = self.streams.send(request.metadata().clone());
        let mut inbound = request.into_inner();
        let mut snapshot = self.snapshot.clone();
        let seen = self.seen.clone();
        let mut breaks = self.breaks.clone();
        breaks.mark_unchanged();
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            // The subscription first, then the snapshot in force (if any)
            // and every later one; nonces count responses on this stream.
            let Ok(Some(first)) = inbound.message().await else {
                return;
            };
            let _ = seen.send(first);
            snapshot.mark_changed();
            let mut nonce = 0u32;
            loop {
                tokio::select! {
                    _ = breaks.changed() => {
                        let _ = tx.send(Err(Status::unavailable("stream broken by the test"))).await;
                        return;
                    }
                    m = inbound.message() => match m {
                        Ok(Some(m)) => { let _ = seen.send(m); }
                        _ => return,
                    },
                    c = snapshot.changed() => {
                        if c.is_err() {
                            return;
                        }
                        let current = snapshot.borrow_and_update().clone();
                        if let Some((version, resources)) = current {
                            nonce += 1;
                            let response = DiscoveryResponse {
                                version_info: version,
                                resources,
                                type_url: TYPE_URL.into(),
                                nonce: nonce.to_string(),
                                ..DiscoveryResponse::default()
                            };
                            if tx.send(Ok(response)).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        });
        let stream =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
        Ok(Response::new(Box::pin(stream)))
    }

    type DeltaAggregatedResourcesStream =
        Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, Status>> + Send>>;

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("state of the world only"))
    }
}

/// The running server: set snapshots, read what the client sent.
struct Xds {
    snapshot: watch::Sender<Snapshot>,
    seen: mpsc::UnboundedReceiver<DiscoveryRequest>,
    breaks: watch::Sender<u32>,
    streams: mpsc::UnboundedReceiver<tonic::metadata::MetadataMap>,
}

impl Xds {
    /// Serves on 127.0.0.1:`port`.
    async fn start(port: u16) -> Xds {
        Xds::start_with(port, None).await
    }

    /// Serves on 127.0.0.1:`port`, over TLS with `tls`.
    async fn start_with(port: u16, tls: Option<tonic::transport::ServerTlsConfig>) -> Xds {
        let (snapshot, rx) = watch::channel(None);
        let (seen_tx, seen) = mpsc::unbounded_channel();
        let (breaks, breaks_rx) = watch::channel(0);
        let (streams_tx, streams) = mpsc::unbounded_channel();
        let service = AggregatedDiscoveryServiceServer::new(XdsServer {
            snapshot: rx,
            seen: seen_tx,
            breaks: breaks_rx,
            streams: streams_tx,
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder.tls_config(tls).unwrap();
        }
        tokio::spawn(
            builder
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        Xds {
            snapshot,
            seen,
            breaks,
            streams,
        }
    }

    /// Fails every open stream (the client must open a new one).
    fn break_streams(&self) {
        self.breaks.send_modify(|n| *n += 1);
    }

    fn push(&self, version: &str, configs: &[RateLimitConfig]) {
        let resources = configs
            .iter()
            .map(|c| Any {
                type_url: TYPE_URL.into(),
                value: c.encode_to_vec(),
            })
            .collect();
        self.snapshot
            .send_replace(Some((version.into(), resources)));
    }

    /// The next request the client sends (generously bounded).
    async fn next(&mut self) -> DiscoveryRequest {
        tokio::time::timeout(Duration::from_secs(30), self.seen.recv())
            .await
            .expect("the xDS client sent nothing within 30 s")
            .expect("server gone")
    }
}

/// A domain with one descriptor `key` limited to `n` per minute.
fn config(name: &str, domain: &str, key: &str, n: u32, unit: i32) -> RateLimitConfig {
    RateLimitConfig {
        name: name.into(),
        domain: domain.into(),
        descriptors: vec![ConfDescriptor {
            key: key.into(),
            rate_limit: Some(RateLimitPolicy {
                unit,
                requests_per_unit: n,
                ..RateLimitPolicy::default()
            }),
            ..ConfDescriptor::default()
        }],
    }
}

const MINUTE: i32 = 2;

/// One call for `domain`/`key`=`value`: the overall code and the limit's
/// requests per unit (0 when none applied).
async fn call(client: &mut RateLimitClient, domain: &str, key: &str, value: &str) -> (Code, u32) {
    let r = client
        .should_rate_limit(RateLimitRequest {
            domain: domain.into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: key.into(),
                    value: value.into(),
                }],
                ..RateLimitDescriptor::default()
            }],
            hits_addend: 0,
        })
        .await
        .unwrap();
    let limit = r.statuses[0]
        .current_limit
        .as_ref()
        .map_or(0, |l| l.requests_per_unit);
    (Code::try_from(r.overall_code).unwrap(), limit)
}

fn xds_env(port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("CONFIG_TYPE", "GRPC_XDS_SOTW".into()),
        ("CONFIG_GRPC_XDS_SERVER_URL", format!("127.0.0.1:{port}")),
        ("CONFIG_GRPC_XDS_NODE_ID", "test-node".into()),
        (
            "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
            "100ms".into(),
        ),
        ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "100ms".into()),
        ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "200ms".into()),
    ]
}

async fn start_rls(env: Vec<(&'static str, String)>) -> tokio::task::JoinHandle<Rls> {
    let root = temp_dir("xds");
    tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Rls::start(&root, 0, &env)
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn xds_updates_apply_live_keep_counters_and_a_bad_one_is_nacked() {
    let port = free_port();
    let mut xds = Xds::start(port).await;
    let mut env = xds_env(port);
    env.extend([
        ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a".into()),
        (
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            "x-tenant:t1".into(),
        ),
    ]);
    let starting = start_rls(env).await;

    // The subscription: their node, their type, nothing accepted yet; the
    // extra header on the stream.
    let sub = xds.next().await;
    let node = sub.node.as_ref().unwrap();
    assert_eq!(node.id, "test-node");
    let zone = node.metadata.as_ref().unwrap().fields["zone"].kind.clone();
    assert_eq!(
        zone,
        Some(limiter_rls::proto::Kind::StringValue("a".into()))
    );
    let headers = xds.streams.recv().await.unwrap();
    assert_eq!(headers.get("x-tenant").unwrap(), "t1");
    assert_eq!(sub.type_url, TYPE_URL);
    assert!(sub.version_info.is_empty() && sub.response_nonce.is_empty());
    assert!(sub.resource_names.is_empty(), "a wildcard subscription");
    // Without FORCE_START_WITHOUT_INITIAL_CONFIG nothing is served yet.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !starting.is_finished(),
        "listening before any config arrived"
    );

    xds.push("1", &[config("users", "d", "user", 3, MINUTE)]);
    let ack = xds.next().await;
    assert_eq!(
        (ack.version_info.as_str(), ack.response_nonce.as_str()),
        ("1", "1")
    );
    assert!(ack.error_detail.is_none(), "{:?}", ack.error_detail);
    let rls = starting.await.unwrap();
    let mut client = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();
    assert_eq!(call(&mut client, "d", "user", "a").await, (Code::Ok, 3));
    assert_eq!(call(&mut client, "d", "user", "a").await, (Code::Ok, 3));

    // An update: a new domain beside the same limit; user=a's two hits stay.
    xds.push(
        "2",
        &[
            config("users", "d", "user", 3, MINUTE),
            config("paths", "e", "path", 1, MINUTE),
        ],
    );
    let ack = xds.next().await;
    assert_eq!(
        (ack.version_info.as_str(), ack.response_nonce.as_str()),
        ("2", "2")
    );
    assert!(ack.error_detail.is_none(), "{:?}", ack.error_detail);
    assert_eq!(call(&mut client, "d", "user", "a").await, (Code::Ok, 3));
    assert_eq!(
        call(&mut client, "d", "user", "a").await,
        (Code::OverLimit, 3)
    );
    assert_eq!(call(&mut client, "e", "path", "/").await, (Code::Ok, 1));

    // A bad update (no unit): NACKed with the last good version and the
    // error; the config in force still answers.
    xds.push(
        "3",
        &[
            config("users", "d", "user", 100, 0),
            config("paths", "e", "path", 1, MINUTE),
        ],
    );
    let nack = xds.next().await;
    assert_eq!(
        (nack.version_info.as_str(), nack.response_nonce.as_str()),
        ("2", "3")
    );
    let detail = nack.error_detail.expect("a NACK carries error_detail");
    assert_eq!(detail.code, tonic::Code::InvalidArgument as i32);
    assert!(
        detail.message.contains("xds/users") && detail.message.contains("unit"),
        "{}",
        detail.message
    );
    assert_eq!(
        call(&mut client, "d", "user", "a").await,
        (Code::OverLimit, 3)
    );
    assert_eq!(
        call(&mut client, "e", "path", "/").await,
        (Code::OverLimit, 1)
    );
    assert_eq!(call(&mut client, "d", "user", "b").await, (Code::Ok, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn force_start_serves_an_empty_config_then_connects_when_the_server_comes() {
    let port = free_port();
    let mut env = xds_env(port);
    env.push(("FORCE_START_WITHOUT_INITIAL_CONFIG", "true".into()));
    // No xDS server yet: the RLS starts anyway, with no domain.
    let rls = start_rls(env).await.await.unwrap();
    let mut client = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();
    assert_eq!(call(&mut client, "d", "user", "a").await, (Code::Ok, 0));

    // The server appears: the client's retries reach it, and its config
    // is put in force.
    let mut xds = Xds::start(port).await;
    xds.push("7", &[config("users", "d", "user", 1, MINUTE)]);
    let sub = xds.next().await;
    assert_eq!(sub.type_url, TYPE_URL);
    let ack = xds.next().await;
    assert_eq!(ack.version_info, "7");
    assert!(ack.error_detail.is_none(), "{:?}", ack.error_detail);
    assert_eq!(call(&mut client, "d", "user", "a").await, (Code::Ok, 1));
    assert_eq!(
        call(&mut client, "d", "user", "a").await,
        (Code::OverLimit, 1)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn xds_over_mutual_tls() {
    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
    let pki = limiter_test_support::tls::TestPki::new("xds");
    let read = |p: &std::path::PathBuf| std::fs::read(p).unwrap();
    // The server asks for a client certificate signed by the test CA.
    let server_tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(
            read(&pki.server_cert),
            read(&pki.server_key),
        ))
        .client_ca_root(Certificate::from_pem(read(&pki.ca)));
    let port = free_port();
    let mut xds = Xds::start_with(port, Some(server_tls)).await;
    xds.push("1", &[config("users", "d", "user", 1, MINUTE)]);
    let mut env = xds_env(port);
    let path = |p: &std::path::PathBuf| p.display().to_string();
    env.extend([
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true".into()),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", path(&pki.ca)),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", path(&pki.client_cert)),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", path(&pki.client_key)),
        // The certificate names localhost; the URL is an address.
        ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "localhost".into()),
    ]);
    let rls = start_rls(env).await.await.unwrap();
    let sub = xds.next().await;
    assert_eq!(sub.node.unwrap().id, "test-node");
    let ack = xds.next().await;
    assert_eq!(ack.version_info, "1");
    let mut client = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();
    assert_eq!(call(&mut client, "d", "user", "a").await, (Code::Ok, 1));
    assert_eq!(
        call(&mut client, "d", "user", "a").await,
        (Code::OverLimit, 1)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_stream_is_reopened_with_the_last_accepted_version() {
    let port = free_port();
    let mut xds = Xds::start(port).await;
    xds.push("1", &[config("users", "d", "user", 2, MINUTE)]);
    let rls = start_rls(xds_env(port)).await.await.unwrap();
    assert!(
        xds.next().await.version_info.is_empty(),
        "the first subscription"
    );
    assert_eq!(xds.next().await.version_info, "1");
    let mut client = RateLimitClient::connect(format!("http://{}", rls.grpc))
        .await
        .unwrap();
    assert_eq!(call(&mut client, "d", "user", "a").await, (Code::Ok, 2));

    // The stream fails: a new one says what is in force, nonce unset.
    xds.break_streams();
    let again = xds.next().await;
    assert_eq!(
        (again.version_info.as_str(), again.response_nonce.as_str()),
        ("1", "")
    );
    assert_eq!(again.type_url, TYPE_URL);
    // The server resends its snapshot on the new stream; then an update.
    assert_eq!(xds.next().await.version_info, "1");
    xds.push("2", &[config("users", "d", "user", 2, MINUTE)]);
    let ack = xds.next().await;
    assert_eq!(
        (ack.version_info.as_str(), ack.response_nonce.as_str()),
        ("2", "2")
    );
    // Counted across the reconnect: a's first hit stays.
    assert_eq!(call(&mut client, "d", "user", "a").await, (Code::Ok, 2));
    assert_eq!(
        call(&mut client, "d", "user", "a").await,
        (Code::OverLimit, 2)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn envoy_limits_by_the_config_the_xds_server_pushes() {
    let port = free_port();
    let mut xds = Xds::start(port).await;
    xds.push("1", &[config("users", "test", "user", 2, MINUTE)]);
    let rls = start_rls(xds_env(port)).await.await.unwrap();
    let grpc = rls.grpc.port();
    // failure_mode_deny: a failed call is a 500, never a silent 200.
    let envoy = tokio::task::spawn_blocking(move || {
        support::envoy_in_front(support::upstream(), Some(grpc), true)
    })
    .await
    .unwrap();
    let statuses = |envoy: &support::Envoy, user: &str, n: usize| -> Vec<u16> {
        tokio::task::block_in_place(|| {
            (0..n)
                .map(|_| envoy.get(&[("x-user", user)]).status)
                .collect()
        })
    };
    assert_eq!(statuses(&envoy, "a", 3), [200, 200, 429]);

    xds.push("2", &[config("users", "test", "user", 3, MINUTE)]);
    while xds.next().await.version_info != "2" {}
    assert_eq!(statuses(&envoy, "b", 4), [200, 200, 200, 429]);
}
