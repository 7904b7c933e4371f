//! Per-core serving: `workers` threads, each a single-threaded tokio
//! runtime that owns one listener socket per proxy address (all bound to
//! the same address with `SO_REUSEPORT`, so the kernel spreads new
//! connections over them), the tasks of the connections it accepted and,
//! through the thread's pool (module `upstream`), their upstream
//! connections. A request is served start to end on the thread that
//! accepted its connection: nothing on its path is shared between workers
//! but the limiter's atomics, the rules snapshot and the counters of an
//! upstream with several addresses.
//!
//! The admin listener, reloads, health checks and the metrics upkeep run on
//! the runtime that started the gateway. Dropping [`Workers`] stops every
//! worker runtime (their tasks are dropped); a graceful shutdown drains
//! the connections first (module `server`).

use std::io;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio::sync::watch;

/// The accept backlog of each socket: connections beyond a listener's cap
/// wait here (the kernel caps it at `net.core.somaxconn`); nginx uses 511,
/// tokio's default is 128.
const BACKLOG: u32 = 1024;

/// How often a worker closes its stale idle upstream connections.
const SWEEP_EVERY: Duration = Duration::from_secs(2);

/// The serving threads and their runtimes.
#[derive(Debug)]
pub(crate) struct Workers {
    handles: Vec<Handle>,
    exit: watch::Sender<bool>,
}

/// The default number of workers: one per core the process may use.
pub(crate) fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

impl Workers {
    /// Starts `n` worker threads, each running its runtime until dropped.
    ///
    /// # Errors
    ///
    /// A runtime or a thread cannot be created.
    pub(crate) fn start(n: usize) -> io::Result<Workers> {
        let (exit, _) = watch::channel(false);
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(runtime.handle().clone());
            let mut exit = exit.subscribe();
            std::thread::Builder::new()
                .name(format!("gateway-worker-{i}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        let mut sweep = tokio::time::interval(SWEEP_EVERY);
                        // The other workers' asks for idle upstream connections.
                        let mut asks = std::pin::pin!(crate::upstream::serve_asks());
                        loop {
                            tokio::select! {
                                _ = exit.wait_for(|e| *e) => break,
                                _ = sweep.tick() => crate::upstream::sweep(),
                                () = &mut asks => {}
                            }
                        }
                    });
                })?;
        }
        Ok(Workers { handles, exit })
    }

    /// The workers' runtimes, in order.
    pub(crate) fn handles(&self) -> &[Handle] {
        &self.handles
    }

    /// One listener socket on `addr` per worker, each registered with its
    /// worker's runtime (port 0: the port the first one got, for all).
    ///
    /// # Errors
    ///
    /// The address cannot be bound (in use, permission); the message names
    /// it.
    pub(crate) fn bind(&self, addr: SocketAddr) -> io::Result<Vec<TcpListener>> {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{addr}: {e}"));
        if addr.port() != 0 {
            // SO_REUSEPORT would share the port with another process's
            // listener of the same user: refuse it as a plain bind does.
            drop(std::net::TcpListener::bind(addr).map_err(named)?);
        }
        let mut bound = addr;
        let mut listeners = Vec::with_capacity(self.handles.len());
        for handle in &self.handles {
            let _runtime = handle.enter();
            let listener = socket(bound).map_err(named)?;
            bound = listener.local_addr()?;
            listeners.push(listener);
        }
        Ok(listeners)
    }
}

fn socket(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }?;
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// A listener socket for the admin listener, on the current runtime.
pub(crate) fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
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

impl Drop for Workers {
    fn drop(&mut self) {
        self.exit.send_replace(true);
    }
}
