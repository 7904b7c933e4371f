//! Peers for the production-feature tests: a test CA made at run time
//! (rcgen), a TLS client, a TLS upstream that reports what it received, an
//! upstream that can be killed with all its connections, and a gateway
//! started from a gateway-file text.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use limiter_config::RuleSet;
use limiter_gateway::{Gateway, GatewayConfig, Running, metrics_handle};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// A certificate authority for one test.
pub(crate) struct TestCa {
    pub(crate) pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    pub(crate) fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        TestCa {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `localhost` and 127.0.0.1 named `cn`: (cert PEM, key PEM).
    pub(crate) fn leaf(&self, cn: &str) -> (String, String) {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A rustls client trusting this CA only, offering `alpn`.
    pub(crate) fn client(&self, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.pem.as_bytes()).unwrap())
            .unwrap();
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }
}

/// The DER of the leaf certificate a TLS connection presented.
pub(crate) fn presented(tls: &tokio_rustls::client::TlsStream<TcpStream>) -> Vec<u8> {
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// The DER of the first certificate in `pem`.
pub(crate) fn der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// A TLS upstream (HTTP/1.1 or h2, as its ALPN `alpn` and the client
/// agree) serving the pair `cert`, `key`, answering every request with
/// what framed it: `{version:?} authority={:authority or -} host={Host or -}`.
pub(crate) async fn reporting_tls_upstream(cert: &str, key: &str, alpn: &[&[u8]]) -> SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(|request: Request<Incoming>| {
                    let text = format!(
                        "{:?} authority={} host={}",
                        request.version(),
                        request.uri().authority().map_or("-", |a| a.as_str()),
                        request
                            .headers()
                            .get(http::header::HOST)
                            .map_or("-", |h| h.to_str().unwrap_or("?")),
                    );
                    std::future::ready(Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(
                        text,
                    )))))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

/// An upstream answering `name` on every path (and `/healthz` with the
/// switchable `healthy`), whose connections all die with it.
pub(crate) struct Killable {
    pub(crate) addr: SocketAddr,
    pub(crate) requests: Arc<AtomicU64>,
    pub(crate) healthy: Arc<AtomicBool>,
    tasks: Option<JoinSet<()>>,
}

impl Killable {
    pub(crate) async fn start(name: &'static str) -> Killable {
        Killable::serve(TcpListener::bind("127.0.0.1:0").await.unwrap(), name)
    }

    /// As [`Killable::start`], on `listener`.
    pub(crate) fn serve(listener: TcpListener, name: &'static str) -> Killable {
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU64::new(0));
        let healthy = Arc::new(AtomicBool::new(true));
        let mut tasks = JoinSet::new();
        let (counter, health) = (Arc::clone(&requests), Arc::clone(&healthy));
        tasks.spawn(async move {
            // Connections live in this set: dropping it (kill) drops them.
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (counter, health) = (Arc::clone(&counter), Arc::clone(&health));
                let svc = service_fn(move |request: Request<Incoming>| {
                    let answer = if request.uri().path() == "/healthz" {
                        // Relaxed: a switch the test flips.
                        if health.load(Ordering::Relaxed) {
                            (StatusCode::OK, "ok")
                        } else {
                            (StatusCode::SERVICE_UNAVAILABLE, "down")
                        }
                    } else {
                        // Relaxed: a statistic.
                        counter.fetch_add(1, Ordering::Relaxed);
                        (StatusCode::OK, name)
                    };
                    let mut response =
                        Response::new(Full::new(Bytes::from_static(answer.1.as_bytes())));
                    *response.status_mut() = answer.0;
                    std::future::ready(Ok::<_, Infallible>(response))
                });
                connections.spawn(async move {
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Killable {
            addr,
            requests,
            healthy,
            tasks: Some(tasks),
        }
    }

    /// Requests answered (health probes not counted).
    pub(crate) fn requests(&self) -> u64 {
        // Relaxed: a statistic.
        self.requests.load(Ordering::Relaxed)
    }

    /// Closes the listener and every connection at once.
    pub(crate) async fn kill(&mut self) {
        if let Some(mut tasks) = self.tasks.take() {
            tasks.shutdown().await;
        }
    }
}

/// A gateway over `rules` (YAML) configured by the gateway-file `toml`
/// (written beside the rules, so relative paths resolve there).
pub(crate) async fn gateway(dir: &Path, rules: &str, toml: &str) -> Running {
    metrics_handle();
    let file = dir.join("rules.yaml");
    std::fs::write(&file, rules).unwrap();
    let rules = RuleSet::load(&file).expect("good rules");
    let gw = dir.join("gateway.toml");
    let mut config = GatewayConfig::from_toml(&gw, toml).expect("good gateway file");
    config.validate().expect("valid gateway file");
    // No drain delay unless the test sets one: the default 5 s would only
    // make every shutdown of these tests wait (support/mod.rs does the same).
    if !toml.contains("drain") {
        config.timeouts.drain = std::time::Duration::ZERO;
    }
    Gateway::new(config, rules)
        .start()
        .await
        .expect("gateway starts")
}

/// A rules file with no rule routed.
pub(crate) const NO_RULES: &str = "rate_limits: {}\n";
