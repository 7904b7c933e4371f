//! `CONFIG_TYPE=GRPC_XDS_SOTW`: the rate-limit config pushed by an xDS
//! management server (Envoy Gateway's), as envoyproxy/ratelimit's xDS
//! client takes it.
//!
//! The client opens the aggregated discovery stream
//! (`envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources`,
//! state of the world) and subscribes to every resource of
//! [`TYPE_URL`](crate::proto::config::TYPE_URL) for its node
//! (`CONFIG_GRPC_XDS_NODE_ID`). Guarantees:
//!
//! * **A response is the whole config.** Its `RateLimitConfig` resources
//!   are turned into their YAML form (as their `ConfigXdsProtoToYaml`
//!   does) and checked by the same reader as files, one resource standing
//!   for one file named `xds/<name>`. If every one is valid the rule set is
//!   swapped in at once ([`RateLimiter::set_rules`], as a file reload does:
//!   counters are keyed by descriptor and limit, so every count survives)
//!   and the response is ACKed (its version and nonce).
//! * **A bad response is NACKed**: a request with the last accepted
//!   version, the response's nonce and `error_detail` (`INVALID_ARGUMENT`,
//!   the reader's errors as text); the rule set in force stays.
//! * **Reconnection**: a connection that cannot be made is tried again
//!   every `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL`; a stream that
//!   ends or fails is reopened after a backoff from
//!   `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL`, doubling up to
//!   `XDS_CLIENT_BACKOFF_MAX_INTERVAL`, with ±50% jitter (their random
//!   factor), reset once a stream has delivered a response. A new stream
//!   sends the last accepted version, so the server need not resend.
//! * The first accepted config is announced on the returned watch channel
//!   (the binary waits for it unless `FORCE_START_WITHOUT_INITIAL_CONFIG`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tokio::sync::{mpsc, watch};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::backend::Backend;
use crate::config::RuleSet;
use crate::proto::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use crate::proto::config::{RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, TYPE_URL};
use crate::proto::{DiscoveryRequest, DiscoveryResponse, Kind, Node, RpcStatus, Struct, Value};
use crate::service::RateLimiter;

/// Where the xDS server is and how to talk to it (their `CONFIG_GRPC_XDS_*`
/// and `XDS_CLIENT_*` variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdsSettings {
    /// `CONFIG_GRPC_XDS_SERVER_URL`: `host:port` (or a full `http://` or
    /// `https://` URI).
    pub server_url: String,
    /// `CONFIG_GRPC_XDS_NODE_ID`.
    pub node_id: String,
    /// `CONFIG_GRPC_XDS_NODE_METADATA`: `key=value` pairs sent as the node's
    /// metadata.
    pub node_metadata: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS`: gRPC metadata on the
    /// stream (`key:value` pairs).
    pub headers: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_SERVER_USE_TLS` and its files.
    pub tls: Option<XdsTls>,
    /// `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` (3s).
    pub connect_retry: Duration,
    /// `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL` (10s).
    pub backoff_initial: Duration,
    /// `XDS_CLIENT_BACKOFF_MAX_INTERVAL` (60s).
    pub backoff_max: Duration,
    /// `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES` (tonic's 4 MiB when unset).
    pub max_message_size: Option<usize>,
}

/// TLS to the xDS server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdsTls {
    /// `CONFIG_GRPC_XDS_SERVER_TLS_CACERT` (the system's roots without it).
    pub ca: Option<PathBuf>,
    /// `CONFIG_GRPC_XDS_CLIENT_TLS_CERT` and `..._KEY`: the client
    /// certificate, when both are set.
    pub client: Option<(PathBuf, PathBuf)>,
    /// `CONFIG_GRPC_XDS_SERVER_TLS_SAN`: the name the server's certificate
    /// must carry (the URL's host without it).
    pub san: Option<String>,
}

/// Why a connection could not be set up (the files are read at start).
#[derive(Debug)]
pub struct XdsError(String);

impl core::fmt::Display for XdsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for XdsError {}

/// The endpoint `settings` describe, TLS files read.
fn endpoint(settings: &XdsSettings) -> Result<Endpoint, XdsError> {
    let url = if settings.server_url.contains("://") {
        settings.server_url.clone()
    } else if settings.tls.is_some() {
        format!("https://{}", settings.server_url)
    } else {
        format!("http://{}", settings.server_url)
    };
    let bad =
        |e: &dyn core::fmt::Display| XdsError(format!("CONFIG_GRPC_XDS_SERVER_URL={url}: {e}"));
    let mut endpoint = Endpoint::from_shared(url.clone())
        .map_err(|e| bad(&e))?
        .connect_timeout(settings.connect_retry.max(Duration::from_secs(1)))
        .tcp_nodelay(true);
    if let Some(tls) = &settings.tls {
        let read = |name: &str, path: &PathBuf| {
            std::fs::read(path).map_err(|e| XdsError(format!("{name}={}: {e}", path.display())))
        };
        let mut config = ClientTlsConfig::new();
        config = match &tls.ca {
            Some(ca) => config.ca_certificate(Certificate::from_pem(read(
                "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
                ca,
            )?)),
            None => config.with_native_roots(),
        };
        if let Some((cert, key)) = &tls.client {
            config = config.identity(Identity::from_pem(
                read("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", cert)?,
                read("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", key)?,
            ));
        }
        if let Some(san) = &tls.san {
            config = config.domain_name(san.clone());
        }
        endpoint = endpoint.tls_config(config).map_err(|e| bad(&e))?;
    }
    Ok(endpoint)
}

/// Starts the client (inside the tokio runtime); the watch turns true once
/// a first config is in force. It runs until the process ends.
///
/// # Errors
///
/// A URL that does not parse or a TLS file that cannot be read.
pub fn spawn<B: Backend>(
    limiter: Arc<RateLimiter<B>>,
    settings: XdsSettings,
) -> Result<watch::Receiver<bool>, XdsError> {
    let endpoint = endpoint(&settings)?;
    let (loaded_tx, loaded) = watch::channel(false);
    tokio::spawn(async move {
        let mut client = Client {
            limiter,
            settings,
            accepted: String::new(),
            loaded: loaded_tx,
        };
        client.run(endpoint).await;
    });
    Ok(loaded)
}

struct Client<B> {
    limiter: Arc<RateLimiter<B>>,
    settings: XdsSettings,
    /// The version of the config in force (empty before the first).
    accepted: String,
    loaded: watch::Sender<bool>,
}

impl<B: Backend> Client<B> {
    async fn run(&mut self, endpoint: Endpoint) {
        let mut backoff = self.settings.backoff_initial;
        loop {
            let channel = match endpoint.connect().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(url = %self.settings.server_url, error = %e, "xDS server not reachable");
                    tokio::time::sleep(self.settings.connect_retry).await;
                    continue;
                }
            };
            tracing::info!(url = %self.settings.server_url, "connected to the xDS server");
            let mut answered = false;
            match self.stream(channel, &mut answered).await {
                Ok(()) => tracing::warn!("the xDS server ended the stream"),
                Err(e) => tracing::warn!(error = %e, "xDS stream failed"),
            }
            if answered {
                backoff = self.settings.backoff_initial;
            }
            let wait = jitter(backoff);
            tracing::info!(?wait, "reopening the xDS stream after a backoff");
            tokio::time::sleep(wait).await;
            backoff = backoff.saturating_mul(2).min(self.settings.backoff_max);
        }
    }

    fn request(&self, nonce: String, error: Option<String>) -> DiscoveryRequest {
        let metadata = self
            .settings
            .node_metadata
            .iter()
            .map(|(k, v)| {
                let value = Value {
                    kind: Some(Kind::StringValue(v.clone())),
                };
                (k.clone(), value)
            })
            .collect();
        DiscoveryRequest {
            version_info: self.accepted.clone(),
            node: Some(Node {
                id: self.settings.node_id.clone(),
                metadata: Some(Struct { fields: metadata }),
                ..Node::default()
            }),
            type_url: TYPE_URL.to_owned(),
            response_nonce: nonce,
            error_detail: error.map(|message| RpcStatus {
                code: tonic::Code::InvalidArgument as i32,
                message,
                details: Vec::new(),
            }),
            ..DiscoveryRequest::default()
        }
    }

    /// One stream: subscribe, then apply and answer every response until it
    /// ends; `answered` turns true with the first response.
    async fn stream(&mut self, channel: Channel, answered: &mut bool) -> Result<(), tonic::Status> {
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        if let Some(max) = self.settings.max_message_size {
            client = client.max_decoding_message_size(max);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        // The receiver of `tx` lives in the request stream: a send fails
        // only once the stream is gone, which `message()` reports below.
        let _ = tx.send(self.request(String::new(), None));
        let requests =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
        let mut request = tonic::Request::new(requests);
        for (k, v) in &self.settings.headers {
            match (
                tonic::metadata::MetadataKey::from_bytes(k.as_bytes()),
                v.parse(),
            ) {
                (Ok(k), Ok(v)) => {
                    request.metadata_mut().insert(k, v);
                }
                _ => {
                    tracing::warn!(header = %k, "xDS header not sent: not a valid gRPC metadata pair")
                }
            }
        }
        let mut responses = client
            .stream_aggregated_resources(request)
            .await?
            .into_inner();
        while let Some(response) = responses.message().await? {
            *answered = true;
            let answer = self.apply(&response);
            let _ = tx.send(answer);
        }
        Ok(())
    }

    /// Puts `response` in force or refuses it; the ACK or NACK to send.
    fn apply(&mut self, response: &DiscoveryResponse) -> DiscoveryRequest {
        match rules_of(response) {
            Ok(rules) => {
                tracing::info!(
                    version = %response.version_info,
                    domains = rules.domains().count(),
                    "xDS config applied"
                );
                self.limiter.set_rules(rules);
                self.limiter.recorder().service("config_load_success");
                self.accepted = response.version_info.clone();
                self.loaded.send_replace(true);
                self.request(response.nonce.clone(), None)
            }
            Err(error) => {
                tracing::error!(
                    version = %response.version_info,
                    "xDS config refused, the previous one stays in force:\n{error}"
                );
                self.limiter.recorder().service("config_load_error");
                self.request(response.nonce.clone(), Some(error))
            }
        }
    }
}

/// `d` scaled by a factor in [0.5, 1.5) (their backoff's random factor 0.5).
fn jitter(d: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded per instance from the OS: a fresh random word
    // without a random-number crate.
    let word = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let unit = (word >> 11) as f64 / (1u64 << 53) as f64;
    d.mul_f64(0.5 + unit)
}

/// The rule set of a response: every resource a valid `RateLimitConfig`.
///
/// # Errors
///
/// What is wrong, as text for the NACK's `error_detail`.
pub fn rules_of(response: &DiscoveryResponse) -> Result<RuleSet, String> {
    if response.type_url != TYPE_URL {
        return Err(format!(
            "type_url {:?}: only {TYPE_URL} is subscribed to",
            response.type_url
        ));
    }
    let mut files = Vec::with_capacity(response.resources.len());
    for (i, any) in response.resources.iter().enumerate() {
        if any.type_url != TYPE_URL {
            return Err(format!(
                "resources[{i}]: type_url {:?} is not {TYPE_URL}",
                any.type_url
            ));
        }
        let config = RateLimitConfig::decode(any.value.as_slice())
            .map_err(|e| format!("resources[{i}]: not a RateLimitConfig: {e}"))?;
        let name = if config.name.is_empty() {
            format!("resource-{i}")
        } else {
            config.name.clone()
        };
        files.push((PathBuf::from("xds").join(name), yaml_of(&config)));
    }
    RuleSet::from_files(files).map_err(|e| e.to_string())
}

/// The config as their YAML file would write it (in YAML's JSON form, one
/// field a line so errors point at the field).
pub fn yaml_of(config: &RateLimitConfig) -> String {
    let root = serde_json::json!({
        "domain": config.domain,
        "descriptors": config.descriptors.iter().map(descriptor).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&root).unwrap_or_default()
}

fn descriptor(d: &RateLimitDescriptor) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("key".into(), d.key.clone().into());
    if !d.value.is_empty() {
        m.insert("value".into(), d.value.clone().into());
    }
    if let Some(p) = &d.rate_limit {
        m.insert("rate_limit".into(), policy(p));
    }
    if !d.descriptors.is_empty() {
        m.insert(
            "descriptors".into(),
            d.descriptors.iter().map(descriptor).collect(),
        );
    }
    for (name, set) in [
        ("shadow_mode", d.shadow_mode),
        ("detailed_metric", d.detailed_metric),
        ("quota_mode", d.quota_mode),
    ] {
        if set {
            m.insert(name.into(), true.into());
        }
    }
    if let Some(md) = &d.metadata {
        m.insert("metadata".into(), crate::json::struct_json(md));
    }
    serde_json::Value::Object(m)
}

fn policy(p: &RateLimitPolicy) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    // UNKNOWN (0) is theirs for "no unit": absent, as `unlimited` wants.
    if p.unit != 0 {
        let unit = crate::proto::config::RateLimitUnit::try_from(p.unit)
            .map_or_else(|_| p.unit.to_string(), |u| u.as_str_name().to_owned());
        m.insert("unit".into(), unit.into());
    }
    m.insert("requests_per_unit".into(), p.requests_per_unit.into());
    if p.unlimited {
        m.insert("unlimited".into(), true.into());
    }
    if !p.name.is_empty() {
        m.insert("name".into(), p.name.clone().into());
    }
    if !p.replaces.is_empty() {
        m.insert(
            "replaces".into(),
            p.replaces
                .iter()
                .map(|r| serde_json::json!({ "name": r.name }))
                .collect(),
        );
    }
    serde_json::Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Any;
    use crate::proto::config::RateLimitReplace;

    fn response(configs: &[RateLimitConfig]) -> DiscoveryResponse {
        DiscoveryResponse {
            type_url: TYPE_URL.into(),
            resources: configs
                .iter()
                .map(|c| Any {
                    type_url: TYPE_URL.into(),
                    value: c.encode_to_vec(),
                })
                .collect(),
            ..DiscoveryResponse::default()
        }
    }

    fn policy(unit: i32, n: u32) -> Option<RateLimitPolicy> {
        Some(RateLimitPolicy {
            unit,
            requests_per_unit: n,
            ..RateLimitPolicy::default()
        })
    }

    /// Every field of their resource lands where their YAML puts it: the
    /// rule set equals the one read from the YAML file they would write.
    #[test]
    fn a_resource_reads_as_their_yaml_file() {
        let config = RateLimitConfig {
            name: "c".into(),
            domain: "d".into(),
            descriptors: vec![
                RateLimitDescriptor {
                    key: "user".into(),
                    rate_limit: policy(2, 5),
                    shadow_mode: true,
                    descriptors: vec![RateLimitDescriptor {
                        key: "path".into(),
                        value: "/a".into(),
                        rate_limit: Some(RateLimitPolicy {
                            unlimited: true,
                            ..RateLimitPolicy::default()
                        }),
                        ..RateLimitDescriptor::default()
                    }],
                    ..RateLimitDescriptor::default()
                },
                RateLimitDescriptor {
                    key: "plan".into(),
                    value: "gold".into(),
                    rate_limit: Some(RateLimitPolicy {
                        unit: 7,
                        requests_per_unit: 9,
                        name: "gold".into(),
                        replaces: vec![RateLimitReplace { name: "x".into() }],
                        ..RateLimitPolicy::default()
                    }),
                    quota_mode: true,
                    detailed_metric: true,
                    metadata: Some(Struct {
                        fields: [(
                            "tier".to_owned(),
                            Value {
                                kind: Some(Kind::StringValue("gold".into())),
                            },
                        )]
                        .into(),
                    }),
                    ..RateLimitDescriptor::default()
                },
            ],
        };
        let yaml = "domain: d
descriptors:
  - key: user
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
    descriptors:
      - {key: path, value: /a, rate_limit: {unlimited: true}}
  - key: plan
    value: gold
    quota_mode: true
    detailed_metric: true
    metadata: {tier: gold}
    rate_limit: {unit: week, requests_per_unit: 9, name: gold, replaces: [{name: x}]}
";
        let from_xds = rules_of(&response(&[config])).unwrap();
        let from_file = RuleSet::from_files(vec![("f.yaml".into(), yaml.into())]).unwrap();
        assert_eq!(from_xds.dump(), from_file.dump());
        let find = |rules: &RuleSet| {
            let m = rules
                .find(
                    "d",
                    &[crate::proto::Entry {
                        key: "plan".into(),
                        value: "gold".into(),
                    }],
                    None,
                )
                .unwrap();
            (m.rule.as_ref().clone(), m.metadata.clone())
        };
        assert_eq!(find(&from_xds), find(&from_file));
    }

    #[test]
    fn wrong_types_and_bad_configs_are_errors_that_say_where() {
        let mut r = response(&[]);
        assert!(rules_of(&r).unwrap().is_empty(), "no resource: no domain");
        r.resources.push(Any {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            value: Vec::new(),
        });
        assert!(rules_of(&r).unwrap_err().contains("resources[0]"));
        let two = |name: &str| RateLimitConfig {
            name: name.into(),
            domain: "same".into(),
            descriptors: Vec::new(),
        };
        let e = rules_of(&response(&[two("a"), two("b")])).unwrap_err();
        assert!(e.contains("xds/b"), "{e}");
    }
}
