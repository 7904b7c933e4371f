//! [`ClientIp`]: the client's address behind trusted proxies.
//!
//! Each proxy appends the address it received the request from to the
//! forwarding header, so the header read right to left is a chain of
//! claims, each made by the hop after it. Only a claim made by a trusted
//! hop is believed. The walk therefore starts at the socket peer: an
//! untrusted peer is the client, whatever the header says. A trusted peer's
//! last entry is believed; if that address is trusted too, the entry before
//! it is believed, and so on. The key is the first address that is not a
//! trusted proxy: the rightmost untrusted one.
//!
//! What a spoofer can do: write anything to the left of what the first
//! trusted proxy appends. None of it is read, because the walk stops at the
//! address that proxy saw (the spoofer's own). What a spoofer cannot do:
//! pick its key. Taking the leftmost entry, as some middleware does, hands
//! every client a fresh bucket per request.
//!
//! An entry that is `unknown`, obfuscated (`for=_hidden`), or not an address
//! stops the walk: the key is the trusted hop that wrote it, so such clients
//! share that hop's bucket (strict), and never the entry to its left (which
//! a client may have written). When every address is a trusted proxy the
//! key is the leftmost.
//!
//! Addresses are normalised as [`PeerIp`](crate::PeerIp)'s (IPv4-mapped as
//! IPv4, IPv6 to its `/64` by default); ports (`1.2.3.4:80`,
//! `"[2001:db8::1]:443"`) are ignored.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::header::{FORWARDED, HeaderName};
use ipnet::IpNet;

use crate::ip::{Normalize, PrefixError, canonical, peer_addr};
use crate::key::{KeyError, KeyExtractor, RequestHead};

/// Which forwarding header the trusted proxies write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    /// `X-Forwarded-For: client, proxy1`.
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`.
    Forwarded,
}

/// The client's address: the rightmost address in the forwarding header
/// that is not a trusted proxy, read only when the socket peer is one.
///
/// Name the header your proxies write: a header they do not write is
/// entirely the client's, so reading it would let the client choose its
/// key.
///
/// # Examples
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use http::Request;
/// use limiter_tower::{ClientIp, KeyExtractor, PeerAddr, RequestHead};
///
/// let key = ClientIp::x_forwarded_for(["10.0.0.0/8".parse()?]);
/// let mut request = Request::builder()
///     // The client wrote "1.1.1.1"; the proxy 10.0.0.2 appended 203.0.113.9.
///     .header("x-forwarded-for", "1.1.1.1, 203.0.113.9")
///     .body(())?;
/// request.extensions_mut().insert(PeerAddr("10.0.0.2:5000".parse()?));
/// assert_eq!(key.extract(&RequestHead::of(&request))?, "203.0.113.9".parse::<IpAddr>()?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientIp {
    trusted: Vec<IpNet>,
    syntax: Syntax,
    normalize: Normalize,
}

impl ClientIp {
    /// Reads `X-Forwarded-For` from peers within `trusted_proxies`.
    pub fn x_forwarded_for(trusted_proxies: impl IntoIterator<Item = IpNet>) -> ClientIp {
        ClientIp::with_syntax(trusted_proxies, Syntax::XForwardedFor)
    }

    /// Reads RFC 7239 `Forwarded` (`for=` parameters) from peers within
    /// `trusted_proxies`.
    pub fn forwarded(trusted_proxies: impl IntoIterator<Item = IpNet>) -> ClientIp {
        ClientIp::with_syntax(trusted_proxies, Syntax::Forwarded)
    }

    fn with_syntax(trusted: impl IntoIterator<Item = IpNet>, syntax: Syntax) -> ClientIp {
        ClientIp {
            trusted: trusted.into_iter().map(|n| n.trunc()).collect(),
            syntax,
            normalize: Normalize::DEFAULT,
        }
    }

    /// Keys IPv6 clients by their first `prefix` bits (default 64).
    ///
    /// # Errors
    ///
    /// [`PrefixError`] for a prefix past 128.
    pub fn v6_prefix(mut self, prefix: u8) -> Result<ClientIp, PrefixError> {
        self.normalize = Normalize::with_v6_prefix(prefix)?;
        Ok(self)
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// Walks the forwarding entries of `request` right to left (the last
    /// header line first), calling `step` with each (`None` for an entry
    /// that names no address) until it returns `false`. Nothing is
    /// collected: the entries are read in place.
    fn walk_entries(
        &self,
        request: &RequestHead<'_>,
        mut step: impl FnMut(Option<IpAddr>) -> bool,
    ) {
        let name: HeaderName = match self.syntax {
            Syntax::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
            Syntax::Forwarded => FORWARDED,
        };
        for value in request.headers().get_all(name).iter().rev() {
            let Ok(value) = value.to_str() else {
                // Not text: nothing in it can be believed.
                if !step(None) {
                    return;
                }
                continue;
            };
            for element in value.rsplit(',') {
                let entry = match self.syntax {
                    Syntax::XForwardedFor => parse_node(element),
                    Syntax::Forwarded => forwarded_for(element).and_then(parse_node),
                };
                if !step(entry) {
                    return;
                }
            }
        }
    }
}

impl KeyExtractor for ClientIp {
    type Key = IpAddr;

    fn extract(&self, request: &RequestHead<'_>) -> Result<IpAddr, KeyError> {
        let peer = peer_addr(request).ok_or(KeyError::MissingPeer)?;
        let mut current = canonical(peer.ip());
        if !self.is_trusted(current) {
            return Ok(self.normalize.key(current));
        }
        self.walk_entries(request, |entry| match entry {
            // `unknown`, obfuscated or garbage: stop at the hop that wrote it.
            None => false,
            Some(ip) => {
                current = canonical(ip);
                self.is_trusted(current)
            }
        });
        Ok(self.normalize.key(current))
    }
}

/// The `for=` value of one `Forwarded` element.
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then_some(value)
    })
}

/// An address with an optional port: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:443`, each optionally quoted. `None` for
/// `unknown`, obfuscated identifiers and anything else.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim();
    let node = node
        .strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .unwrap_or(node);
    if let Some(rest) = node.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let port_ok = after.is_empty() || is_port(after.strip_prefix(':')?);
        return port_ok
            .then(|| inside.parse::<Ipv6Addr>().ok().map(IpAddr::V6))
            .flatten();
    }
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    let (host, port) = node.rsplit_once(':')?;
    if !is_port(port) {
        return None;
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PeerAddr;
    use http::Request;

    fn key(extractor: &ClientIp, peer: &str, headers: &[(&str, &str)]) -> IpAddr {
        let mut builder = Request::builder();
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut request = builder.body(()).unwrap();
        request
            .extensions_mut()
            .insert(PeerAddr(peer.parse().unwrap()));
        extractor.extract(&RequestHead::of(&request)).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn proxies() -> Vec<IpNet> {
        vec!["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()]
    }

    #[test]
    fn parses_nodes_with_ports_and_quotes() {
        assert_eq!(parse_node(" 192.0.2.1 "), Some(ip("192.0.2.1")));
        assert_eq!(parse_node("192.0.2.1:8080"), Some(ip("192.0.2.1")));
        assert_eq!(parse_node("2001:db8::1"), Some(ip("2001:db8::1")));
        assert_eq!(
            parse_node("\"[2001:db8::1]:4711\""),
            Some(ip("2001:db8::1"))
        );
        assert_eq!(parse_node("[2001:db8::1]"), Some(ip("2001:db8::1")));
        assert_eq!(parse_node("unknown"), None);
        assert_eq!(parse_node("_hidden"), None);
        assert_eq!(parse_node("[2001:db8::1]:port"), None);
        assert_eq!(
            forwarded_for("proto=https;For=\"[2001:db8::2]:80\";by=x"),
            Some("\"[2001:db8::2]:80\"")
        );
    }

    #[test]
    fn untrusted_peer_is_the_client_whatever_the_header_says() {
        let x = ClientIp::x_forwarded_for(proxies());
        assert_eq!(
            key(&x, "198.51.100.1:1", &[("x-forwarded-for", "1.2.3.4")]),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn forged_leftmost_entry_is_never_the_key() {
        let x = ClientIp::x_forwarded_for(proxies());
        let h = [("x-forwarded-for", "6.6.6.6, 203.0.113.9, 10.1.1.1")];
        assert_eq!(key(&x, "10.0.0.2:1", &h), ip("203.0.113.9"));
    }

    #[test]
    fn unknown_and_obfuscated_stop_at_the_trusted_hop() {
        let x = ClientIp::x_forwarded_for(proxies());
        let h = [("x-forwarded-for", "6.6.6.6, unknown")];
        assert_eq!(key(&x, "10.0.0.2:1", &h), ip("10.0.0.2"));
        let f = ClientIp::forwarded(proxies());
        let h = [(
            "forwarded",
            "for=6.6.6.6, for=_hidden;proto=https, for=10.3.3.3",
        )];
        assert_eq!(key(&f, "10.0.0.2:1", &h), ip("10.3.3.3"));
    }

    #[test]
    fn forwarded_ipv6_with_port_and_multiple_lines() {
        let f = ClientIp::forwarded(proxies());
        let h = [
            ("forwarded", "for=6.6.6.6"),
            (
                "forwarded",
                "for=\"[2001:db8:cafe:1::17]:4711\", for=\"[fd00::1]\"",
            ),
        ];
        assert_eq!(key(&f, "[fd00::2]:1", &h), ip("2001:db8:cafe:1::"));
    }

    #[test]
    fn all_trusted_takes_the_leftmost_and_mapped_peers_match_v4_nets() {
        let x = ClientIp::x_forwarded_for(proxies());
        let h = [("x-forwarded-for", "10.9.9.9, 10.1.1.1")];
        assert_eq!(key(&x, "[::ffff:10.0.0.2]:1", &h), ip("10.9.9.9"));
    }

    #[test]
    fn the_other_header_is_not_read() {
        let x = ClientIp::x_forwarded_for(proxies());
        let h = [("forwarded", "for=6.6.6.6")];
        assert_eq!(key(&x, "10.0.0.2:1", &h), ip("10.0.0.2"));
    }
}
