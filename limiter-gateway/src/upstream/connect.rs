//! [`Connector`]: dials one fixed address of an upstream, whatever the
//! request URI names, optionally with TLS (rustls, SNI and certificate
//! check against the upstream URL's host, ALPN by protocol); and
//! [`AddressClient`]: that address's keep-alive pool, which frames each
//! request for the protocol its connections speak.
//!
//! The TCP connect and the TLS handshake together are bounded by
//! `timeouts.connect`; past it the error is an I/O `TimedOut`, which the
//! proxy answers with `504`. A hostname address is resolved at each
//! connect, and each of its addresses is tried in turn.
//!
//! Under `protocol = "auto"` the first handshake with an address offers
//! `h2` and `http/1.1` and learns which the upstream picks; every
//! connection to that address afterwards offers only that one. So every
//! pooled connection of an address speaks one known protocol, and a
//! request is framed for it before it is sent: over h2 the `Host` header
//! is dropped and `:authority` (the URL's) names the host (RFC 9113
//! §8.3.1), over HTTP/1.1 the `Host` goes as the proxy set it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::OnceCell;
use tokio_rustls::client::TlsStream;
use tower_service::Service;

use super::Protocol;
use super::balance::UpstreamBody;
use super::local::LocalPool;
use crate::response::ResponseBody;
use crate::settings::Timeouts;

/// The TLS side of a connector: the client configurations and the name
/// the certificate must carry.
#[derive(Clone, Debug)]
pub(crate) struct TlsTarget {
    /// Offers the configured protocol (both under `auto`).
    pub(crate) config: Arc<rustls::ClientConfig>,
    /// Under `auto`: the configurations offering one protocol only,
    /// `[http/1.1, h2]`.
    pub(crate) single: Option<[Arc<rustls::ClientConfig>; 2]>,
    pub(crate) name: ServerName<'static>,
}

impl TlsTarget {
    /// The target `name` for `protocol`, trusting the roots in the PEM
    /// file `ca`.
    pub(crate) fn new(
        ca: &std::path::Path,
        protocol: Protocol,
        name: ServerName<'static>,
    ) -> Result<TlsTarget, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        let certs =
            CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))?;
        for cert in certs {
            let cert = cert.map_err(|e| format!("{}: {e}", ca.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("{}: {e}", ca.display()))?;
        }
        if roots.is_empty() {
            return Err(format!("{}: no certificate in the file", ca.display()));
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let offering = |alpn: &[&[u8]]| {
            let mut config = config.clone();
            config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            Arc::new(config)
        };
        let (http1, h2): (&[u8], &[u8]) = (b"http/1.1", b"h2");
        Ok(TlsTarget {
            config: match protocol {
                Protocol::Http1 => offering(&[http1]),
                Protocol::H2 => offering(&[h2]),
                Protocol::Auto => offering(&[h2, http1]),
            },
            single: (protocol == Protocol::Auto).then(|| [offering(&[http1]), offering(&[h2])]),
            name,
        })
    }
}

/// Dials `addr` (and TLS when `tls`), for hyper-util's pooled client.
#[derive(Clone, Debug)]
pub(crate) struct Connector {
    addr: Arc<str>,
    timeout: Duration,
    tls: Option<TlsTarget>,
    protocol: Protocol,
    /// Under `auto`: whether the address picked h2, once learned.
    learned: Arc<OnceCell<bool>>,
}

async fn dial(
    addr: &str,
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
) -> io::Result<UpstreamStream> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    match tls {
        None => Ok(UpstreamStream::Plain(TokioIo::new(tcp))),
        Some((config, name)) => {
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await?;
            Ok(UpstreamStream::Tls(Box::new(TokioIo::new(stream))))
        }
    }
}

impl Connector {
    /// Whether connections to this address speak h2: fixed by `protocol`,
    /// or under `auto` learned once, by a handshake offering both (its
    /// connection is then closed; callers waiting meanwhile share it).
    ///
    /// # Errors
    ///
    /// That handshake failed (refused, TLS, past the connect timeout): the
    /// next call tries again.
    pub(crate) async fn speaks_h2(&self) -> io::Result<bool> {
        let Some(tls) = self
            .tls
            .as_ref()
            .filter(|_| self.protocol == Protocol::Auto)
        else {
            return Ok(self.protocol == Protocol::H2);
        };
        let learn = async {
            let stream = within(
                self.timeout,
                dial(
                    &self.addr,
                    Some((Arc::clone(&tls.config), tls.name.clone())),
                ),
            )
            .await?;
            let h2 = match &stream {
                UpstreamStream::Tls(s) => s.inner().get_ref().1.alpn_protocol() == Some(b"h2"),
                UpstreamStream::Plain(_) => false,
            };
            tracing::debug!(address = %self.addr, h2, "upstream protocol learned (ALPN)");
            Ok::<_, io::Error>(h2)
        };
        self.learned.get_or_try_init(|| learn).await.copied()
    }

    /// Plain TCP: its connections may move between workers (module `spare`).
    pub(crate) fn plain(&self) -> bool {
        self.tls.is_none()
    }

    /// A new connection, within the connect timeout.
    pub(crate) async fn dial(&self) -> io::Result<UpstreamStream> {
        within(self.timeout, self.clone().connect()).await
    }

    async fn connect(self) -> io::Result<UpstreamStream> {
        let tls = match (&self.tls, self.protocol) {
            (None, _) => None,
            (Some(t), Protocol::Auto) => {
                let h2 = self.speaks_h2().await?;
                let single = t.single.as_ref().map_or(&t.config, |s| &s[usize::from(h2)]);
                Some((Arc::clone(single), t.name.clone()))
            }
            (Some(t), _) => Some((Arc::clone(&t.config), t.name.clone())),
        };
        dial(&self.addr, tls).await
    }
}

/// `connect` bounded by `timeout`: past it an I/O `TimedOut`.
async fn within<T>(
    timeout: Duration,
    connect: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match tokio::time::timeout(timeout, connect).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("connect timed out after {timeout:?}"),
        )),
    }
}

impl Service<Uri> for Connector {
    type Response = UpstreamStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<UpstreamStream>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        let me = self.clone();
        Box::pin(within(me.timeout, me.connect()))
    }
}

/// Why a request got no response head from an address.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The handshake that learns an `auto` address's protocol failed.
    Connect(io::Error),
    /// hyper-util's client: its connect or the exchange.
    Client(hyper_util::client::legacy::Error),
    /// The per-thread path (module `local`): the exchange on a connection.
    Exchange(hyper::Error),
}

impl SendError {
    /// The request was not sent: no connection.
    pub(crate) fn is_connect(&self) -> bool {
        match self {
            SendError::Connect(_) => true,
            SendError::Client(e) => e.is_connect(),
            SendError::Exchange(_) => false,
        }
    }
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "connect: {e}"),
            SendError::Client(e) => write!(f, "{e}"),
            SendError::Exchange(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Connect(e) => Some(e),
            SendError::Client(e) => Some(e),
            SendError::Exchange(e) => Some(e),
        }
    }
}

/// One address's keep-alive pools: per thread for HTTP/1.1 (module
/// `local`), hyper-util's shared one for h2, `auto`, upgrades and health
/// probes (HTTP/1.1: up to 1024 idle connections; h2: multiplexed), its
/// requests framed for the protocol it speaks.
#[derive(Debug)]
pub(crate) struct AddressClient {
    client: Client<Connector, UpstreamBody>,
    connector: Connector,
    /// HTTP/1.1 addresses only.
    local: Option<LocalPool>,
}

impl AddressClient {
    /// The pool of `addr`, TLS when `tls`.
    pub(crate) fn new(
        upstream: &str,
        addr: Arc<str>,
        timeouts: &Timeouts,
        tls: Option<TlsTarget>,
        protocol: Protocol,
    ) -> AddressClient {
        let connector = Connector {
            addr,
            timeout: timeouts.connect,
            tls,
            protocol,
            learned: Arc::new(OnceCell::new()),
        };
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(timeouts.idle)
            .pool_max_idle_per_host(1024)
            .http2_only(protocol == Protocol::H2)
            .build(connector.clone());
        let local = (protocol == Protocol::Http1).then(|| LocalPool::new(upstream, timeouts.idle));
        AddressClient {
            client,
            connector,
            local,
        }
    }

    /// Sends a proxied `request` (its URI the upstream's): in this task on
    /// this thread's pool for HTTP/1.1 (an upgrade excepted), else as
    /// [`request`](AddressClient::request).
    ///
    /// # Errors
    ///
    /// [`SendError`]: no connection, or none that gave a response head.
    pub(crate) fn send(
        &self,
        request: Request<UpstreamBody>,
    ) -> impl Future<Output = Result<Response<ResponseBody>, SendError>> + Send + '_ {
        // Not an `async fn`: its future is the pool's own, without a
        // second copy of the request beside it.
        match &self.local {
            Some(local) if !request.headers().contains_key(http::header::UPGRADE) => {
                futures::future::Either::Left(local.send(&self.connector, request))
            }
            // Boxed: hyper-util's future would size every request's.
            _ => futures::future::Either::Right(Box::pin(async move {
                Ok(self.request(request).await?.map(ResponseBody::detached))
            })),
        }
    }

    /// Sends `request` (its URI the upstream's) on a pooled connection.
    ///
    /// # Errors
    ///
    /// [`SendError`]: no connection, or none that gave a response head.
    pub(crate) async fn request(
        &self,
        mut request: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, SendError> {
        if self
            .connector
            .speaks_h2()
            .await
            .map_err(SendError::Connect)?
        {
            request.headers_mut().remove(http::header::HOST);
        }
        self.client
            .request(request)
            .await
            .map_err(SendError::Client)
    }
}

/// A connection to an upstream address.
#[derive(Debug)]
pub(crate) enum UpstreamStream {
    /// Plain TCP.
    Plain(TokioIo<TcpStream>),
    /// TLS over TCP (boxed: the rustls session is large).
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for UpstreamStream {
    fn connected(&self) -> Connected {
        match self {
            UpstreamStream::Plain(s) => s.inner().connected(),
            UpstreamStream::Tls(s) => {
                let (tcp, session) = s.inner().get_ref();
                let connected = tcp.connected();
                if session.alpn_protocol() == Some(b"h2") {
                    connected.negotiated_h2()
                } else {
                    connected
                }
            }
        }
    }
}

impl Read for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_flush(cx),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            UpstreamStream::Plain(s) => s.is_write_vectored(),
            UpstreamStream::Tls(s) => s.is_write_vectored(),
        }
    }
}
