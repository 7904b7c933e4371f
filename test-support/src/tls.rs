//! A test CA made at run time (rcgen) with a server certificate for
//! `localhost` (only: `127.0.0.1` is a name it does not match) and a
//! client certificate, written as PEM files in a temporary directory
//! (removed on drop), and the `redis-server` arguments of a TLS port that
//! requires client certificates signed by that CA (Debian's redis-server
//! is built with TLS).

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The PEM files of one test CA.
#[derive(Debug)]
pub struct TestPki {
    /// The directory holding the files (removed on drop).
    pub dir: PathBuf,
    /// The CA certificate.
    pub ca: PathBuf,
    /// The server's certificate (`localhost`).
    pub server_cert: PathBuf,
    /// The server's key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA.
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
}

impl TestPki {
    /// A new CA and its certificates in a fresh directory named after `name`.
    pub fn new(name: &str) -> TestPki {
        let dir = std::env::temp_dir().join(format!(
            "limiter-redis-pki-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("pki temp dir");
        let (ca_pem, issuer) = ca("limiter test CA");
        let leaf = |names: Vec<String>, cn: &str| {
            let mut params = CertificateParams::new(names).expect("leaf params");
            params.distinguished_name.push(DnType::CommonName, cn);
            let key = KeyPair::generate().expect("leaf key");
            let cert = params.signed_by(&key, &issuer).expect("sign leaf");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(vec!["localhost".to_owned()], "redis");
        let (client_cert, client_key) = leaf(Vec::new(), "limiter client");
        let write = |file: &str, pem: &str| {
            let path = dir.join(file);
            std::fs::write(&path, pem).expect("write pem");
            path
        };
        TestPki {
            ca: write("ca.pem", &ca_pem),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server.key", &server_key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client.key", &client_key),
            dir,
        }
    }

    /// Another CA's certificate (trusting it must fail the handshake).
    pub fn other_ca(&self) -> PathBuf {
        let path = self.dir.join("other-ca.pem");
        std::fs::write(&path, ca("another CA").0).expect("write pem");
        path
    }

    /// `redis-server` arguments for a TLS port `tls_port` with this CA's
    /// server certificate, requiring client certificates.
    pub fn server_args(&self, tls_port: u16) -> Vec<String> {
        let path = |p: &PathBuf| p.display().to_string();
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            path(&self.server_cert),
            "--tls-key-file".into(),
            path(&self.server_key),
            "--tls-ca-cert-file".into(),
            path(&self.ca),
            "--tls-auth-clients".into(),
            "yes".into(),
        ]
    }

    /// `(CA, client certificate, client key)` as PEM bytes.
    pub fn client_pems(&self) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let read = |p: &PathBuf| std::fs::read(p).expect("read pem");
        (
            read(&self.ca),
            read(&self.client_cert),
            read(&self.client_key),
        )
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A self-signed CA: its PEM and the issuer that signs with it.
fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().expect("ca key");
    let pem = params.self_signed(&key).expect("self-sign ca").pem();
    (pem, Issuer::new(params, key))
}
