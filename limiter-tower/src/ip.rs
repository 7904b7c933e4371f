//! Keys by address: [`PeerIp`], the socket peer, and the normalisation every
//! address key shares.
//!
//! Normalisation: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a
//! dual-stack socket reports for an IPv4 client) is the IPv4 address; an
//! IPv6 address is masked to its prefix, `/64` by default, because one
//! subscriber usually holds a whole `/64` and could otherwise take a fresh
//! bucket per address. IPv4 addresses are kept whole.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use ipnet::Ipv6Net;

use crate::key::{KeyError, KeyExtractor, RequestHead};

/// The peer's socket address, as a request extension: what a hyper (or any
/// non-axum) server inserts for each connection so that [`PeerIp`] and
/// [`ClientIp`](crate::ClientIp) can read it. Under axum,
/// `ConnectInfo<SocketAddr>` is read as well.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerAddr(pub SocketAddr);

/// The peer's socket address of a request: [`PeerAddr`], else axum's
/// `ConnectInfo<SocketAddr>`.
pub(crate) fn peer_addr(request: &RequestHead<'_>) -> Option<SocketAddr> {
    if let Some(PeerAddr(addr)) = request.extensions().get::<PeerAddr>() {
        return Some(*addr);
    }
    #[cfg(feature = "axum")]
    if let Some(info) = request
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(info.0);
    }
    None
}

/// An IPv6 prefix length was past 128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixError {
    /// The length asked for.
    pub prefix: u8,
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an IPv6 prefix of /{} is longer than an address; use 0 to 128",
            self.prefix
        )
    }
}

impl std::error::Error for PrefixError {}

/// How addresses become keys: IPv4-mapped IPv6 as IPv4, IPv6 masked to a
/// prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Normalize {
    v6_prefix: u8,
}

impl Normalize {
    pub(crate) const DEFAULT: Normalize = Normalize { v6_prefix: 64 };

    pub(crate) fn with_v6_prefix(prefix: u8) -> Result<Normalize, PrefixError> {
        if prefix > 128 {
            return Err(PrefixError { prefix });
        }
        Ok(Normalize { v6_prefix: prefix })
    }

    pub(crate) fn key(self, ip: IpAddr) -> IpAddr {
        match canonical(ip) {
            IpAddr::V4(v4) => IpAddr::V4(v4),
            IpAddr::V6(v6) => match Ipv6Net::new(v6, self.v6_prefix) {
                Ok(net) => IpAddr::V6(net.trunc().addr()),
                // Unreachable: the prefix was checked when it was set.
                Err(_) => IpAddr::V6(v6),
            },
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address; others unchanged.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The socket peer's address: right when clients connect directly; behind a
/// proxy every client would share the proxy's bucket (use
/// [`ClientIp`](crate::ClientIp) there).
///
/// A request without a peer address is answered `500` naming the fix
/// ([`KeyError::MissingPeer`]).
///
/// # Examples
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use http::Request;
/// use limiter_tower::{KeyExtractor, PeerAddr, PeerIp, RequestHead};
///
/// let mut request = Request::new(());
/// let peer: SocketAddr = "[2001:db8:1:2:3:4:5:6]:443".parse()?;
/// request.extensions_mut().insert(PeerAddr(peer));
/// let key = PeerIp::new().extract(&RequestHead::of(&request))?;
/// assert_eq!(key, "2001:db8:1:2::".parse::<IpAddr>()?); // its /64
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerIp {
    normalize: Normalize,
}

impl PeerIp {
    /// IPv6 peers by their `/64`.
    pub fn new() -> PeerIp {
        PeerIp {
            normalize: Normalize::DEFAULT,
        }
    }

    /// IPv6 peers by their first `prefix` bits (128: each address alone).
    ///
    /// # Errors
    ///
    /// [`PrefixError`] for a prefix past 128.
    pub fn with_v6_prefix(prefix: u8) -> Result<PeerIp, PrefixError> {
        Ok(PeerIp {
            normalize: Normalize::with_v6_prefix(prefix)?,
        })
    }
}

impl Default for PeerIp {
    fn default() -> PeerIp {
        PeerIp::new()
    }
}

impl KeyExtractor for PeerIp {
    type Key = IpAddr;

    fn extract(&self, request: &RequestHead<'_>) -> Result<IpAddr, KeyError> {
        peer_addr(request)
            .map(|addr| self.normalize.key(addr.ip()))
            .ok_or(KeyError::MissingPeer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn key(extractor: PeerIp, peer: &str) -> Result<IpAddr, KeyError> {
        let mut request = Request::new(());
        request
            .extensions_mut()
            .insert(PeerAddr(peer.parse().unwrap()));
        extractor.extract(&RequestHead::of(&request))
    }

    #[test]
    fn v4_mapped_is_v4_and_v6_is_masked() {
        assert_eq!(
            key(PeerIp::new(), "[::ffff:192.0.2.7]:1").unwrap(),
            "192.0.2.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            key(PeerIp::new(), "192.0.2.7:1").unwrap(),
            "192.0.2.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            key(PeerIp::new(), "[2001:db8:a:b:c:d:e:f]:1").unwrap(),
            "2001:db8:a:b::".parse::<IpAddr>().unwrap()
        );
        let exact = PeerIp::with_v6_prefix(128).unwrap();
        assert_eq!(
            key(exact, "[2001:db8:a:b:c:d:e:f]:1").unwrap(),
            "2001:db8:a:b:c:d:e:f".parse::<IpAddr>().unwrap()
        );
        let wide = PeerIp::with_v6_prefix(48).unwrap();
        assert_eq!(
            key(wide, "[2001:db8:a:b:c:d:e:f]:1").unwrap(),
            "2001:db8:a::".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            PeerIp::with_v6_prefix(129),
            Err(PrefixError { prefix: 129 })
        );
    }

    #[test]
    fn no_peer_is_an_error_naming_the_fix() {
        let request = Request::new(());
        let err = PeerIp::new()
            .extract(&RequestHead::of(&request))
            .unwrap_err();
        assert_eq!(err, KeyError::MissingPeer);
        assert!(
            err.to_string()
                .contains("into_make_service_with_connect_info::<SocketAddr>()")
        );
    }
}
