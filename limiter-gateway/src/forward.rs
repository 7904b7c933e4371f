//! The forwarding headers a request gets on its way upstream (the other
//! half of the header hygiene between the hops is module `hop_by_hop`).
//!
//! Forwarding (appended to what earlier proxies wrote, never replacing
//! it): `X-Forwarded-For: <peer ip>`, `X-Forwarded-Proto: http` (or
//! `https` from a TLS listener), RFC 7239
//! `Forwarded: for=<peer>;proto=http;host=<host>` (IPv6 quoted and
//! bracketed) and `Via: 1.1 limiter-gateway` (RFC 9110 §7.6.3).
//!
//! `Host`: the client's `Host` goes to the upstream unchanged (virtual
//! hosting and absolute redirects keep working), or the upstream's own
//! authority with `rewrite_host`. An HTTP/2 request carries its authority
//! in the URI, not a header: it becomes `Host`.

use std::io::Write;
use std::net::IpAddr;
use std::sync::Mutex;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Uri, Version};

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// Adds `value` to the list header `name`: a new line when the message
/// has none (the common case), else joined to what earlier hops wrote.
fn append(headers: &mut HeaderMap, name: HeaderName, value: HeaderValue) {
    match headers.entry(name) {
        header::Entry::Vacant(slot) => {
            slot.insert(value);
        }
        header::Entry::Occupied(mut line) => {
            let mut joined = Vec::new();
            for v in line.iter() {
                joined.extend_from_slice(v.as_bytes());
                joined.extend_from_slice(b", ");
            }
            joined.extend_from_slice(value.as_bytes());
            if let Ok(v) = HeaderValue::from_bytes(&joined) {
                line.insert(v);
            }
        }
    }
}

/// `Via`'s value for a request that arrived over `version`.
fn via(version: Version) -> HeaderValue {
    HeaderValue::from_static(match version {
        Version::HTTP_09 => "0.9 limiter-gateway",
        Version::HTTP_10 => "1.0 limiter-gateway",
        Version::HTTP_2 => "2 limiter-gateway",
        Version::HTTP_3 => "3 limiter-gateway",
        _ => "1.1 limiter-gateway",
    })
}

/// The forwarding values of one client connection, computed once at
/// accept: its peer and proto never change, and its requests nearly always
/// name one `Host`, so `Forwarded`'s value is kept for the last one seen.
/// A request clones the values (a reference count each), never formats.
#[derive(Debug)]
pub(crate) struct ClientHop {
    /// `X-Forwarded-For`'s element: the address (IPv6 bare).
    xff: HeaderValue,
    /// `Forwarded`'s element without `host`: `for=<peer>;proto=<proto>`.
    forwarded: HeaderValue,
    proto: &'static str,
    /// The last `Host` and the `Forwarded` element naming it. An owned
    /// copy of the host: a clone of the request's value would hold hyper's
    /// read buffer.
    last_host: Mutex<Option<(Box<[u8]>, HeaderValue)>>,
}

impl ClientHop {
    /// The values for a connection from `peer` over `proto` (`http` or
    /// `https`).
    pub(crate) fn new(peer: IpAddr, proto: &'static str) -> ClientHop {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(b"for=");
        match peer {
            IpAddr::V4(v4) => push_v4(&mut buf, v4),
            IpAddr::V6(v6) => {
                let _ = write!(buf, "\"[{v6}]\"");
            }
        }
        // `X-Forwarded-For` takes an IPv6 address without quotes and brackets.
        let ip = if peer.is_ipv6() {
            6..buf.len() - 2
        } else {
            4..buf.len()
        };
        let xff = HeaderValue::from_bytes(&buf[ip]);
        buf.extend_from_slice(b";proto=");
        buf.extend_from_slice(proto.as_bytes());
        // An address and a static proto: visible ASCII, always a value.
        let forwarded = HeaderValue::from_bytes(&buf);
        ClientHop {
            xff: xff.unwrap_or_else(|_| HeaderValue::from_static("unknown")),
            forwarded: forwarded.unwrap_or_else(|_| HeaderValue::from_static("for=unknown")),
            proto,
            last_host: Mutex::new(None),
        }
    }

    /// `Forwarded`'s element for a request with `host` (none when the
    /// host is no text).
    fn forwarded(&self, host: Option<&HeaderValue>) -> HeaderValue {
        let Some(host) = host else {
            return self.forwarded.clone();
        };
        // Contended only between HTTP/2 streams: they build their own.
        let mut last = self.last_host.try_lock().ok();
        if let Some(Some((name, value))) = last.as_deref()
            && **name == *host.as_bytes()
        {
            return value.clone();
        }
        let Ok(text) = host.to_str() else {
            return self.forwarded.clone();
        };
        let value = self.forwarded_with_host(text);
        if let Some(last) = last.as_deref_mut() {
            *last = Some((host.as_bytes().into(), value.clone()));
        }
        value
    }

    /// `for=<peer>;proto=<proto>;host=<host>`, the host quoted unless it is
    /// a token (without the quotes and backslashes it may carry).
    fn forwarded_with_host(&self, host: &str) -> HeaderValue {
        let mut buf = Vec::with_capacity(self.forwarded.len() + host.len() + 8);
        buf.extend_from_slice(self.forwarded.as_bytes());
        if is_token(host) {
            buf.extend_from_slice(b";host=");
            buf.extend_from_slice(host.as_bytes());
        } else {
            buf.extend_from_slice(b";host=\"");
            buf.extend(host.bytes().filter(|&b| b != b'"' && b != b'\\'));
            buf.push(b'"');
        }
        HeaderValue::from_bytes(&buf).unwrap_or_else(|_| self.forwarded.clone())
    }
}

/// Appends the forwarding headers for a request on the connection `hop`
/// that arrived over `version`, and sets `Host` as the module doc says.
pub(crate) fn add_forwarding(
    headers: &mut HeaderMap,
    hop: &ClientHop,
    version: Version,
    incoming: &Uri,
    upstream: &Uri,
    rewrite_host: bool,
) {
    if !headers.contains_key(header::HOST)
        && let Some(v) = incoming
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    {
        headers.insert(header::HOST, v);
    }
    let forwarded = hop.forwarded(headers.get(header::HOST));
    append(headers, X_FORWARDED_FOR, hop.xff.clone());
    append(headers, header::FORWARDED, forwarded);
    append(
        headers,
        X_FORWARDED_PROTO,
        HeaderValue::from_static(hop.proto),
    );
    append(headers, header::VIA, via(version));
    if rewrite_host
        && let Some(v) = upstream
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    {
        headers.insert(header::HOST, v);
    }
}

/// An RFC 9110 token (what `Forwarded` may carry unquoted).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// `ip` in dotted decimal, as its `Display` writes it (each octet through
/// `itoa`, as limiter-tower's key encoding writes it).
fn push_v4(buf: &mut Vec<u8>, ip: std::net::Ipv4Addr) {
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            buf.push(b'.');
        }
        buf.extend_from_slice(itoa::Buffer::new().format(octet).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarding_appends() {
        let mut h = HeaderMap::new();
        h.insert("host", "example.com:8080".parse().unwrap());
        h.insert("x-forwarded-for", "198.51.100.1".parse().unwrap());
        h.insert("forwarded", "for=198.51.100.1".parse().unwrap());
        let up: Uri = "http://10.0.0.9:3000".parse().unwrap();
        let incoming: Uri = "/x".parse().unwrap();
        add_forwarding(
            &mut h,
            &ClientHop::new("2001:db8::1".parse().unwrap(), "http"),
            Version::HTTP_11,
            &incoming,
            &up,
            false,
        );
        assert_eq!(h["x-forwarded-for"], "198.51.100.1, 2001:db8::1");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(
            h["forwarded"],
            "for=198.51.100.1, for=\"[2001:db8::1]\";proto=http;host=\"example.com:8080\""
        );
        assert_eq!(h["via"], "1.1 limiter-gateway");
        assert_eq!(h["host"], "example.com:8080");
        add_forwarding(
            &mut h,
            &ClientHop::new("192.0.2.7".parse().unwrap(), "https"),
            Version::HTTP_2,
            &incoming,
            &up,
            true,
        );
        assert_eq!(h["host"], "10.0.0.9:3000");
        assert_eq!(h["x-forwarded-for"], "198.51.100.1, 2001:db8::1, 192.0.2.7");
        assert_eq!(h["x-forwarded-proto"], "http, https");
    }

    #[test]
    fn ipv4_is_written_as_display_writes_it() {
        for octet in [0u8, 7, 9, 10, 42, 99, 100, 101, 199, 200, 255] {
            let ip = std::net::Ipv4Addr::new(octet, 255 - octet, octet / 3, 1);
            let mut buf = Vec::new();
            push_v4(&mut buf, ip);
            assert_eq!(String::from_utf8(buf).unwrap(), ip.to_string());
        }
    }

    #[test]
    fn a_host_that_is_no_token_is_quoted_without_quotes_or_backslashes() {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("a\\b\"c:80"));
        let up: Uri = "http://10.0.0.9:3000".parse().unwrap();
        let incoming: Uri = "/x".parse().unwrap();
        let peer = "192.0.2.7".parse().unwrap();
        add_forwarding(
            &mut h,
            &ClientHop::new(peer, "http"),
            Version::HTTP_11,
            &incoming,
            &up,
            false,
        );
        assert_eq!(h["forwarded"], "for=192.0.2.7;proto=http;host=\"abc:80\"");
    }

    #[test]
    fn h2_authority_becomes_host() {
        let mut h = HeaderMap::new();
        let incoming: Uri = "http://api.example/x".parse().unwrap();
        let up: Uri = "http://10.0.0.9:3000".parse().unwrap();
        add_forwarding(
            &mut h,
            &ClientHop::new("192.0.2.7".parse().unwrap(), "http"),
            Version::HTTP_2,
            &incoming,
            &up,
            false,
        );
        assert_eq!(h["host"], "api.example");
        assert_eq!(h["forwarded"], "for=192.0.2.7;proto=http;host=api.example");
        assert_eq!(h["via"], "2 limiter-gateway");
    }

    /// The request's own `Host`, every time: a connection's cached element
    /// follows it when it changes, and a request without one gets none.
    #[test]
    fn forwarded_follows_each_requests_host_on_one_connection() {
        let up: Uri = "http://10.0.0.9:3000".parse().unwrap();
        let incoming: Uri = "/x".parse().unwrap();
        for (peer, proto, xff, element) in [
            ("192.0.2.7", "http", "192.0.2.7", "for=192.0.2.7;proto=http"),
            (
                "2001:db8::1",
                "https",
                "2001:db8::1",
                "for=\"[2001:db8::1]\";proto=https",
            ),
        ] {
            let hop = ClientHop::new(peer.parse().unwrap(), proto);
            for host in [Some("a.example"), Some("a.example"), None, Some("b:80")] {
                for _ in 0..2 {
                    let mut h = HeaderMap::new();
                    if let Some(host) = host {
                        h.insert("host", HeaderValue::from_static(host));
                    }
                    add_forwarding(&mut h, &hop, Version::HTTP_11, &incoming, &up, false);
                    let expected = match host {
                        Some("b:80") => format!("{element};host=\"b:80\""),
                        Some(host) => format!("{element};host={host}"),
                        None => element.to_owned(),
                    };
                    assert_eq!(h["forwarded"], expected.as_str());
                    assert_eq!(h["x-forwarded-for"], xff);
                    assert_eq!(h["x-forwarded-proto"], proto);
                    assert_eq!(h.get("host").map(|v| v.to_str().unwrap()), host);
                }
            }
        }
    }

    #[test]
    fn a_host_that_is_no_text_is_left_out_of_forwarded() {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        let up: Uri = "http://10.0.0.9:3000".parse().unwrap();
        let incoming: Uri = "/x".parse().unwrap();
        let hop = ClientHop::new("192.0.2.7".parse().unwrap(), "http");
        add_forwarding(&mut h, &hop, Version::HTTP_11, &incoming, &up, false);
        assert_eq!(h["forwarded"], "for=192.0.2.7;proto=http");
    }
}
