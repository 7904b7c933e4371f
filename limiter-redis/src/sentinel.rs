//! [`SentinelConnection`]: the master of a Redis Sentinel deployment,
//! found again after a failover.
//!
//! The master is found as Sentinel's client guidelines say: ask each
//! sentinel in turn `SENTINEL GET-MASTER-ADDR-BY-NAME`, connect to the
//! address given, and use it only if `ROLE` says `master` (a sentinel can
//! still name a master that was just demoted). The sentinels and the master
//! are reached with the endpoint's TLS; the sentinels with their own
//! credentials, the master with its.
//!
//! Invariant: every command goes to the connection found last. That
//! connection is forgotten, so that the next command looks the master up
//! again, when a command on it fails because the connection broke (I/O
//! error, dropped, refused) or the server is no longer a writable master
//! (`READONLY`, `MASTERDOWN`), and when the sentinels name another master:
//! a task asks them every [`CHECK_EVERY`] while the connection is in use
//! (Sentinel demotes a live old master only when it next sees it, seconds
//! later; until then it would still take writes that the new master never
//! sees). The failed command itself is not retried (it may have been
//! applied): the limiter's failure policy answers it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};

use crate::endpoint::{RedisEndpoint, Servers, Target};
use crate::error::EndpointError;

/// How often the sentinels are asked whether the master moved.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(250);

/// A connection to the current master of a Sentinel deployment; made by
/// [`RedisEndpoint::connect_lazy`] for a `redis+sentinel://` endpoint.
/// Cloning is cheap: clones share the connection and its look-ups.
#[derive(Clone)]
pub struct SentinelConnection {
    shared: Arc<Shared>,
}

struct Shared {
    endpoint: RedisEndpoint,
    master: String,
    sentinels: Vec<(String, u16)>,
    config: AsyncConnectionConfig,
    current: Mutex<Current>,
    /// One look-up at a time; the others wait for its result.
    lookup: tokio::sync::Mutex<()>,
    /// Whether the task that asks the sentinels runs.
    watching: AtomicBool,
}

/// The master's connection and address, and a generation that counts
/// look-ups, so a failure on an older connection never forgets a newer one.
#[derive(Default)]
struct Current {
    generation: u64,
    conn: Option<(MultiplexedConnection, (String, u16))>,
}

type Addr = (String, u16);

impl SentinelConnection {
    /// A lazy connection for `endpoint` (a Sentinel endpoint); nothing is
    /// sent until the first command.
    pub(crate) fn new(endpoint: RedisEndpoint) -> Result<SentinelConnection, EndpointError> {
        let Servers::Sentinel { master, sentinels } = &endpoint.servers else {
            return Err(EndpointError::InvalidUrl {
                reason: "not a Sentinel endpoint".into(),
            });
        };
        let (master, sentinels) = (master.clone(), sentinels.clone());
        // Builds one client now, so that bad TLS material is refused here.
        if let Some((host, port)) = sentinels.first() {
            endpoint.client_for(Target::Tcp(host, *port), endpoint.sentinel_auth.as_ref(), 0)?;
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(endpoint.connect_timeout))
            .set_response_timeout(Some(endpoint.connect_timeout));
        Ok(SentinelConnection {
            shared: Arc::new(Shared {
                endpoint,
                master,
                sentinels,
                config,
                current: Mutex::new(Current::default()),
                lookup: tokio::sync::Mutex::new(()),
                watching: AtomicBool::new(false),
            }),
        })
    }

    /// The master's connection and its generation, looked up if there is none.
    async fn connection(&self) -> Result<(u64, MultiplexedConnection), RedisError> {
        if let Some(found) = self.shared.current() {
            return Ok(found);
        }
        let _one = self.shared.lookup.lock().await;
        if let Some(found) = self.shared.current() {
            return Ok(found);
        }
        let (conn, addr) = self.shared.find_master().await?;
        // Relaxed: only one task may start; it reads nothing this publishes.
        if !self.shared.watching.swap(true, Ordering::Relaxed) {
            tokio::spawn(watch(Arc::downgrade(&self.shared)));
        }
        let mut current = self.shared.lock();
        current.generation += 1;
        current.conn = Some((conn.clone(), addr));
        Ok((current.generation, conn))
    }

    /// Forgets connection `generation` after `error`, if the error says the
    /// master is gone or moved.
    fn after(&self, generation: u64, error: &RedisError) {
        let lost = error.is_io_error()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || error.is_unrecoverable_error()
            || matches!(
                error.kind(),
                ErrorKind::Server(
                    redis::ServerErrorKind::ReadOnly | redis::ServerErrorKind::MasterDown
                )
            );
        let mut current = self.shared.lock();
        if lost && current.generation == generation {
            current.conn = None;
        }
    }
}

/// Asks the sentinels every [`CHECK_EVERY`] where the master is, and
/// forgets the connection when it is elsewhere; ends when every handle is
/// dropped.
async fn watch(shared: Weak<Shared>) {
    let mut sentinel: Option<MultiplexedConnection> = None;
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let reported = match sentinel.as_mut() {
            Some(conn) => shared.ask(conn).await.ok(),
            None => None,
        };
        let reported = match reported {
            Some(addr) => Some(addr),
            None => {
                // (Re)connect to the first sentinel that answers.
                sentinel = None;
                let mut found = None;
                for (host, port) in &shared.sentinels {
                    if let Ok(mut conn) = shared.sentinel(host, *port).await
                        && let Ok(addr) = shared.ask(&mut conn).await
                    {
                        sentinel = Some(conn);
                        found = Some(addr);
                        break;
                    }
                }
                found
            }
        };
        let mut current = shared.lock();
        let moved = matches!((&reported, &current.conn), (Some(r), Some((_, addr))) if r != addr);
        if moved {
            current.conn = None;
        }
    }
}

impl Shared {
    fn current(&self) -> Option<(u64, MultiplexedConnection)> {
        let current = self.lock();
        current
            .conn
            .as_ref()
            .map(|(c, _)| (current.generation, c.clone()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        // The guarded value is replaced whole; a panic elsewhere cannot leave it torn.
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection to the sentinel at `host:port`, with its credentials.
    async fn sentinel(&self, host: &str, port: u16) -> Result<MultiplexedConnection, RedisError> {
        let client = self
            .endpoint
            .client_for(
                Target::Tcp(host, port),
                self.endpoint.sentinel_auth.as_ref(),
                0,
            )
            .map_err(config_error)?;
        client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
    }

    /// The master's address as the sentinel on `conn` knows it.
    async fn ask(&self, conn: &mut MultiplexedConnection) -> Result<Addr, RedisError> {
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("GET-MASTER-ADDR-BY-NAME").arg(&self.master);
        let addr: Option<Addr> = cmd.query_async(conn).await?;
        addr.ok_or_else(|| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "Sentinel knows no such master",
                format!("no master named {:?}", self.master),
            ))
        })
    }

    /// Asks the sentinels in turn; the first master that confirms its role wins.
    async fn find_master(&self) -> Result<(MultiplexedConnection, Addr), RedisError> {
        let mut last = RedisError::from((ErrorKind::InvalidClientConfig, "no sentinel listed"));
        for (host, port) in &self.sentinels {
            let addr = match self.sentinel(host, *port).await {
                Ok(mut conn) => self.ask(&mut conn).await,
                Err(e) => Err(e),
            };
            let (mhost, mport) = match addr {
                Ok(addr) => addr,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let client = self
                .endpoint
                .client_for(
                    Target::Tcp(&mhost, mport),
                    self.endpoint.auth.as_ref(),
                    self.endpoint.db,
                )
                .map_err(config_error)?;
            let mut conn = match client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await
            {
                Ok(conn) => conn,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let role: Vec<Value> = match redis::cmd("ROLE").query_async(&mut conn).await {
                Ok(role) => role,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            if matches!(role.first(), Some(Value::BulkString(r)) if r.as_slice() == b"master") {
                return Ok((conn, (mhost, mport)));
            }
            last = RedisError::from((
                ErrorKind::Server(redis::ServerErrorKind::MasterDown),
                "not a master yet",
                format!("{mhost}:{mport}, named by {host}:{port}, is not a master"),
            ));
        }
        Err(last)
    }
}

/// A client that cannot be built (checked when the endpoint was built,
/// so not expected here) as a redis error.
fn config_error(e: EndpointError) -> RedisError {
    RedisError::from((ErrorKind::InvalidClientConfig, "Sentinel", e.to_string()))
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut conn) = self.connection().await?;
            let reply = conn.req_packed_command(cmd).await;
            if let Err(e) = &reply {
                self.after(generation, e);
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut conn) = self.connection().await?;
            let reply = conn.req_packed_commands(pipeline, offset, count).await;
            if let Err(e) = &reply {
                self.after(generation, e);
            }
            reply
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.endpoint.db
    }
}

impl core::fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SentinelConnection({})", self.shared.endpoint)
    }
}
