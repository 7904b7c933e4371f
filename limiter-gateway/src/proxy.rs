//! [`Proxy`]: the tower service that forwards one request to its upstream
//! and streams the answer back.
//!
//! Per request: pick the upstream in the route table (the workspace's one
//! matcher: segment boundaries, the longest prefix wins), rewrite the URI
//! to it (base path + the request's normal path and query), strip
//! hop-by-hop headers and append the forwarding ones (see `forward`), hand
//! it to that upstream's pool (module `upstream`: an address picked by the
//! balancer, ejected and unhealthy ones skipped, a keep-alive client per
//! address, HTTP/1.1 or h2, TLS or not) with the request body as it
//! arrives, and wait for the response head at most `timeouts.request`.
//! An `Upgrade` request becomes a tunnel when the upstream answers `101`
//! (module `upgrade`). The response body is handed to
//! hyper as the upstream sends it: neither body is ever buffered whole.
//!
//! Failures become RFC 9457 problem documents (`application/problem+json`):
//! connect refused or reset, or the upstream closing before its head, `502`;
//! no head within the request timeout or no TCP connection within the
//! connect timeout, `504`; a path no upstream serves, `404`. The service
//! never fails (`Error = Infallible`).
//!
//! A request whose *client* body broke (a bad chunk size, an upload cut
//! short) is the client's error, not the upstream's: `400` (if the client
//! is still there to read it) and `gateway_client_errors_total{kind}`,
//! never an upstream error. Responses carry the gateway's own HTTP version
//! (RFC 9110 §6.2), whatever the upstream's status line said.
//!
//! Metrics: `gateway_upstream_responses_total{upstream,class}` (`1xx`..`5xx`),
//! `gateway_upstream_errors_total{upstream,kind}` (`connect`, `timeout`,
//! `protocol`), `gateway_upstream_latency_seconds{upstream}` (to the head).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use arc_swap::ArcSwap;
use http::uri::PathAndQuery;
use http::{Request, Response, StatusCode, Uri};
use http_body_util::Either;
use hyper::body::Incoming;
use limiter_tower::PeerAddr;
use tower_service::Service;

use crate::body::ClientBody;
use crate::config::{GatewayConfig, GatewayConfigError, Upstream};
use crate::forward::{ClientHop, add_forwarding};
use crate::front::ForwardPath;
use crate::hop_by_hop::strip_hop_by_hop;
pub use crate::reply::{ProxyBody, problem};
use crate::upstream::Balancer;
use limiter_config::RouteTable;

/// The metric handles of one upstream, registered once (a per-request
/// `counter!` with labels would hash them on every request).
struct UpstreamMetrics {
    /// By status class: 1xx to 5xx.
    responses: [metrics::Counter; 5],
    latency: metrics::Histogram,
    connect: metrics::Counter,
    timeout: metrics::Counter,
    protocol: metrics::Counter,
}

impl UpstreamMetrics {
    fn new(name: &str) -> UpstreamMetrics {
        let class = |c: &'static str| metrics::counter!("gateway_upstream_responses_total", "upstream" => name.to_owned(), "class" => c);
        let error = |k: &'static str| metrics::counter!("gateway_upstream_errors_total", "upstream" => name.to_owned(), "kind" => k);
        UpstreamMetrics {
            responses: [
                class("1xx"),
                class("2xx"),
                class("3xx"),
                class("4xx"),
                class("5xx"),
            ],
            latency: metrics::histogram!("gateway_upstream_latency_seconds", "upstream" => name.to_owned()),
            connect: error("connect"),
            timeout: error("timeout"),
            protocol: error("protocol"),
        }
    }
}

struct Shared {
    config: GatewayConfig,
    /// The upstreams by prefix (the workspace's one matcher), each an
    /// index into `balancers` and `metrics`.
    routes: RouteTable<usize>,
    /// One pool per upstream: its addresses, balancing, ejection and
    /// health checks.
    balancers: Vec<Arc<Balancer>>,
    metrics: Vec<UpstreamMetrics>,
}

/// The proxy service; clones share the client pool and the configuration.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<ArcSwap<Shared>>,
    /// The forwarding values of the one connection this clone serves (see
    /// [`Proxy::for_client`]); without them each request's extensions
    /// (`PeerAddr`, `ClientTls`) are read.
    hop: Option<Arc<ClientHop>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("upstreams", &self.shared.load().config.upstreams)
            .finish()
    }
}

impl Proxy {
    /// A proxy to the upstreams of `config`, with its timeouts; health
    /// checks start on the current tokio runtime, if any.
    ///
    /// # Errors
    ///
    /// An `https://` upstream whose `ca` file cannot be read or whose host
    /// is not a valid TLS server name.
    pub fn new(config: GatewayConfig) -> Result<Proxy, GatewayConfigError> {
        Ok(Proxy {
            shared: Arc::new(ArcSwap::from_pointee(Shared::new(config)?)),
            hop: None,
        })
    }

    /// This proxy for the requests of one client connection from `peer`
    /// (over TLS if `https`): its forwarding values are computed here, once.
    pub(crate) fn for_client(&self, peer: SocketAddr, https: bool) -> Proxy {
        let proto = if https { "https" } else { "http" };
        Proxy {
            shared: Arc::clone(&self.shared),
            hop: Some(Arc::new(ClientHop::new(peer.ip(), proto))),
        }
    }

    /// Puts `config`'s upstreams (new pools, their health checks started)
    /// and timeouts in force for the requests that start from now on;
    /// requests in flight finish on the old pools, whose health checks stop
    /// when the last of them ends.
    ///
    /// # Errors
    ///
    /// As [`Proxy::new`]; the upstreams in force stay.
    pub fn reconfigure(&self, config: GatewayConfig) -> Result<(), GatewayConfigError> {
        self.shared.store(Arc::new(Shared::new(config)?));
        Ok(())
    }
}

impl Shared {
    fn new(config: GatewayConfig) -> Result<Shared, GatewayConfigError> {
        let balancers = config
            .upstreams
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let b = Balancer::new(u, &config.timeouts).map_err(|reason| {
                    GatewayConfigError::Invalid {
                        field: format!("upstream[{i}]"),
                        reason,
                    }
                })?;
                crate::upstream::health::spawn(&b);
                Ok(b)
            })
            .collect::<Result<Vec<_>, GatewayConfigError>>()?;
        let metrics = config
            .upstreams
            .iter()
            .map(|u| UpstreamMetrics::new(&u.name))
            .collect();
        Ok(Shared {
            routes: config.routes(),
            config,
            balancers,
            metrics,
        })
    }
}

/// The request's URI on `upstream`.
fn upstream_uri(upstream: &Upstream, incoming: &Uri, forward: Option<&ForwardPath>) -> Option<Uri> {
    let base = upstream.url.path().trim_end_matches('/');
    let pq = match forward {
        Some(f) => f.0.clone(),
        None => incoming
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/")),
    };
    // Without a base path the request's own (parsed) path and query go as
    // they are: no copy and no second parse (about 900 instructions).
    let pq = if base.is_empty() {
        pq
    } else {
        PathAndQuery::try_from(format!("{base}{}", pq.as_str())).ok()?
    };
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(upstream.url.scheme()?.clone());
    parts.authority = Some(upstream.url.authority()?.clone());
    parts.path_and_query = Some(pq);
    Uri::from_parts(parts).ok()
}

/// The index of `status`'s class in [`UpstreamMetrics::responses`].
fn class(status: StatusCode) -> usize {
    usize::from(status.as_u16() / 100).clamp(1, 5) - 1
}

/// Whether `error`'s chain holds an I/O timeout (a connect timeout).
fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut e = Some(error);
    while let Some(err) = e {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return true;
        }
        if err.to_string().contains("timed out") {
            return true;
        }
        e = err.source();
    }
    false
}

impl Service<Request<Incoming>> for Proxy {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ProxyBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        let shared = self.shared.load_full();
        let hop = self.hop.clone();
        Box::pin(async move { Ok(forward(&shared, hop.as_deref(), request).await) })
    }
}

async fn forward(
    shared: &Shared,
    hop: Option<&ClientHop>,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    let config = &shared.config;
    let Some(&index) = shared.routes.get(request.method(), request.uri().path()) else {
        return problem(StatusCode::NOT_FOUND, "no upstream serves this path");
    };
    let upstream = &config.upstreams[index];
    let mut request = request;
    let upgrade = crate::upgrade::take(&mut request);
    let (mut parts, body) = request.into_parts();
    let Some(uri) = upstream_uri(upstream, &parts.uri, parts.extensions.get::<ForwardPath>())
    else {
        return problem(
            StatusCode::BAD_REQUEST,
            "the request target cannot be forwarded",
        );
    };
    strip_hop_by_hop(&mut parts.headers);
    let own;
    let hop = match hop {
        Some(hop) => hop,
        None => {
            let peer = parts
                .extensions
                .get::<PeerAddr>()
                .map_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)), |p| p.0);
            let tls = parts.extensions.get::<crate::tls::ClientTls>().is_some();
            own = ClientHop::new(peer.ip(), if tls { "https" } else { "http" });
            &own
        }
    };
    add_forwarding(
        &mut parts.headers,
        hop,
        parts.version,
        &parts.uri,
        &upstream.url,
        upstream.rewrite_host,
    );
    if let Some(u) = &upgrade {
        u.restore_request(&mut parts.headers);
    }
    // Over h2 the pool drops `Host` (module `upstream`).
    let balancer = &shared.balancers[index];
    let (body, fault) = ClientBody::new(body);
    // An empty body is sent as `Empty`: replayable on another address.
    let body = if http_body::Body::is_end_stream(&body) {
        Either::Right(http_body_util::Empty::new())
    } else {
        Either::Left(body)
    };
    let mut out = Request::from_parts(parts, body);
    *out.uri_mut() = uri;
    // The upstream hop is HTTP/1.1 (or HTTP/2 as configured) whatever the
    // client spoke; the pool sets the version it negotiated.
    *out.version_mut() = http::Version::HTTP_11;
    let name = &upstream.name;
    let m = &shared.metrics[index];
    let started = Instant::now();
    let result = tokio::time::timeout(config.timeouts.request, balancer.send(out)).await;
    match result {
        Ok(Ok(mut response)) => {
            m.latency.record(started.elapsed().as_secs_f64());
            m.responses[class(response.status())].increment(1);
            let tunnel = upgrade.and_then(|u| u.accept(&mut response));
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            // The gateway's own version (hyper writes HTTP/1.1 or h2).
            parts.version = http::Version::HTTP_11;
            if let Some(protocol) = tunnel {
                crate::upgrade::restore_response(&mut parts.headers, protocol);
            }
            Response::from_parts(parts, Either::Left(body))
        }
        Ok(Err(error)) if fault.get().is_some() => {
            // Counted by the body when it broke.
            tracing::debug!(upstream = %name, error = %error, "client body failed");
            problem(
                StatusCode::BAD_REQUEST,
                "the request body is malformed or was cut short",
            )
        }
        Ok(Err(error)) => {
            let (status, counter, detail) = if error.is_connect() && timed_out(&error) {
                (
                    StatusCode::GATEWAY_TIMEOUT,
                    &m.timeout,
                    format!(
                        "upstream {name}: no connection within {:?}",
                        config.timeouts.connect
                    ),
                )
            } else if error.is_connect() {
                (
                    StatusCode::BAD_GATEWAY,
                    &m.connect,
                    format!("upstream {name}: connection failed"),
                )
            } else {
                (
                    StatusCode::BAD_GATEWAY,
                    &m.protocol,
                    format!("upstream {name}: no valid response"),
                )
            };
            tracing::warn!(upstream = %name, error = %error, ?status, "upstream request failed");
            counter.increment(1);
            problem(status, &detail)
        }
        Err(_) => {
            m.timeout.increment(1);
            problem(
                StatusCode::GATEWAY_TIMEOUT,
                &format!(
                    "upstream {name}: no response within {:?}",
                    config.timeouts.request
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_on_the_upstream_keeps_path_and_query() {
        let up = Upstream {
            name: "a".into(),
            url: "http://10.0.0.1:3000/base/".parse().unwrap(),
            prefix: "/".into(),
            rewrite_host: false,
            pool: crate::upstream::PoolConfig::default(),
        };
        let incoming: Uri = "/x/y?q=1".parse().unwrap();
        assert_eq!(
            upstream_uri(&up, &incoming, None).unwrap(),
            "http://10.0.0.1:3000/base/x/y?q=1"
        );
        let up = Upstream {
            url: "http://10.0.0.1:3000/".parse().unwrap(),
            ..up
        };
        assert_eq!(
            upstream_uri(&up, &incoming, None).unwrap(),
            "http://10.0.0.1:3000/x/y?q=1"
        );
        let forward = ForwardPath(PathAndQuery::from_static("/x;v=1/y?q=1"));
        assert_eq!(
            upstream_uri(&up, &incoming, Some(&forward)).unwrap(),
            "http://10.0.0.1:3000/x;v=1/y?q=1"
        );
    }
}
