//! [`Gateway`]: the listeners, the per-connection service stack, and
//! graceful shutdown.
//!
//! Each accepted connection is served by hyper-util's auto builder
//! (HTTP/1.1 with keep-alive, or HTTP/2 with prior knowledge, h2c) with the
//! stack `PeerAddr` insertion → [`RulesLayer`](limiter_config::RulesLayer)
//! → [`Proxy`]. The limiter therefore sees the request as the client sent
//! it (its own `X-Forwarded-For`, read only behind a rule's
//! `trusted_proxies`), before the proxy appends its forwarding headers.
//!
//! Shutdown ([`Running::shutdown`]): `/healthz` turns `503`, the listeners
//! close (no new connections), every connection is told to finish: an
//! HTTP/1 connection completes the request in flight (a delayed one
//! included) and closes, an HTTP/2 one sends GOAWAY. Shutdown returns when
//! all have finished or the deadline has passed, whichever is first.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{Request, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use limiter_config::RuleSet;
use limiter_tower::PeerAddr;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tower_layer::Layer;
use tower_service::Service;

use crate::admin;
use crate::config::GatewayConfig;
use crate::proxy::Proxy;
use crate::tls::{ClientTls, ServerStream, Terminator};

/// One log line per burst of rejections: a burst starts at a rejection
/// after at least [`RejectionLog::QUIET`] without one, and its line carries
/// the count of the burst before it.
#[derive(Debug, Default)]
struct RejectionLog {
    state: Mutex<(Option<Instant>, u64)>,
}

impl RejectionLog {
    const QUIET: Duration = Duration::from_secs(1);

    fn rejected(&self, path: &str) {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (last, count) = *state;
        match last {
            Some(last) if now.duration_since(last) < Self::QUIET => {
                *state = (Some(now), count + 1);
            }
            _ => {
                tracing::warn!(
                    path,
                    previous_burst = count,
                    "rate limit: rejecting requests (one line per burst)"
                );
                *state = (Some(now), 1);
            }
        }
    }
}

/// A gateway ready to start: its configuration and its rules.
#[derive(Debug, Clone)]
pub struct Gateway {
    config: GatewayConfig,
    rules: RuleSet,
}

/// A started gateway: its bound addresses and its shutdown.
#[derive(Debug)]
pub struct Running {
    addrs: Vec<SocketAddr>,
    tls_addrs: Vec<SocketAddr>,
    tls: Option<(Terminator, Option<crate::tls::TlsWatcher>)>,
    admin: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    draining: Arc<AtomicBool>,
    accept: Vec<JoinHandle<()>>,
    admin_task: Option<JoinHandle<()>>,
    graceful: Arc<GracefulShutdown>,
    deadline: Duration,
}

/// How a shutdown ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every connection finished its requests.
    Complete,
    /// The deadline passed with connections still open (they are dropped).
    DeadlineReached,
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
    /// A listener that cannot be bound (address in use, permission).
    pub async fn start(self) -> io::Result<Running> {
        let handle = admin::metrics_handle();
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
        let mut tls_addrs = Vec::new();
        let log = Arc::new(RejectionLog::default());
        let mut addrs = Vec::new();
        let mut accept = Vec::new();
        let tls_listen = self.config.tls.iter().flat_map(|t| &t.listen);
        let listeners = (self.config.listen.iter().map(|a| (a, None)))
            .chain(tls_listen.map(|a| (a, tls.clone())));
        for (addr, tls) in listeners {
            let listener = TcpListener::bind(addr).await?;
            match tls {
                None => addrs.push(listener.local_addr()?),
                Some(_) => tls_addrs.push(listener.local_addr()?),
            }
            accept.push(tokio::spawn(accept_loop(
                listener,
                tls,
                self.rules.clone(),
                proxy.clone(),
                Arc::clone(&graceful),
                Arc::clone(&log),
                stop.subscribe(),
            )));
        }
        let (admin, admin_task) = match self.config.admin {
            Some(addr) => {
                let listener = TcpListener::bind(addr).await?;
                let local = listener.local_addr()?;
                let task = tokio::spawn(admin_loop(
                    listener,
                    self.rules.clone(),
                    Arc::clone(&draining),
                ));
                (Some(local), Some(task))
            }
            None => (None, None),
        };
        tracing::info!(listen = ?addrs, tls = ?tls_addrs, admin = ?admin, "gateway serving");
        let tls = tls.map(|t| {
            let watcher = t
                .watch()
                .inspect_err(|error| tracing::error!(%error, "cannot watch the TLS files; reload_tls still reloads"))
                .ok();
            (t, watcher)
        });
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
            deadline: self.config.timeouts.shutdown,
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
        self.tls.as_ref().map_or(Ok(false), |(t, _)| t.reload())
    }

    /// The admin listener's bound address.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// Stops accepting, lets in-flight requests finish up to the shutdown
    /// timeout, and stops the admin listener.
    pub async fn shutdown(self) -> Drained {
        // Relaxed: only /healthz reads it, and it needs no other memory.
        self.draining.store(true, Ordering::Relaxed);
        self.stop.send_replace(true);
        for task in self.accept {
            let _ = task.await;
        }
        let drained = match Arc::try_unwrap(self.graceful) {
            Ok(graceful) => match tokio::time::timeout(self.deadline, graceful.shutdown()).await {
                Ok(()) => Drained::Complete,
                Err(_) => Drained::DeadlineReached,
            },
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

async fn accept_loop(
    listener: TcpListener,
    tls: Option<Terminator>,
    rules: RuleSet,
    proxy: Proxy,
    graceful: Arc<GracefulShutdown>,
    log: Arc<RejectionLog>,
    mut stop: watch::Receiver<bool>,
) {
    let layer = rules.layer();
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let https = tls.is_some();
        let stream = match &tls {
            None => ServerStream::Plain(stream),
            Some(t) => t.stream(stream),
        };
        let service = layer.layer(proxy.clone());
        let log = Arc::clone(&log);
        let svc = service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(PeerAddr(peer));
            if https {
                request.extensions_mut().insert(ClientTls);
            }
            // A cheap clone (shared bytes), for the rejection log.
            let uri = request.uri().clone();
            let mut service = service.clone();
            let log = Arc::clone(&log);
            async move {
                std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                let response = service.call(request).await?;
                if response.status() == StatusCode::TOO_MANY_REQUESTS {
                    log.rejected(uri.path());
                }
                Ok::<_, Infallible>(response)
            }
        });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new()).keep_alive(true);
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), svc)
            .into_owned();
        let watched = graceful.watcher().watch(connection);
        tokio::spawn(async move {
            if let Err(e) = watched.await {
                tracing::debug!(error = %e, %peer, "client connection ended with an error");
            }
        });
    }
}

async fn admin_loop(listener: TcpListener, rules: RuleSet, draining: Arc<AtomicBool>) {
    // The admin listener outlives the proxy's until shutdown ends (it is
    // aborted then), so that /healthz reports draining meanwhile.
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let rules = rules.clone();
        let draining = Arc::clone(&draining);
        let svc = service_fn(move |request: Request<Incoming>| {
            std::future::ready(admin::answer(&request, &rules, &draining))
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
