//! [`Connector`]: dials one fixed address of an upstream, whatever the
//! request URI names, optionally with TLS (rustls, SNI and certificate
//! check against the upstream URL's host, ALPN by protocol).
//!
//! The TCP connect and the TLS handshake together are bounded by
//! `timeouts.connect`; past it the error is an I/O `TimedOut`, which the
//! proxy answers with `504`. A hostname address is resolved at each
//! connect, and each of its addresses is tried in turn.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tower_service::Service;

use super::Protocol;

/// The TLS side of a connector: the client configuration and the name the
/// certificate must carry.
#[derive(Clone, Debug)]
pub(crate) struct TlsTarget {
    pub(crate) config: Arc<rustls::ClientConfig>,
    pub(crate) name: ServerName<'static>,
}

impl TlsTarget {
    /// The client configuration for `protocol` trusting the roots in the
    /// PEM file `ca`.
    pub(crate) fn client_config(
        ca: &std::path::Path,
        protocol: Protocol,
    ) -> Result<Arc<rustls::ClientConfig>, String> {
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
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = match protocol {
            Protocol::Http1 => vec![b"http/1.1".to_vec()],
            Protocol::H2 => vec![b"h2".to_vec()],
            Protocol::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        };
        Ok(Arc::new(config))
    }
}

/// Dials `addr` (and TLS when `tls`), for hyper-util's pooled client.
#[derive(Clone, Debug)]
pub(crate) struct Connector {
    pub(crate) addr: Arc<str>,
    pub(crate) timeout: Duration,
    pub(crate) tls: Option<TlsTarget>,
}

async fn dial(addr: Arc<str>, tls: Option<TlsTarget>) -> io::Result<UpstreamStream> {
    let tcp = TcpStream::connect(&*addr).await?;
    tcp.set_nodelay(true)?;
    match tls {
        None => Ok(UpstreamStream::Plain(TokioIo::new(tcp))),
        Some(t) => {
            let stream = tokio_rustls::TlsConnector::from(t.config)
                .connect(t.name, tcp)
                .await?;
            Ok(UpstreamStream::Tls(Box::new(TokioIo::new(stream))))
        }
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
        let (addr, tls, timeout) = (Arc::clone(&self.addr), self.tls.clone(), self.timeout);
        Box::pin(async move {
            match tokio::time::timeout(timeout, dial(addr, tls)).await {
                Ok(result) => result,
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connect timed out after {timeout:?}"),
                )),
            }
        })
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
