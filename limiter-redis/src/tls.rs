//! [`RedisTls`]: the TLS settings of a [`RedisEndpoint`](crate::RedisEndpoint),
//! as PEM bytes (read from files by [`RedisTls::from_files`]), turned into
//! redis-rs' certificates when a connection is made. The chain of the
//! server's certificate is always verified; only the host name check can
//! be skipped.

use core::fmt;
use std::path::Path;

use redis::{ClientTlsConfig, TlsCertificates};

use crate::error::EndpointError;

/// TLS to Redis: which CA to trust (the system's roots by default), an
/// optional client certificate (for `tls-auth-clients yes`), and whether
/// to skip the host name check (the chain is always verified).
#[derive(Clone, Default)]
pub struct RedisTls {
    ca_pem: Option<Vec<u8>>,
    client: Option<(Vec<u8>, Vec<u8>)>,
    pub(crate) skip_hostname: bool,
}

impl RedisTls {
    /// TLS checked against the system's root certificates, no client
    /// certificate, host names checked.
    pub fn new() -> RedisTls {
        RedisTls::default()
    }

    /// Trust the CA certificate(s) in `pem` instead of the system's roots.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> RedisTls {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Present this client certificate (chain) and key, both PEM.
    pub fn client_cert_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> RedisTls {
        self.client = Some((cert.into(), key.into()));
        self
    }

    /// Accept a server certificate whose names do not match the host
    /// connected to (its chain is still verified against the CA): for
    /// servers reached by an address their certificate does not name.
    pub fn skip_hostname_verification(mut self, on: bool) -> RedisTls {
        self.skip_hostname = on;
        self
    }

    /// The CA, client certificate and key read from PEM files (each
    /// optional; a certificate needs its key and the other way round).
    ///
    /// # Errors
    ///
    /// [`EndpointError::File`] for a file that cannot be read,
    /// [`EndpointError::InvalidTls`] for a certificate without its key.
    pub fn from_files(
        ca: Option<&Path>,
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> Result<RedisTls, EndpointError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|error| EndpointError::File {
                path: path.to_owned(),
                error,
            })
        };
        let mut tls = RedisTls::new();
        if let Some(ca) = ca {
            tls = tls.ca_pem(read(ca)?);
        }
        match (cert, key) {
            (Some(cert), Some(key)) => tls = tls.client_cert_pem(read(cert)?, read(key)?),
            (None, None) => {}
            _ => {
                return Err(EndpointError::InvalidTls {
                    reason: "a client certificate needs its key, and a key its certificate".into(),
                });
            }
        }
        Ok(tls)
    }

    pub(crate) fn certificates(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: self.client.as_ref().map(|(cert, key)| ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
            root_cert: self.ca_pem.clone(),
        }
    }
}

impl fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTls")
            .field(
                "ca",
                &self.ca_pem.as_ref().map_or("system roots", |_| "given"),
            )
            .field("client_cert", &self.client.is_some())
            .field("skip_hostname_verification", &self.skip_hostname)
            .finish()
    }
}
