//! [`RedisConnection`]: one server, a Redis Cluster or the master of a
//! Sentinel deployment, behind one type, so
//! [`RedisLimiter`](crate::RedisLimiter) has one constructor shape
//! ([`RedisLimiter::with_connection`](crate::RedisLimiter::with_connection))
//! and no type parameter.
//!
//! Both kinds are redis-rs connections that reconnect by themselves:
//! [`ConnectionManager`] for one server, the `cluster-async`
//! [`ClusterConnection`] for a cluster, which routes each command to the
//! master of its key's slot, follows `MOVED` and `ASK` redirections, and
//! refreshes its slot map after a failover or a resharding. A Sentinel
//! master is a [`SentinelConnection`], which asks the sentinels again when
//! its master fails or is demoted. [`RedisEndpoint`](crate::RedisEndpoint)
//! makes any of them from a URL or from parts, with TLS and credentials.
//!
//! Invariant: every command the limiter sends names its keys, so a cluster
//! routes it by its first key, and the keys of one call are checked to share
//! one slot before the call ([`RedisConnection::same_slot`]); one server
//! takes any keys.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use redis::aio::ConnectionManagerConfig;

use crate::endpoint::{RedisEndpoint, Servers, Target, bracket};
use crate::error::EndpointError;
use crate::sentinel::SentinelConnection;

/// The connection a [`RedisLimiter`](crate::RedisLimiter) sends its scripts
/// on: a single server or a Redis Cluster. Build one with `From` (or
/// `.into()`) from either connection; cloning is cheap (both are handles to
/// one multiplexed connection).
///
/// # Examples
///
/// ```
/// use limiter_redis::RedisConnection;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
/// let single = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
/// let conn = RedisConnection::from(single);
/// assert!(!conn.is_cluster());
/// # Ok(())
/// # }
/// ```
///
/// A cluster (connecting needs a running one):
///
/// ```no_run
/// use limiter_core::Quota;
/// use limiter_redis::{RedisConnection, RedisLimiter};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::cluster::ClusterClient::new(vec!["redis://10.0.0.1:7000/"])?;
/// let conn = client.get_async_connection().await?;
/// let limiter = RedisLimiter::with_connection(conn, Quota::per_second(100)?)?;
/// # let _ = limiter;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum RedisConnection {
    /// One server (or a proxy that looks like one).
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
    /// The master of a Sentinel deployment.
    Sentinel(SentinelConnection),
}

impl RedisConnection {
    /// Whether this is a cluster connection (whose multi-key calls must keep
    /// their keys in one slot).
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConnection::Cluster(_))
    }

    /// Whether every key of `keys` may go in one call: always on one server;
    /// on a cluster, when they hash to one slot (the same hash tag).
    /// Returns the first key that does not share the first one's slot.
    pub(crate) fn same_slot<'k>(&self, keys: &'k [String]) -> Result<(), (&'k str, &'k str)> {
        if !self.is_cluster() {
            return Ok(());
        }
        let Some(first) = keys.first() else {
            return Ok(());
        };
        let slot = Slot::for_key(first);
        match keys.iter().find(|k| Slot::for_key(k) != slot) {
            Some(other) => Err((first, other)),
            None => Ok(()),
        }
    }
}

impl From<ConnectionManager> for RedisConnection {
    fn from(conn: ConnectionManager) -> RedisConnection {
        RedisConnection::Single(conn)
    }
}

impl From<ClusterConnection> for RedisConnection {
    fn from(conn: ClusterConnection) -> RedisConnection {
        RedisConnection::Cluster(conn)
    }
}

impl From<SentinelConnection> for RedisConnection {
    fn from(conn: SentinelConnection) -> RedisConnection {
        RedisConnection::Sentinel(conn)
    }
}

impl core::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RedisConnection::Single(_) => f.write_str("RedisConnection::Single(..)"),
            RedisConnection::Cluster(_) => f.write_str("RedisConnection::Cluster(..)"),
            RedisConnection::Sentinel(c) => write!(f, "RedisConnection::Sentinel({c:?})"),
        }
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConnection::Single(c) => c.req_packed_command(cmd),
            RedisConnection::Cluster(c) => c.req_packed_command(cmd),
            RedisConnection::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConnection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Single(c) => c.get_db(),
            RedisConnection::Cluster(c) => c.get_db(),
            RedisConnection::Sentinel(c) => c.get_db(),
        }
    }
}

/// Connecting: kept beside the connection it makes, so `endpoint` only
/// describes where Redis is.
impl RedisEndpoint {
    /// A connection that connects on its first command (one server, or the
    /// master through Sentinel) and reconnects by itself; building it sends
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`EndpointError::InvalidTls`] for TLS material that does not parse,
    /// [`EndpointError::ClusterNeedsConnect`] for a cluster.
    pub fn connect_lazy(&self) -> Result<RedisConnection, EndpointError> {
        match &self.servers {
            Servers::Single(..) | Servers::Unix(_) => {
                let target = match &self.servers {
                    Servers::Single(host, port) => Target::Tcp(host, *port),
                    Servers::Unix(path) => Target::Unix(path),
                    _ => return Err(EndpointError::ClusterNeedsConnect),
                };
                let client = self.client_for(target, self.auth.as_ref(), self.db)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.connect_timeout))
                    .set_number_of_retries(2);
                let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, config)
                    .map_err(|e| EndpointError::InvalidTls {
                        reason: e.to_string(),
                    })?;
                Ok(conn.into())
            }
            Servers::Sentinel { .. } => Ok(SentinelConnection::new(self.clone())?.into()),
            Servers::Cluster(_) => Err(EndpointError::ClusterNeedsConnect),
        }
    }

    /// [`connect_lazy`](Self::connect_lazy), and for a Redis Cluster a
    /// connection made now (redis-rs learns the slot map on connecting).
    ///
    /// # Errors
    ///
    /// As `connect_lazy`, and [`EndpointError::Redis`] when no node of the
    /// cluster answers.
    pub async fn connect(&self) -> Result<RedisConnection, EndpointError> {
        let Servers::Cluster(nodes) = &self.servers else {
            return self.connect_lazy();
        };
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        let urls = nodes
            .iter()
            .map(|(h, p)| format!("{scheme}://{}:{p}", bracket(h)));
        let mut builder =
            redis::cluster::ClusterClient::builder(urls).connection_timeout(self.connect_timeout);
        if let Some(c) = &self.auth {
            builder = builder.password(&c.password);
            if let Some(u) = &c.username {
                builder = builder.username(u);
            }
        }
        if let Some(tls) = &self.tls {
            builder = builder
                .certs(tls.certificates())
                .danger_accept_invalid_hostnames(tls.skip_hostname);
        }
        let client = builder.build().map_err(EndpointError::Redis)?;
        let conn = client
            .get_async_connection()
            .await
            .map_err(EndpointError::Redis)?;
        Ok(conn.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_one_hash_tag_share_a_slot() {
        // The slot rule itself, as the cluster computes it.
        assert_eq!(
            Slot::for_key("a:{acct:7}:user"),
            Slot::for_key("b:{acct:7}:route")
        );
        assert_ne!(Slot::for_key("{a:user:1}"), Slot::for_key("{a:user:2}"));
    }
}
