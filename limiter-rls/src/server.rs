//! The three listeners and their lifecycle: gRPC (`ShouldRateLimit` and
//! `grpc.health.v1.Health`), HTTP (`/healthcheck`, `POST /json`) and debug
//! (`/rlconfig`, `/metrics`), with hot reload and graceful shutdown; TLS
//! on the gRPC listener when asked (`GRPC_SERVER_USE_TLS`, through [`run`](crate::run)).
//!
//! Shutdown (SIGTERM or SIGINT): health turns NOT_SERVING and
//! `/healthcheck` answers 500 at once, so balancers and Envoy's health
//! checks drain this replica; for the drain delay
//! ([`Shared::drain_delay`], `RLS_DRAIN_DELAY`) the listeners still accept
//! and answer; then they stop accepting, calls in flight finish, and the
//! process exits 0.
//!
//! Every accepted socket has `TCP_NODELAY`, so an answer never waits for
//! the client's acknowledgement of the one before.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use crate::backend::CounterStore;
use crate::grpc::RateLimitServer;
use crate::proto::Code;
use crate::service::RateLimitService;
use crate::tls::TlsListener;

/// Shared state of the HTTP handlers.
#[derive(Debug)]
pub struct Shared<B> {
    /// The service.
    pub limiter: Arc<RateLimitService<B>>,
    /// False once shutdown began.
    pub healthy: AtomicBool,
    /// The Prometheus handle `/metrics` renders.
    pub metrics: Option<PrometheusHandle>,
    /// How long the listeners keep serving after shutdown began (health
    /// already NOT_SERVING).
    pub drain_delay: std::time::Duration,
}

/// The bound addresses.
#[derive(Debug, Clone, Copy)]
pub struct Addresses {
    /// gRPC.
    pub grpc: SocketAddr,
    /// HTTP.
    pub http: SocketAddr,
    /// Debug.
    pub debug: SocketAddr,
}

async fn healthcheck<B: CounterStore>(State(s): State<Arc<Shared<B>>>) -> Response {
    // Relaxed: a flag read on its own; a request racing the shutdown may
    // see either value.
    if s.healthy.load(Ordering::Relaxed) {
        (StatusCode::OK, "OK").into_response()
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "shutting down").into_response()
    }
}

async fn json<B: CounterStore>(State(s): State<Arc<Shared<B>>>, body: Bytes) -> Response {
    let req = match crate::json::parse_request(&body) {
        Ok(r) => r,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("invalid request: {e}\n")).into_response();
        }
    };
    match s.limiter.should_rate_limit(&req).await {
        Ok(resp) => {
            let status = if resp.overall_code == Code::OverLimit as i32 {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::OK
            };
            let body = crate::json::response_json(&resp).to_string();
            (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(e @ crate::RequestError::Store(_)) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

async fn rlconfig<B: CounterStore>(State(s): State<Arc<Shared<B>>>) -> Response {
    let rules = s.limiter.rules();
    let mut out = rules.dump();
    for (path, text) in rules.files() {
        out.push_str(&format!("\n# {}\n{}", path.display(), text));
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], out).into_response()
}

async fn prometheus<B: CounterStore>(State(s): State<Arc<Shared<B>>>) -> Response {
    let body = s
        .metrics
        .as_ref()
        .map(PrometheusHandle::render)
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// Sets `TCP_NODELAY` on an accepted socket (see `serve`).
fn nodelay(stream: &mut tokio::net::TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set on an accepted socket");
    }
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Binds the listeners and serves until `stop` turns true, then drains
/// (see the module docs); returns the addresses through `bound` as soon as
/// they are bound.
///
/// # Errors
///
/// A listener could not be bound, or a server failed.
pub async fn serve<B: CounterStore>(
    shared: Arc<Shared<B>>,
    addrs: [(String, u16); 3],
    stop: watch::Receiver<bool>,
    bound: tokio::sync::oneshot::Sender<Addresses>,
) -> std::io::Result<()> {
    serve_with_tls(shared, addrs, None, stop, bound).await
}

/// [`serve`], with TLS on the gRPC listener when `grpc_tls` is given.
///
/// # Errors
///
/// A listener could not be bound, or a server failed.
pub(crate) async fn serve_with_tls<B: CounterStore>(
    shared: Arc<Shared<B>>,
    addrs: [(String, u16); 3],
    grpc_tls: Option<Arc<TlsListener>>,
    stop: watch::Receiver<bool>,
    bound: tokio::sync::oneshot::Sender<Addresses>,
) -> std::io::Result<()> {
    let [grpc, http, debug] = addrs;
    let grpc_l = tokio::net::TcpListener::bind((grpc.0.as_str(), grpc.1)).await?;
    let http_l = tokio::net::TcpListener::bind((http.0.as_str(), http.1)).await?;
    let debug_l = tokio::net::TcpListener::bind((debug.0.as_str(), debug.1)).await?;
    let _ = bound.send(Addresses {
        grpc: grpc_l.local_addr()?,
        http: http_l.local_addr()?,
        debug: debug_l.local_addr()?,
    });
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<RateLimitServer<B>>().await;
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;

    let app = Router::new()
        .route("/healthcheck", get(healthcheck::<B>))
        .route("/json", post(json::<B>))
        .with_state(Arc::clone(&shared));
    let admin = Router::new()
        .route("/rlconfig", get(rlconfig::<B>))
        .route("/metrics", get(prometheus::<B>))
        .route("/healthcheck", get(healthcheck::<B>))
        .with_state(Arc::clone(&shared));

    // The drain: unhealthy at once, the listeners closed after the delay.
    let (closing, close) = watch::channel(false);
    let drain = tokio::spawn({
        let shared = Arc::clone(&shared);
        async move {
            stopped(stop).await;
            // Relaxed: the flag stands alone (see `healthcheck`).
            shared.healthy.store(false, Ordering::Relaxed);
            reporter.set_not_serving::<RateLimitServer<B>>().await;
            reporter
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
            tokio::time::sleep(shared.drain_delay).await;
            let _ = closing.send(true);
        }
    });
    // TCP_NODELAY on every accepted socket: without it an answer written
    // while the previous one is unacknowledged waits for the client's
    // delayed acknowledgement (about 40 ms, past Envoy's 20 ms timeout).
    // The builder's own `tcp_nodelay` applies only to sockets it binds.
    let routes = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(RateLimitServer::new(Arc::clone(&shared.limiter)));
    let grpc_server: Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>> =
        match grpc_tls {
            None => Box::pin(routes.serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(grpc_l).with_nodelay(Some(true)),
                stopped(close.clone()),
            )),
            Some(tls) => Box::pin(
                routes.serve_with_incoming_shutdown(tls.incoming(grpc_l), stopped(close.clone())),
            ),
        };
    let http_server =
        axum::serve(http_l.tap_io(nodelay), app).with_graceful_shutdown(stopped(close.clone()));
    let debug_server =
        axum::serve(debug_l.tap_io(nodelay), admin).with_graceful_shutdown(stopped(close));
    let (g, h, d) = tokio::join!(grpc_server, http_server, debug_server);
    drain.abort();
    g.map_err(std::io::Error::other)?;
    h?;
    d?;
    Ok(())
}
