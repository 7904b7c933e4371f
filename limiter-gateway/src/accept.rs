//! One proxy listener socket's accept loop and the service of each
//! connection it accepts, on the worker runtime that owns the socket
//! (module `workers`).
//!
//! Each accepted connection (within the listener's and the client's caps,
//! held to the head and idle deadlines: module `conn`; on a TLS listener
//! the rustls handshake, module `tls`, runs first inside those deadlines)
//! is served on a task of that runtime by hyper-util's auto builder
//! (HTTP/1.1 with keep-alive and upgrades, or HTTP/2: h2c with prior
//! knowledge, or negotiated by ALPN, with keep-alive pings) with the
//! stack: the head checks and path normalisation (module `front`) →
//! `PeerAddr` insertion → [`RulesLayer`](limiter_config::RulesLayer) →
//! [`Proxy`](crate::Proxy). The limiter therefore sees the request as the
//! client sent it (its own `X-Forwarded-For`, read only behind a rule's
//! `trusted_proxies`) but on its normal path, before the proxy appends its
//! forwarding headers. A `101` answer turns the connection into a tunnel
//! (module `upgrade`): the deadlines stop there.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use limiter_config::RuleSet;
use limiter_tower::PeerAddr;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower_layer::Layer;
use tower_service::Service;

use crate::body::Tracked;
use crate::conn::{Activity, Backoff, Expiry, Guarded};
use crate::front;
use crate::logs::rule_of;
use crate::proxy::ProxyBody;
use crate::shutdown::{Shutdown, ShutdownWatch};
use crate::state::{Settings, Shared};
use crate::tls::{ClientTls, ServerStream, Terminator};

fn expired(expiry: Expiry) {
    metrics::counter!(
        "gateway_connections_timed_out_total",
        "phase" => match expiry { Expiry::Head => "head", Expiry::Idle => "idle" }
    )
    .increment(1);
}

fn note_refused(shared: &Shared, what: &str, detail: &dyn std::fmt::Display) {
    let mut log = shared
        .refused_log
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(suppressed) = log.due(Instant::now()) {
        tracing::warn!(
            error = %detail,
            more_since_last_line = suppressed,
            "{what} (one line per 5 s)"
        );
    }
}

/// Accepts on `listener` until `stop`, each connection under the caps
/// (`slots`: the listener address's, shared by its workers' sockets) and
/// `graceful` (this worker's).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn accept_loop(
    listener: TcpListener,
    tls: Option<Terminator>,
    rules: RuleSet,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    graceful: Arc<Shutdown>,
    mut stop: watch::Receiver<bool>,
) {
    let layer = rules.layer();
    let mut backoff = Backoff::default();
    let accept_errors = metrics::counter!("gateway_accept_errors_total");
    let refused = metrics::counter!("gateway_connections_refused_total", "reason" => "per_client");
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                accept_errors.increment(1);
                note_refused(&shared, "accept failed; backing off", &e);
                tokio::time::sleep(backoff.failed()).await;
                continue;
            }
        };
        // At the cap, wait here with this one connection: the next ones
        // queue in the backlog. (Taking the slot before accepting would let
        // a worker whose socket is quiet hold it while another's backlog
        // waits: the kernel never moves a connection between sockets.)
        let permit = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        backoff.succeeded();
        let settings = shared.settings.load_full();
        let Some(slot) = shared
            .clients
            .admit(peer.ip(), settings.config.connections.max_per_client)
        else {
            refused.increment(1);
            note_refused(
                &shared,
                "connection refused: the client is at connections.max_per_client",
                &peer.ip(),
            );
            continue;
        };
        let _ = stream.set_nodelay(true);
        let https = tls.is_some();
        let stream = match &tls {
            None => ServerStream::Plain(stream),
            // The handshake runs on the connection's task, on first read.
            Some(t) => t.stream(stream),
        };
        let service = layer.layer(shared.proxy.for_client(peer, https));
        serve(
            stream,
            peer,
            https,
            service,
            Arc::clone(&shared),
            &settings,
            graceful.watcher(),
            (permit, slot),
        );
    }
}

/// hyper's header count limit when none is set (`http1::Builder::max_headers`).
const HYPER_MAX_HEADERS: usize = 100;

/// Serves one client connection (its deadlines, its head checks, the
/// rules and the proxy) on its own task, under `watch`'s shutdown; the
/// `hold`s (cap permits) are released when it ends.
#[allow(clippy::too_many_arguments)]
fn serve<S>(
    stream: ServerStream,
    peer: SocketAddr,
    https: bool,
    service: S,
    shared: Arc<Shared>,
    settings: &Settings,
    mut watch: ShutdownWatch,
    hold: impl Send + 'static,
) where
    S: Service<Request<Incoming>, Response = Response<ProxyBody>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let limits = settings.config.connections;
    let activity = Arc::new(Activity::default());
    let polled = Arc::clone(&activity);
    let io = TokioIo::new(Guarded::new(stream, Arc::clone(&activity), limits, expired));
    let checks = settings.checks;
    let access = settings.config.log.access;
    let svc = service_fn(move |mut request: Request<Incoming>| {
        let in_flight = activity.begin();
        let started = Instant::now();
        let method = request.method().clone();
        let checked = match activity.ambiguous_framing() {
            Some(ambiguity) => Err(front::refuse_framing(ambiguity)),
            None => front::check(&mut request, checks),
        };
        // A cheap clone (shared bytes), for the logs.
        let uri = request.uri().clone();
        request.extensions_mut().insert(PeerAddr(peer));
        if https {
            request.extensions_mut().insert(ClientTls);
        }
        let mut service = service.clone();
        let shared = Arc::clone(&shared);
        let activity = Arc::clone(&activity);
        async move {
            let response = match checked {
                Err(refusal) => refusal,
                Ok(()) => {
                    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                    service.call(request).await?
                }
            };
            if response.status() == StatusCode::SWITCHING_PROTOCOLS {
                // An Upgrade tunnel (module upgrade) from here on.
                activity.tunnel();
            }
            let rule = if response.status() == StatusCode::TOO_MANY_REQUESTS {
                let rule = rule_of(response.headers()).unwrap_or("-");
                shared.rejections.rejected(rule, uri.path());
                Some(rule.to_owned())
            } else {
                None
            };
            if access {
                tracing::info!(
                    target: "access",
                    %peer,
                    %method,
                    path = uri.path(),
                    status = response.status().as_u16(),
                    rule = rule.as_deref().unwrap_or("-"),
                    ms = started.elapsed().as_secs_f64() * 1000.0,
                    "request"
                );
            }
            Ok::<_, Infallible>(response.map(|b| Tracked::new(b, in_flight)))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    let mut http1 = builder.http1();
    http1
        .timer(TokioTimer::new())
        .keep_alive(true)
        // The head and idle deadlines are the stream's (module conn).
        .header_read_timeout(None)
        .max_buf_size(limits.max_head_bytes);
    // hyper's own limit keeps its parse arrays constant; a limit set, even
    // the same one, fills two arrays of 100 on every request head (about
    // 1,500 instructions a request).
    if limits.max_headers != HYPER_MAX_HEADERS {
        http1.max_headers(limits.max_headers);
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        // hyper adds both to instants: held where no instant overflows.
        .keep_alive_interval(limits.h2_ping_interval.min(limiter_async::MAX_PERIOD))
        .keep_alive_timeout(limits.h2_ping_timeout.min(limiter_async::MAX_PERIOD))
        .max_header_list_size(u32::try_from(limits.max_head_bytes).unwrap_or(u32::MAX));
    let connection = builder.serve_connection_with_upgrades(io, svc).into_owned();
    tokio::spawn(async move {
        let mut connection = std::pin::pin!(connection);
        let ended = std::future::poll_fn(|cx| {
            if watch.poll_signalled(cx) {
                connection.as_mut().graceful_shutdown();
            }
            polled.poll_connection(connection.as_mut(), cx)
        })
        .await;
        if let Err(e) = ended {
            tracing::debug!(error = %e, %peer, "client connection ended with an error");
        }
        // Shutdown waits for the watch: dropped once the connection ended.
        drop(watch);
        drop(hold);
    });
}
