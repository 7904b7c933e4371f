//! `GRPC_SERVER_USE_TLS` on the gRPC listener: a real Envoy asking the RLS
//! over TLS and over mTLS (its client certificate checked against
//! `GRPC_CLIENT_TLS_CACERT`; an Envoy without one gets no answer, so its
//! `failure_mode_deny` refuses), `GRPC_CLIENT_TLS_SAN`, and a certificate
//! replaced on disk served to the next handshake. The CA and certificates
//! are made by the test (rcgen).

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use limiter_test_support::tls::TestPki;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use support::{Envoy, Rls, free_port, temp_dir, upstream};

const CONFIG: &str = "domain: test
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
";

/// The RLS serving gRPC over TLS with `cert` and `key`, and `extra`.
fn rls(cert: &Path, key: &Path, extra: &[(&str, &str)]) -> Rls {
    let root = temp_dir("grpc-tls");
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/a.yaml"), CONFIG).unwrap();
    let cert = cert.display().to_string();
    let key = key.display().to_string();
    let mut env = vec![
        ("GRPC_SERVER_USE_TLS", "true"),
        ("GRPC_SERVER_TLS_CERT", cert.as_str()),
        ("GRPC_SERVER_TLS_KEY", key.as_str()),
    ];
    env.extend_from_slice(extra);
    Rls::start(&root, 0, &env)
}

/// Envoy in front of `upstream`, asking the RLS at `rls` over TLS (trusting
/// `ca`, checking the name `localhost`), with `client` as its certificate;
/// `failure_mode_deny`, so a call that fails answers 500.
fn envoy(upstream: u16, rls: SocketAddr, ca: &Path, client: Option<(&Path, &Path)>) -> Envoy {
    let port = free_port();
    let admin = free_port();
    let certificates = client.map_or(String::new(), |(cert, key)| {
        format!(
            "\n          tls_certificates: [{{certificate_chain: {{filename: {}}}, private_key: {{filename: {}}}}}]",
            cert.display(),
            key.display()
        )
    });
    let (rls_port, ca) = (rls.port(), ca.display());
    let yaml = format!(
        r#"admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}
static_resources:
  listeners:
  - name: main
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: "/"}}
                route:
                  cluster: upstream
                  rate_limits:
                  - actions: [{{request_headers: {{header_name: x-user, descriptor_key: user}}}}]
          http_filters:
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: test
              failure_mode_deny: true
              timeout: 2s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {{envoy_grpc: {{cluster_name: rls}}, timeout: 2s}}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  clusters:
  - name: upstream
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: upstream
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {upstream}}}}}}}}}]}}]
  - name: rls
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          alpn_protocols: [h2]
          validation_context:
            trusted_ca: {{filename: {ca}}}
            match_typed_subject_alt_names: [{{san_type: DNS, matcher: {{exact: localhost}}}}]{certificates}
    load_assignment:
      cluster_name: rls
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {rls_port}}}}}}}}}]}}]
"#
    );
    Envoy::start(&yaml, port, admin)
}

fn statuses(envoy: &Envoy, user: &str, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| envoy.get(&[("x-user", user)]).status)
        .collect()
}

#[test]
fn envoy_asks_the_rls_over_tls() {
    let pki = TestPki::new("rls-tls");
    let rls = rls(&pki.server_cert, &pki.server_key, &[]);
    let envoy = envoy(upstream(), rls.grpc, &pki.ca, None);
    // Decided by the RLS over TLS: the limit, then Envoy's 429 (a failed
    // call would be 500 under failure_mode_deny).
    assert_eq!(statuses(&envoy, "a", 3), [200, 200, 429]);
}

#[test]
fn envoy_asks_the_rls_over_mtls_and_one_without_a_certificate_is_refused() {
    let pki = TestPki::new("rls-mtls");
    let ca = pki.ca.display().to_string();
    let rls = rls(
        &pki.server_cert,
        &pki.server_key,
        &[("GRPC_CLIENT_TLS_CACERT", ca.as_str())],
    );
    let up = upstream();
    let with_cert = envoy(
        up,
        rls.grpc,
        &pki.ca,
        Some((&pki.client_cert, &pki.client_key)),
    );
    assert_eq!(statuses(&with_cert, "a", 3), [200, 200, 429]);
    let without = envoy(up, rls.grpc, &pki.ca, None);
    assert_eq!(statuses(&without, "b", 2), [500, 500]);
}

/// The server's leaf certificate, from a handshake that trusts `ca` and
/// presents `client`; the error when the handshake or first read fails.
async fn served_cert(
    addr: SocketAddr,
    ca: &Path,
    client: Option<(&Path, &Path)>,
) -> Result<Vec<u8>, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            builder
                .with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(key).unwrap())
                .unwrap()
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    // An HTTP/2 preface: the server's SETTINGS come back only if it kept
    // the connection (TLS 1.3 reports a refused client certificate here).
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .map_err(|e| e.to_string())?;
    let mut frame = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(10), tls.read_exact(&mut frame))
        .await
        .map_err(|_| "no answer".to_owned())?
        .map_err(|e| e.to_string())?;
    let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    Ok(leaf)
}

fn der(pem: &Path) -> Vec<u8> {
    CertificateDer::from_pem_file(pem).unwrap().to_vec()
}

/// Writes `from` over `to` by rename, as a Secret update or an editor does.
fn replace(from: &PathBuf, to: &PathBuf) {
    let tmp = to.with_extension("tmp");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_replaced_on_disk_is_served_to_the_next_handshake() {
    let old = TestPki::new("rls-old");
    let new = TestPki::new("rls-new");
    let ca = old.ca.display().to_string();
    // The RLS's own copies of the old pair, which the test then replaces.
    let dir = temp_dir("grpc-tls-files");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::copy(&old.server_cert, &cert).unwrap();
    std::fs::copy(&old.server_key, &key).unwrap();
    let client = Some((old.client_cert.as_path(), old.client_key.as_path()));
    let rls = {
        let (cert, key) = (cert.clone(), key.clone());
        tokio::task::spawn_blocking(move || {
            rls(&cert, &key, &[("GRPC_CLIENT_TLS_CACERT", ca.as_str())])
        })
        .await
        .unwrap()
    };
    let addr = rls.grpc;

    assert_eq!(
        served_cert(addr, &old.ca, client).await,
        Ok(der(&old.server_cert))
    );
    assert!(served_cert(addr, &new.ca, client).await.is_err());
    // mTLS: no client certificate, no answer.
    assert!(served_cert(addr, &old.ca, None).await.is_err());

    replace(&new.server_key, &key);
    replace(&new.server_cert, &cert);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match served_cert(addr, &new.ca, client).await {
            Ok(leaf) => {
                assert_eq!(leaf, der(&new.server_cert));
                break;
            }
            Err(e) => assert!(
                Instant::now() < deadline,
                "the new certificate never served: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The client CA was not replaced: the old client certificate still
    // passes, none still fails.
    assert!(served_cert(addr, &new.ca, None).await.is_err());
}

/// A CA, a `localhost` server pair and two client pairs (one naming
/// `ratelimit-client.test`, one naming nothing) as PEM files in `dir`.
fn pki_with_names(dir: &Path) -> [PathBuf; 7] {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server, server_key) = leaf(vec!["localhost".into()]);
    let (named, named_key) = leaf(vec!["ratelimit-client.test".into()]);
    let (nameless, nameless_key) = leaf(Vec::new());
    let files = [
        ("ca.pem", ca_pem),
        ("server.pem", server),
        ("server.key", server_key),
        ("named.pem", named),
        ("named.key", named_key),
        ("nameless.pem", nameless),
        ("nameless.key", nameless_key),
    ];
    files.map(|(name, pem)| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_client_certificate_with_the_required_name_is_answered() {
    let dir = temp_dir("grpc-tls-san");
    let [ca, cert, key, named, named_key, nameless, nameless_key] = pki_with_names(&dir);
    let rls = {
        let (cert, key, ca) = (cert.clone(), key.clone(), ca.display().to_string());
        tokio::task::spawn_blocking(move || {
            let env = [
                ("GRPC_CLIENT_TLS_CACERT", ca.as_str()),
                ("GRPC_CLIENT_TLS_SAN", "ratelimit-client.test"),
            ];
            rls(&cert, &key, &env)
        })
        .await
        .unwrap()
    };
    assert_eq!(
        served_cert(rls.grpc, &ca, Some((&named, &named_key))).await,
        Ok(der(&cert))
    );
    // Signed by the trusted CA, but naming no DNS name at all.
    let refused = served_cert(rls.grpc, &ca, Some((&nameless, &nameless_key))).await;
    assert!(refused.is_err(), "{refused:?}");
}
