//! [`Gateway`]: the listeners, the per-connection service stack, and
//! graceful shutdown.
//!
//! Each accepted connection (within the listener's and the client's caps,
//! held to the head and idle deadlines: module `conn`; on a TLS listener
//! the rustls handshake, module `tls`, runs first inside those deadlines)
//! is served by hyper-util's auto builder (HTTP/1.1 with keep-alive and
//! upgrades, or HTTP/2: h2c with prior knowledge, or negotiated by ALPN,
//! with keep-alive pings) with the stack: the head
//! checks and path normalisation (module `front`) → `PeerAddr` insertion →
//! [`RulesLayer`](limiter_config::RulesLayer) → [`Proxy`]. The limiter
//! therefore sees the request as the client sent it (its own
//! `X-Forwarded-For`, read only behind a rule's `trusted_proxies`) but on
//! its normal path, before the proxy appends its forwarding headers. A
//! `101` answer turns the connection into a tunnel (module `upgrade`): the
//! deadlines stop there.
//!
//! Shutdown ([`Running::shutdown`]): `/healthz` turns `503` at once and the
//! listeners keep accepting for the drain delay (`timeouts.drain`, default
//! 5 s), so a load balancer that polls it stops sending before anything is
//! refused; then the listeners close, every connection is told to finish
//! (an HTTP/1 connection completes the request in flight, a delayed one
//! included, and closes; an HTTP/2 one sends GOAWAY), and shutdown returns
//! when all have finished or `timeouts.shutdown` has passed.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use limiter_config::RuleSet;
use limiter_tower::PeerAddr;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tower_layer::Layer;
use tower_service::Service;

use crate::admin::{self, Admin, metrics_handle};
use crate::admin_auth::{AdminToken, check_admin_bind};
use crate::body::Tracked;
use crate::config::GatewayConfig;
use crate::conn::{Activity, Backoff, ClientCounts, Expiry, Guarded, Throttled, listener_cap};
use crate::dashboard::Dashboard;
use crate::front;
use crate::logs::{RejectionLog, rule_of};
use crate::proxy::{Proxy, ProxyBody};
use crate::state::{Settings, Shared};
use crate::tls::{ClientTls, ServerStream, Terminator};

/// A gateway ready to start: its configuration and its rules.
#[derive(Debug, Clone)]
pub struct Gateway {
    config: GatewayConfig,
    rules: RuleSet,
}

/// A started gateway: its bound addresses, its reconfiguration and its
/// shutdown.
#[derive(Debug)]
pub struct Running {
    addrs: Vec<SocketAddr>,
    tls_addrs: Vec<SocketAddr>,
    tls: Option<Terminator>,
    admin: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    draining: Arc<AtomicBool>,
    accept: Vec<JoinHandle<()>>,
    admin_task: Option<JoinHandle<()>>,
    graceful: Arc<GracefulShutdown>,
    shared: Arc<Shared>,
}

/// How a shutdown ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every connection finished its requests.
    Complete,
    /// The deadline passed with connections still open (they are dropped).
    DeadlineReached,
}

/// The accept backlog: connections beyond a listener's cap wait here (the
/// kernel caps it at `net.core.somaxconn`); nginx uses 511, tokio's default
/// is 128.
const BACKLOG: u32 = 1024;

async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{addr}: {e}"));
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .map_err(named)?;
    socket.set_reuseaddr(true).map_err(named)?;
    socket.bind(addr).map_err(named)?;
    socket.listen(BACKLOG).map_err(named)
}

fn expired(expiry: Expiry) {
    metrics::counter!(
        "gateway_connections_timed_out_total",
        "phase" => match expiry { Expiry::Head => "head", Expiry::Idle => "idle" }
    )
    .increment(1);
}

impl Gateway {
    /// A gateway for `config` over `rules`.
    pub fn new(config: GatewayConfig, rules: RuleSet) -> Gateway {
        Gateway { config, rules }
    }

    /// Binds every listener and starts serving.
    ///
    /// # Errors
    ///
    /// A listener that cannot be bound (address in use, permission); the
    /// message names the address.
    pub async fn start(self) -> io::Result<Running> {
        let handle = admin::metrics_handle();
        admin::register();
        let (stop, _) = watch::channel(false);
        // Histogram samples queue in the recorder until upkeep folds them
        // into buckets: without a scrape they would grow without bound.
        let mut upkeep_stop = stop.subscribe();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tokio::select! {
                    _ = tick.tick() => handle.run_upkeep(),
                    _ = upkeep_stop.wait_for(|s| *s) => break,
                }
            }
        });
        // Keyed tables evicting limited clients: one line per interval.
        tokio::spawn(crate::pressure::report(
            self.rules.clone(),
            crate::pressure::INTERVAL,
            stop.subscribe(),
        ));
        let draining = Arc::new(AtomicBool::new(false));
        let graceful = Arc::new(GracefulShutdown::new());
        let proxy = Proxy::new(self.config.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let tls = match &self.config.tls {
            Some(t) => Some(
                Terminator::new(t).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            ),
            None => None,
        };
        let shared = Arc::new(Shared {
            proxy,
            settings: ArcSwap::from_pointee(Settings::new(self.config.clone())),
            rejections: RejectionLog::default(),
            clients: Arc::new(ClientCounts::default()),
            refused_log: Mutex::new(Throttled::new(Duration::from_secs(5))),
        });
        let tls_listen: Vec<SocketAddr> = self
            .config
            .tls
            .iter()
            .flat_map(|t| t.listen.clone())
            .collect();
        let cap = listener_cap(
            self.config.connections.max_per_listener,
            self.config.listen.len() + tls_listen.len(),
        );
        let mut addrs = Vec::new();
        let mut tls_addrs = Vec::new();
        let mut accept = Vec::new();
        let listeners = (self.config.listen.iter().map(|a| (a, None)))
            .chain(tls_listen.iter().map(|a| (a, tls.clone())));
        for (addr, tls) in listeners {
            let listener = bind(*addr).await?;
            match tls {
                None => addrs.push(listener.local_addr()?),
                Some(_) => tls_addrs.push(listener.local_addr()?),
            }
            accept.push(tokio::spawn(accept_loop(
                listener,
                tls,
                self.rules.clone(),
                Arc::clone(&shared),
                Arc::new(Semaphore::new(cap)),
                Arc::clone(&graceful),
                stop.subscribe(),
            )));
        }
        let (admin, admin_task) = match self.config.admin {
            Some(addr) => {
                let token = self
                    .config
                    .admin_token_file
                    .as_ref()
                    .map(AdminToken::from_file)
                    .transpose()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
                check_admin_bind(addr, token.as_ref())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
                let listener = bind(addr).await?;
                let local = listener.local_addr()?;
                // The dashboard's top keys: recorded by the rules' own
                // limiting path from now on.
                self.rules.record_top_keys();
                let dashboard = Arc::new(Dashboard::new());
                let sampler = Arc::clone(&dashboard)
                    .spawn_sampler(SAMPLE_EVERY, || metrics_handle().render());
                let admin = Arc::new(Admin {
                    rules: self.rules.clone(),
                    serving: Arc::clone(&shared),
                    draining: Arc::clone(&draining),
                    token,
                    dashboard,
                });
                let task = tokio::spawn(admin_loop(listener, admin, sampler));
                (Some(local), Some(task))
            }
            None => (None, None),
        };
        tracing::info!(listen = ?addrs, tls = ?tls_addrs, admin = ?admin, max_connections = cap, "gateway serving");
        Ok(Running {
            addrs,
            tls_addrs,
            tls,
            admin,
            stop,
            draining,
            accept,
            admin_task,
            graceful,
            shared,
        })
    }
}

impl Running {
    /// The proxy listeners' bound addresses, in config order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The TLS listeners' bound addresses, in config order.
    pub fn tls_addrs(&self) -> &[SocketAddr] {
        &self.tls_addrs
    }

    /// Reads the TLS certificate and key again (as a change of the files
    /// does); new handshakes use them. Returns whether the certificate
    /// changed; `false` without TLS.
    ///
    /// # Errors
    ///
    /// The pair does not load (the one in force stays), with the reason.
    pub fn reload_tls(&self) -> Result<bool, String> {
        self.tls.as_ref().map_or(Ok(false), Terminator::reload)
    }

    /// The TLS certificate and key files, if TLS is on.
    pub(crate) fn tls_files(&self) -> Option<[&std::path::Path; 2]> {
        self.tls.as_ref().map(Terminator::files)
    }

    /// The admin listener's bound address.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// Puts `config` in force for new connections and requests: upstreams
    /// (new pools with their addresses, balancing and health checks),
    /// timeouts, connection limits, path mode, access log. What cannot
    /// change without a restart (the listeners, the TLS listeners and
    /// files, the admin listener, the per-listener cap, the log format)
    /// stays as it is; the returned list names it (empty when everything
    /// applied).
    ///
    /// # Errors
    ///
    /// An upstream cannot be set up (as [`Proxy::new`]); nothing changes.
    pub fn reconfigure(
        &self,
        config: GatewayConfig,
    ) -> Result<Vec<&'static str>, crate::GatewayConfigError> {
        let old = self.shared.settings.load();
        let old = &old.config;
        let mut kept = Vec::new();
        if config.listen != old.listen {
            kept.push("listen");
        }
        if config.tls != old.tls {
            kept.push("tls");
        }
        if config.admin != old.admin {
            kept.push("admin");
        }
        if config.admin_token_file != old.admin_token_file {
            kept.push("admin.token_file");
        }
        if config.connections.max_per_listener != old.connections.max_per_listener {
            kept.push("connections.max_per_listener");
        }
        if config.log.json != old.log.json {
            kept.push("log.format");
        }
        self.shared.proxy.reconfigure(config.clone())?;
        self.shared.settings.store(Arc::new(Settings::new(config)));
        Ok(kept)
    }

    /// Turns `/healthz` to `503`, keeps accepting for the drain delay, then
    /// stops accepting and lets in-flight requests finish up to the
    /// shutdown timeout, and stops the admin listener.
    pub async fn shutdown(self) -> Drained {
        // Relaxed: only /healthz reads it, and it needs no other memory.
        self.draining.store(true, Ordering::Relaxed);
        let timeouts = self.shared.settings.load().config.timeouts;
        if !timeouts.drain.is_zero() {
            tracing::info!(drain = ?timeouts.drain, "draining: /healthz answers 503, still accepting");
            tokio::time::sleep(timeouts.drain).await;
        }
        self.stop.send_replace(true);
        for task in self.accept {
            let _ = task.await;
        }
        let drained = match Arc::try_unwrap(self.graceful) {
            Ok(graceful) => {
                match tokio::time::timeout(timeouts.shutdown, graceful.shutdown()).await {
                    Ok(()) => Drained::Complete,
                    Err(_) => Drained::DeadlineReached,
                }
            }
            // Unreachable: every accept loop, the only other holders, has
            // ended above.
            Err(_) => Drained::DeadlineReached,
        };
        if let Some(task) = self.admin_task {
            task.abort();
        }
        tracing::info!(?drained, "gateway stopped");
        drained
    }
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

async fn accept_loop(
    listener: TcpListener,
    tls: Option<Terminator>,
    rules: RuleSet,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    graceful: Arc<GracefulShutdown>,
    mut stop: watch::Receiver<bool>,
) {
    let layer = rules.layer();
    let mut backoff = Backoff::default();
    let accept_errors = metrics::counter!("gateway_accept_errors_total");
    let refused = metrics::counter!("gateway_connections_refused_total", "reason" => "per_client");
    loop {
        // At the cap, wait here: new connections queue in the backlog.
        let permit = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
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
        let service = layer.layer(shared.proxy.clone());
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

/// Serves one client connection (its deadlines, its head checks, the
/// rules and the proxy) on its own task, under `watcher`'s shutdown; the
/// `hold`s (cap permits) are released when it ends.
#[allow(clippy::too_many_arguments)]
fn serve<S>(
    stream: ServerStream,
    peer: SocketAddr,
    https: bool,
    service: S,
    shared: Arc<Shared>,
    settings: &Settings,
    watcher: hyper_util::server::graceful::Watcher,
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
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        // The head and idle deadlines are the stream's (module conn).
        .header_read_timeout(None)
        .max_headers(limits.max_headers)
        .max_buf_size(limits.max_head_bytes);
    builder
        .http2()
        .timer(TokioTimer::new())
        // hyper adds both to instants: held where no instant overflows.
        .keep_alive_interval(limits.h2_ping_interval.min(limiter_async::MAX_PERIOD))
        .keep_alive_timeout(limits.h2_ping_timeout.min(limiter_async::MAX_PERIOD))
        .max_header_list_size(u32::try_from(limits.max_head_bytes).unwrap_or(u32::MAX));
    let connection = builder.serve_connection_with_upgrades(io, svc).into_owned();
    let watched = watcher.watch(connection);
    tokio::spawn(async move {
        if let Err(e) = watched.await {
            tracing::debug!(error = %e, %peer, "client connection ended with an error");
        }
        drop(hold);
    });
}

/// How often the dashboard samples the metrics.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

async fn admin_loop(listener: TcpListener, admin: Arc<Admin>, sampler: JoinHandle<()>) {
    // The admin listener outlives the proxy's until shutdown ends (it is
    // aborted then), so that /healthz reports draining meanwhile. It has
    // no cap of its own: the proxy listeners' caps leave it descriptors.
    // The dashboard's sampler ends with it.
    struct Abort(JoinHandle<()>);
    impl Drop for Abort {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _sampler = Abort(sampler);
    let mut backoff = Backoff::default();
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                tokio::time::sleep(backoff.failed()).await;
                continue;
            }
        };
        backoff.succeeded();
        // As the proxy listener's: an answer must not wait for the client's
        // acknowledgement of the one before.
        let _ = stream.set_nodelay(true);
        let admin = Arc::clone(&admin);
        let svc = service_fn(move |request: Request<Incoming>| {
            let admin = Arc::clone(&admin);
            async move { Ok::<_, Infallible>(admin.answer(request).await) }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
