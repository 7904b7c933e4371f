//! `CONFIG_TYPE=GRPC_XDS_SOTW`: the rate-limit config pushed by an xDS
//! management server (Envoy Gateway's), as envoyproxy/ratelimit's xDS
//! client takes it.
//!
//! The client opens the aggregated discovery stream
//! (`envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources`,
//! state of the world) and subscribes to every resource of
//! [`TYPE_URL`] for its node
//! (`CONFIG_GRPC_XDS_NODE_ID`). Guarantees:
//!
//! * **A response is the whole config.** Its `RateLimitConfig` resources
//!   are turned into their YAML form (as their `ConfigXdsProtoToYaml`
//!   does) and checked by the same reader as files, one resource standing
//!   for one file named `xds/<name>`. If every one is valid the rule set is
//!   swapped in at once ([`RateLimitService::set_rules`], as a file reload does:
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

mod resource;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use resource::rules_of;

use crate::backend::CounterStore;
use crate::proto::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use crate::proto::config::TYPE_URL;
use crate::proto::{DiscoveryRequest, DiscoveryResponse, Kind, Node, RpcStatus, Struct, Value};
use crate::service::RateLimitService;

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
pub(crate) struct XdsError(String);

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
pub(crate) fn spawn<B: CounterStore>(
    limiter: Arc<RateLimitService<B>>,
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
    limiter: Arc<RateLimitService<B>>,
    settings: XdsSettings,
    /// The version of the config in force (empty before the first).
    accepted: String,
    loaded: watch::Sender<bool>,
}

impl<B: CounterStore> Client<B> {
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
