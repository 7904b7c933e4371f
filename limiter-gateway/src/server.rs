//! [`Gateway`]: the listeners on their worker runtimes (module `workers`:
//! one single-threaded runtime per core, each with its own socket per
//! address; module `accept`: the per-connection service stack), the admin
//! listener, and graceful shutdown.
//!
//! Shutdown ([`Running::shutdown`]): `/healthz` turns `503` at once and the
//! listeners keep accepting for the drain delay (`timeouts.drain`, default
//! 5 s), so a load balancer that polls it stops sending before anything is
//! refused; then the listeners close, every connection is told to finish
//! (an HTTP/1 connection completes the request in flight, a delayed one
//! included, and closes; an HTTP/2 one sends GOAWAY), and shutdown returns
//! when all have finished or `timeouts.shutdown` has passed; the worker
//! runtimes stop then.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use limiter_config::RuleSet;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::accept::accept_loop;
use crate::admin::{self, Admin, metrics_handle};
use crate::admin_auth::{AdminToken, check_admin_bind};
use crate::config::GatewayConfig;
use crate::conn::{Backoff, ClientCounts, Throttled, listener_cap};
use crate::dashboard::Dashboard;
use crate::logs::RejectionLog;
use crate::proxy::Proxy;
use crate::shutdown::Shutdown;
use crate::state::{Settings, Shared};
use crate::tls::Terminator;
use crate::workers::{self, Workers};

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
    /// One per worker: its connections.
    graceful: Vec<Arc<Shutdown>>,
    shared: Arc<Shared>,
    /// Last: dropping it stops the worker runtimes.
    workers: Workers,
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
        let count = self
            .config
            .workers
            .map_or_else(workers::default_count, std::num::NonZeroUsize::get);
        let workers = Workers::start(count)?;
        let graceful: Vec<_> = (0..count).map(|_| Arc::new(Shutdown::default())).collect();
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
            let sockets = workers.bind(*addr)?;
            match tls {
                None => addrs.push(sockets[0].local_addr()?),
                Some(_) => tls_addrs.push(sockets[0].local_addr()?),
            }
            // The address's cap, shared by its workers' sockets.
            let slots = Arc::new(Semaphore::new(cap));
            for (w, listener) in sockets.into_iter().enumerate() {
                accept.push(workers.handles()[w].spawn(accept_loop(
                    listener,
                    tls.clone(),
                    self.rules.clone(),
                    Arc::clone(&shared),
                    Arc::clone(&slots),
                    Arc::clone(&graceful[w]),
                    stop.subscribe(),
                )));
            }
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
                let listener = workers::bind_one(addr)?;
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
        tracing::info!(listen = ?addrs, tls = ?tls_addrs, admin = ?admin, max_connections = cap, workers = count, "gateway serving");
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
            workers,
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
        if config.workers != old.workers {
            kept.push("workers");
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
        // Every accept loop, the only other holders, has ended above.
        let graceful: Option<Vec<Shutdown>> = self
            .graceful
            .into_iter()
            .map(|g| Arc::try_unwrap(g).ok())
            .collect();
        let drained = match graceful {
            Some(graceful) => {
                let all = futures::future::join_all(graceful.into_iter().map(|g| g.shutdown()));
                match tokio::time::timeout(timeouts.shutdown, all).await {
                    Ok(_) => Drained::Complete,
                    Err(_) => Drained::DeadlineReached,
                }
            }
            None => Drained::DeadlineReached,
        };
        if let Some(task) = self.admin_task {
            task.abort();
        }
        drop(self.workers);
        tracing::info!(?drained, "gateway stopped");
        drained
    }
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
