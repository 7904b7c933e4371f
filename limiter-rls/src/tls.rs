//! `GRPC_SERVER_USE_TLS`: TLS on the gRPC listener (rustls with ring), the
//! way envoyproxy/ratelimit sets it up, reloaded when its files change.
//!
//! Guarantees:
//! * The certificate chain and key come from `GRPC_SERVER_TLS_CERT` and
//!   `GRPC_SERVER_TLS_KEY` (PEM). With `GRPC_CLIENT_TLS_CACERT` every client
//!   must present a certificate signed by one of its CAs (mTLS, their
//!   `RequireAndVerifyClientCert`); without it none is asked for.
//!   `GRPC_CLIENT_TLS_SAN`, when set, must be one of the client
//!   certificate's DNS names.
//! * ALPN offers `h2` only (gRPC).
//! * The three files are watched (limiter-reload: edits, rename-over saves
//!   and Kubernetes Secret `..data` swaps). On a change the whole server
//!   configuration is built again and, if it loads, used by every new
//!   handshake; one that does not load (a half-written pair, a key that
//!   does not match) keeps the one in force, logged. Connections already
//!   up keep theirs.
//! * A handshake that has not finished within 10 s ends the connection,
//!   and handshakes run beside each other: a silent client holds no other.
//!
//! The gateway (limiter-gateway's `tls` module) has its own certificate
//! reload for its HTTP listeners; the two are alike in loading, not in what
//! they swap (a resolver there; here the whole configuration, client CA
//! included).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use futures::Stream;
use limiter_reload::{ReloadError, Reloader};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

/// The files of the gRPC listener's TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcTls {
    /// `GRPC_SERVER_TLS_CERT`: the PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// `GRPC_SERVER_TLS_KEY`: the PEM private key.
    pub key: PathBuf,
    /// `GRPC_CLIENT_TLS_CACERT`: the CAs client certificates must chain to.
    pub client_ca: Option<PathBuf>,
    /// `GRPC_CLIENT_TLS_SAN`: a DNS name the client certificate must carry.
    pub client_san: Option<String>,
}

/// The longest a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(certs)
}

impl GrpcTls {
    /// The rustls server configuration these files make.
    ///
    /// # Errors
    ///
    /// A file that does not read or parse, a key that does not match.
    pub fn server_config(&self) -> Result<rustls::ServerConfig, String> {
        let chain = certs(&self.cert)?;
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|e| format!("{}: {e}", self.key.display()))?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in certs(ca)? {
                    roots
                        .add(cert)
                        .map_err(|e| format!("{}: {e}", ca.display()))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                        .build()
                        .map_err(|e| format!("{}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("{} with {}: {e}", self.cert.display(), self.key.display()))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

/// The TLS side of the gRPC listener: the configuration in force and the
/// watch that replaces it. Dropping it stops the watch.
#[derive(Debug)]
pub(crate) struct TlsListener {
    config: Arc<ArcSwap<rustls::ServerConfig>>,
    files: GrpcTls,
    _reloader: Reloader,
}

impl TlsListener {
    /// Loads the files and starts watching them (`quiet`: how long changes
    /// must settle before they are read).
    ///
    /// # Errors
    ///
    /// The files do not load, or cannot be watched.
    pub(crate) fn start(files: GrpcTls, quiet: Duration) -> Result<TlsListener, String> {
        let config = Arc::new(ArcSwap::from_pointee(files.server_config()?));
        let mut builder = Reloader::builder()
            .path(&files.cert)
            .path(&files.key)
            .quiet(quiet);
        if let Some(ca) = &files.client_ca {
            builder = builder.path(ca);
        }
        let swap = Arc::clone(&config);
        let watched = files.clone();
        let reloader = builder
            .start(move |_change| match watched.server_config() {
                Ok(fresh) => {
                    swap.store(Arc::new(fresh));
                    tracing::info!(cert = %watched.cert.display(), "gRPC TLS certificate reloaded");
                }
                Err(e) => {
                    tracing::error!("gRPC TLS files not reloaded, the ones in force stay: {e}")
                }
            })
            .map_err(|e: ReloadError| e.to_string())?;
        Ok(TlsListener {
            config,
            files,
            _reloader: reloader,
        })
    }

    /// The connections of `listener` once their handshake is done (and the
    /// client's name checked), as tonic's incoming stream. Accepting (and
    /// the watch of the files) stops when the stream is dropped.
    pub(crate) fn incoming(
        self: Arc<Self>,
        listener: TcpListener,
    ) -> impl Stream<Item = io::Result<TlsStream<TcpStream>>> + Send + 'static {
        let (tx, rx) = mpsc::channel::<io::Result<TlsStream<TcpStream>>>(64);
        let config = Arc::clone(&self.config);
        let san = self.files.client_san.clone();
        tokio::spawn(async move {
            // Owns `self`: the reloader lives as long as the listener.
            let _watch = self;
            loop {
                let tcp = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = tx.closed() => return,
                };
                let tcp = match tcp {
                    Ok((tcp, _)) => tcp,
                    Err(e) => {
                        tracing::debug!(error = %e, "gRPC accept failed");
                        continue;
                    }
                };
                // See `server`: an answer must not wait for a delayed ACK.
                let _ = tcp.set_nodelay(true);
                let acceptor = tokio_rustls::TlsAcceptor::from(config.load_full());
                let tx = tx.clone();
                let san = san.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => match check_san(&tls, san.as_deref()) {
                            Ok(()) => {
                                let _ = tx.send(Ok(tls)).await;
                            }
                            Err(e) => tracing::warn!("gRPC client refused: {e}"),
                        },
                        Ok(Err(e)) => tracing::debug!(error = %e, "gRPC TLS handshake failed"),
                        Err(_) => tracing::debug!("gRPC TLS handshake timed out"),
                    }
                });
            }
        });
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
    }
}

/// Whether the client certificate names `san` (their `verifyClient`).
fn check_san(tls: &TlsStream<TcpStream>, san: Option<&str>) -> Result<(), String> {
    let Some(san) = san else { return Ok(()) };
    let (_, session) = tls.get_ref();
    let leaf = session
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no client certificate")?;
    let name = ServerName::try_from(san).map_err(|e| format!("GRPC_CLIENT_TLS_SAN={san}: {e}"))?;
    let cert = webpki::EndEntityCert::try_from(leaf).map_err(|e| e.to_string())?;
    cert.verify_is_valid_for_subject_name(&name)
        .map_err(|_| format!("the client certificate does not name {san}"))
}
