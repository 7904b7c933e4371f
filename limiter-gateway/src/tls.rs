//! TLS termination (rustls): the `[tls]` section of the gateway file, the
//! certificate in force, its reload, and the stream a TLS listener serves.
//!
//! Guarantees:
//! * ALPN offers `h2` and `http/1.1`; the connection is then served by the
//!   same HTTP/1.1-or-h2 server as a plain one, and requests carry
//!   [`ClientTls`] so that forwarding headers say `proto=https`.
//! * The certificate chain and key are read from `tls.cert` and `tls.key`
//!   (PEM) at start and on [`Running::reload_tls`](crate::Running::reload_tls),
//!   which [`watch`](crate::watch) calls on a change of either file (editors'
//!   rename-over saves and Kubernetes Secret `..data` swaps included; not
//!   with `--no-watch`) and on `SIGHUP`. A pair that
//!   does not load or does not match keeps the one in force (logged);
//!   handshakes already done keep theirs, new ones get the new pair.
//! * A handshake that has not finished within `tls.handshake_timeout` ends
//!   the connection (a silent client cannot hold a socket by never
//!   sending a ClientHello).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::settings::GatewayConfigError;

/// The `[tls]` section: TLS listeners and their certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// The TLS listeners (beside the plain `listen` ones).
    pub listen: Vec<SocketAddr>,
    /// The PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The longest a TLS handshake may take.
    pub handshake_timeout: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileTls {
    #[serde(default)]
    listen: Vec<String>,
    cert: String,
    key: String,
    handshake_timeout: Option<String>,
}

impl FileTls {
    pub(crate) fn parse(self, base: &Path) -> Result<TlsConfig, GatewayConfigError> {
        let listen = self
            .listen
            .iter()
            .enumerate()
            .map(|(i, s)| crate::settings::parse_addr(&format!("tls.listen[{i}]"), s))
            .collect::<Result<Vec<_>, _>>()?;
        let handshake_timeout = match self.handshake_timeout.as_deref() {
            None => Duration::from_secs(10),
            Some(s) => match limiter_config::parse_duration(s) {
                Ok(d) if !d.is_zero() => d,
                Ok(_) => return Err(invalid("tls.handshake_timeout", "must be more than 0")),
                Err(e) => return Err(invalid("tls.handshake_timeout", e)),
            },
        };
        // Relative paths are relative to the gateway file.
        let dir = base.parent().unwrap_or(Path::new("."));
        Ok(TlsConfig {
            listen,
            cert: dir.join(self.cert),
            key: dir.join(self.key),
            handshake_timeout,
        })
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> GatewayConfigError {
    GatewayConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Marks a request that arrived over TLS (a request extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTls;

/// The certificate in force, swapped whole on reload.
#[derive(Debug)]
struct Resolver(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// The TLS side of the TLS listeners: the server configuration and the
/// certificate files.
#[derive(Debug, Clone)]
pub(crate) struct Terminator {
    server: Arc<rustls::ServerConfig>,
    resolver: Arc<Resolver>,
    config: TlsConfig,
}

fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn load(config: &TlsConfig) -> Result<CertifiedKey, String> {
    let chain = CertificateDer::pem_file_iter(&config.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", config.cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{}: no certificate in the file",
            config.cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&config.key)
        .map_err(|e| format!("{}: {e}", config.key.display()))?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
        format!(
            "{} with {}: {e}",
            config.cert.display(),
            config.key.display()
        )
    })
}

impl Terminator {
    /// Loads the certificate of `config`.
    pub(crate) fn new(config: &TlsConfig) -> Result<Terminator, String> {
        let resolver = Arc::new(Resolver(ArcSwap::from_pointee(load(config)?)));
        let mut server = rustls::ServerConfig::builder_with_provider(Arc::new(provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&resolver) as Arc<dyn ResolvesServerCert>);
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Terminator {
            server: Arc::new(server),
            resolver,
            config: config.clone(),
        })
    }

    /// Reads the files again; on success new handshakes use them.
    /// Returns whether the certificate changed.
    ///
    /// # Errors
    ///
    /// The pair does not load; the one in force stays.
    pub(crate) fn reload(&self) -> Result<bool, String> {
        let fresh = load(&self.config)?;
        let changed = self.resolver.0.load().cert != fresh.cert;
        if changed {
            self.resolver.0.store(Arc::new(fresh));
            tracing::info!(cert = %self.config.cert.display(), "TLS certificate reloaded");
        }
        Ok(changed)
    }

    /// The certificate and key files, as configured.
    pub(crate) fn files(&self) -> [&Path; 2] {
        [&self.config.cert, &self.config.key]
    }

    /// A stream that performs the handshake on first use.
    pub(crate) fn stream(&self, tcp: TcpStream) -> ServerStream {
        ServerStream::Handshake(Box::new((
            tokio_rustls::TlsAcceptor::from(Arc::clone(&self.server)).accept(tcp),
            Box::pin(tokio::time::sleep(self.config.handshake_timeout)),
        )))
    }
}

type Handshake = (
    tokio_rustls::Accept<TcpStream>,
    Pin<Box<tokio::time::Sleep>>,
);

/// A client connection: plain, or TLS (handshaking on first read or write).
pub(crate) enum ServerStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// The handshake under way, and its deadline.
    Handshake(Box<Handshake>),
    /// TLS established.
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// The handshake failed.
    Failed,
}

impl std::fmt::Debug for ServerStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServerStream::Plain(_) => "ServerStream::Plain",
            ServerStream::Handshake(_) => "ServerStream::Handshake",
            ServerStream::Tls(_) => "ServerStream::Tls",
            ServerStream::Failed => "ServerStream::Failed",
        })
    }
}

impl ServerStream {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let ServerStream::Handshake(h) = self {
            let (accept, deadline) = &mut **h;
            let result = match Pin::new(accept).poll(cx) {
                Poll::Ready(result) => result,
                Poll::Pending => match deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "TLS handshake timed out",
                    )),
                    Poll::Pending => return Poll::Pending,
                },
            };
            match result {
                Ok(tls) => *self = ServerStream::Tls(Box::new(tls)),
                Err(e) => {
                    *self = ServerStream::Failed;
                    return Poll::Ready(Err(e));
                }
            }
        }
        match self {
            ServerStream::Failed => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "TLS handshake failed",
            ))),
            _ => Poll::Ready(Ok(())),
        }
    }
}

macro_rules! ready_then {
    ($self:ident, $cx:ident, |$s:ident| $call:expr) => {{
        let me = $self.get_mut();
        match me.poll_ready($cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        match me {
            ServerStream::Plain($s) => {
                let $s = Pin::new($s);
                $call
            }
            ServerStream::Tls($s) => {
                let $s = Pin::new($s.as_mut());
                $call
            }
            _ => unreachable!("poll_ready left a connected stream"),
        }
    }};
}

impl AsyncRead for ServerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        ready_then!(self, cx, |s| s.poll_read(cx, buf))
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready_then!(self, cx, |s| s.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready_then!(self, cx, |s| s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready_then!(self, cx, |s| s.poll_shutdown(cx))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready_then!(self, cx, |s| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ServerStream::Plain(s) => s.is_write_vectored(),
            ServerStream::Tls(s) => s.is_write_vectored(),
            _ => false,
        }
    }
}
