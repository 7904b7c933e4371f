//! [`RedisEndpoint`]: where Redis is and how to talk to it — one server, a
//! Redis Cluster, or a master found through Redis Sentinel; with TLS
//! ([`RedisTls`]) and credentials (a password, or an ACL user and its
//! password) — in one value that every crate of the workspace builds and
//! turns into a [`RedisConnection`](crate::RedisConnection).
//!
//! URLs ([`RedisEndpoint::parse`]):
//!
//! | form | what |
//! |---|---|
//! | `redis://[user:password@]host[:port][/db]` | one server (also `valkey://`) |
//! | `rediss://…` | one server over TLS, checked against the system's roots (also `valkeys://`) |
//! | `unix:///path/to.sock` | one server on a Unix socket (also `redis+unix://`) |
//! | `redis+sentinel://[user:password@]s1:26379,s2:26379/master[/db]` | the master named `master`, found through the sentinels listed |
//! | `rediss+sentinel://…` | the same, over TLS to the sentinels and the master |
//!
//! In the Sentinel form the user and password are the master's; the
//! sentinels' own (Sentinel's `requirepass` or ACL) are the query
//! parameters `sentinel_username` and `sentinel_password`. Credentials are
//! percent-decoded. A CA, a client certificate and skipping the host name
//! check are set with [`RedisEndpoint::with_tls`]. No form turns
//! certificate checks off (`#insecure` is refused).

use core::fmt;
use core::time::Duration;
use std::path::{Path, PathBuf};

use crate::tls::RedisTls;

use redis::{Client, ConnectionAddr, IntoConnectionInfo};

use crate::error::EndpointError;

/// Where Redis is and how to reach it (see the module documentation for
/// the URL forms). Cloning is cheap enough for configuration; connecting
/// is [`connect_lazy`](Self::connect_lazy) or [`connect`](Self::connect)
/// (module `connection`).
///
/// `Debug` and `Display` never print a password or a key.
///
/// # Examples
///
/// ```
/// use limiter_redis::{RedisEndpoint, RedisTls};
///
/// let one = RedisEndpoint::parse("redis://limiter:s3cret@10.0.0.5:6379/0")?;
/// assert_eq!(one.to_string(), "redis 10.0.0.5:6379 db 0 as limiter");
///
/// let ha = RedisEndpoint::parse("rediss+sentinel://s1:26379,s2:26379/mymaster")?;
/// assert!(ha.is_sentinel() && ha.uses_tls());
///
/// // The same master from parts, as envoyproxy/ratelimit's variables give them.
/// let ha = RedisEndpoint::sentinel("mymaster", [("s1", 26379), ("s2", 26379)])
///     .with_auth(Some("limiter"), "s3cret")
///     .with_tls(RedisTls::new().skip_hostname_verification(true));
/// # let _ = ha;
/// # Ok::<(), limiter_redis::EndpointError>(())
/// ```
#[derive(Clone)]
pub struct RedisEndpoint {
    pub(crate) servers: Servers,
    pub(crate) auth: Option<Credentials>,
    pub(crate) sentinel_auth: Option<Credentials>,
    pub(crate) db: i64,
    pub(crate) tls: Option<RedisTls>,
    pub(crate) connect_timeout: Duration,
}

/// The servers of an endpoint.
#[derive(Clone, Debug)]
pub(crate) enum Servers {
    Single(String, u16),
    Unix(PathBuf),
    Cluster(Vec<(String, u16)>),
    Sentinel {
        master: String,
        sentinels: Vec<(String, u16)>,
    },
}

/// One server to connect to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target<'a> {
    Tcp(&'a str, u16),
    Unix(&'a Path),
}

/// A user (none: the `default` user) and a password.
#[derive(Clone)]
pub(crate) struct Credentials {
    pub(crate) username: Option<String>,
    pub(crate) password: String,
}

impl RedisEndpoint {
    fn with_servers(servers: Servers) -> RedisEndpoint {
        RedisEndpoint {
            servers,
            auth: None,
            sentinel_auth: None,
            db: 0,
            tls: None,
            connect_timeout: Duration::from_secs(1),
        }
    }

    /// One server at `host:port`.
    pub fn single(host: impl Into<String>, port: u16) -> RedisEndpoint {
        RedisEndpoint::with_servers(Servers::Single(host.into(), port))
    }

    /// A Redis Cluster, starting from these nodes (any of them; the rest is
    /// discovered).
    pub fn cluster<H: Into<String>>(nodes: impl IntoIterator<Item = (H, u16)>) -> RedisEndpoint {
        let nodes = nodes.into_iter().map(|(h, p)| (h.into(), p)).collect();
        RedisEndpoint::with_servers(Servers::Cluster(nodes))
    }

    /// The master named `master`, as the `sentinels` report it: asked
    /// again whenever its connection fails or it answers as a replica.
    pub fn sentinel<H: Into<String>>(
        master: impl Into<String>,
        sentinels: impl IntoIterator<Item = (H, u16)>,
    ) -> RedisEndpoint {
        let sentinels = sentinels.into_iter().map(|(h, p)| (h.into(), p)).collect();
        RedisEndpoint::with_servers(Servers::Sentinel {
            master: master.into(),
            sentinels,
        })
    }

    /// The servers' credentials: an ACL user (`None`: the `default` user,
    /// as with `requirepass`) and its password.
    pub fn with_auth(mut self, username: Option<&str>, password: &str) -> RedisEndpoint {
        self.auth = Some(Credentials {
            username: username.map(str::to_owned),
            password: password.to_owned(),
        });
        self
    }

    /// The sentinels' own credentials (Sentinel endpoints only).
    pub fn with_sentinel_auth(mut self, username: Option<&str>, password: &str) -> RedisEndpoint {
        self.sentinel_auth = Some(Credentials {
            username: username.map(str::to_owned),
            password: password.to_owned(),
        });
        self
    }

    /// TLS to every server (and every sentinel) of the endpoint.
    pub fn with_tls(mut self, tls: RedisTls) -> RedisEndpoint {
        self.tls = Some(tls);
        self
    }

    /// The database number (`SELECT`; not on a cluster).
    pub fn with_db(mut self, db: i64) -> RedisEndpoint {
        self.db = db;
        self
    }

    /// How long one connection attempt may take (default 1 s).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> RedisEndpoint {
        self.connect_timeout = timeout;
        self
    }

    /// Whether credentials for the servers are set.
    pub fn has_auth(&self) -> bool {
        self.auth.is_some()
    }

    /// Whether the connections use TLS.
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.servers, Servers::Cluster(_))
    }

    /// Whether the master is found through Sentinel.
    pub fn is_sentinel(&self) -> bool {
        matches!(self.servers, Servers::Sentinel { .. })
    }

    /// The host and port of a one-server TCP endpoint (`None` for the
    /// other kinds).
    pub fn tcp_address(&self) -> Option<(&str, u16)> {
        match &self.servers {
            Servers::Single(h, p) => Some((h, *p)),
            _ => None,
        }
    }

    /// A redis-rs client for one server of this endpoint with these
    /// credentials and database, over TLS when the endpoint uses it.
    pub(crate) fn client_for(
        &self,
        target: Target<'_>,
        auth: Option<&Credentials>,
        db: i64,
    ) -> Result<Client, EndpointError> {
        let addr = match target {
            Target::Tcp(host, port) if self.tls.is_some() => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure: false,
                tls_params: None,
            },
            Target::Tcp(host, port) => ConnectionAddr::Tcp(host.to_owned(), port),
            Target::Unix(path) => ConnectionAddr::Unix(path.to_owned()),
        };
        let invalid = |e: redis::RedisError| EndpointError::InvalidTls {
            reason: e.to_string(),
        };
        let mut settings = redis::RedisConnectionInfo::default().set_db(db);
        if let Some(c) = auth {
            settings = settings.set_password(&c.password);
            if let Some(u) = &c.username {
                settings = settings.set_username(u);
            }
        }
        let info = addr
            .into_connection_info()
            .map_err(invalid)?
            .set_redis_settings(settings);
        let Some(tls) = &self.tls else {
            return Client::open(info).map_err(invalid);
        };
        let client = Client::build_with_tls(info, tls.certificates()).map_err(invalid)?;
        if !tls.skip_hostname {
            return Ok(client);
        }
        let info = client.get_connection_info().clone();
        let mut addr = info.addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        Client::open(info.set_addr(addr)).map_err(invalid)
    }
}

/// `[v6]` for an IPv6 literal in a URL, the host itself otherwise.
pub(crate) fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

impl fmt::Display for RedisEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |nodes: &[(String, u16)]| {
            nodes
                .iter()
                .map(|(h, p)| format!("{}:{p}", bracket(h)))
                .collect::<Vec<_>>()
                .join(",")
        };
        match &self.servers {
            Servers::Single(h, p) => write!(f, "redis {}:{p} db {}", bracket(h), self.db)?,
            Servers::Unix(path) => write!(f, "redis {} db {}", path.display(), self.db)?,
            Servers::Cluster(nodes) => write!(f, "redis cluster {}", list(nodes))?,
            Servers::Sentinel { master, sentinels } => write!(
                f,
                "redis master {master:?} via sentinels {} db {}",
                list(sentinels),
                self.db
            )?,
        }
        if let Some(Credentials {
            username: Some(u), ..
        }) = &self.auth
        {
            write!(f, " as {u}")?;
        }
        if self.tls.is_some() {
            f.write_str(" over TLS")?;
        }
        Ok(())
    }
}

impl fmt::Debug for RedisEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisEndpoint({self})")
    }
}
