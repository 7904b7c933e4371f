//! Header hygiene between the two hops: hop-by-hop headers out, forwarding
//! headers in.
//!
//! Hop-by-hop (RFC 9110 §7.6.1): `Connection` and every header it names,
//! and `Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`,
//! `Upgrade` (and `Trailer`, which RFC 9110 §6.6.2 ties to the hop's
//! chunked coding), removed in both directions. `Content-Length` is end to
//! end and stays; when it is absent hyper re-frames the stream as chunked
//! on the next hop.
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

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Uri, Version};

/// The hop-by-hop headers every message loses (besides those named in
/// `Connection`). A `static`: a `const` array would be built and dropped
/// again at each use, for every header of every message.
pub(crate) static HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// Removes the hop-by-hop headers of `headers`, those named by its
/// `Connection` headers first.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the message's few names instead of a lookup per
    // hop-by-hop name: most messages carry none or one (`Connection`).
    let mut gone: Vec<HeaderName> = headers
        .keys()
        .filter(|k| HOP_BY_HOP.contains(k))
        .cloned()
        .collect();
    if gone.is_empty() {
        return;
    }
    let named = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok());
    gone.extend(named.collect::<Vec<_>>());
    for name in &gone {
        headers.remove(name);
    }
}

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

/// Appends the forwarding headers for a request from `peer` that arrived
/// over `proto` (`http` or `https`), and sets `Host` as the module doc says.
pub(crate) fn add_forwarding(
    headers: &mut HeaderMap,
    peer: IpAddr,
    version: Version,
    incoming: &Uri,
    upstream: &Uri,
    rewrite_host: bool,
    proto: &'static str,
) {
    if !headers.contains_key(header::HOST)
        && let Some(v) = incoming
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    {
        headers.insert(header::HOST, v);
    }
    // One buffer: the address, then `Forwarded`'s element.
    let mut buf = Vec::with_capacity(96);
    match peer {
        IpAddr::V4(v4) => push_v4(&mut buf, v4),
        IpAddr::V6(v6) => {
            let _ = write!(buf, "\"[{v6}]\"");
        }
    }
    let end = buf.len();
    buf.extend_from_slice(b"for=");
    buf.extend_from_within(..end);
    // `X-Forwarded-For` takes an IPv6 address without quotes and brackets.
    let ip = if peer.is_ipv6() { 2..end - 2 } else { 0..end };
    buf.extend_from_slice(b";proto=");
    buf.extend_from_slice(proto.as_bytes());
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if let Some(host) = host.filter(|h| is_token(h)) {
        buf.extend_from_slice(b";host=");
        buf.extend_from_slice(host.as_bytes());
    } else if let Some(host) = host {
        buf.extend_from_slice(b";host=\"");
        buf.extend(host.bytes().filter(|&b| b != b'"' && b != b'\\'));
        buf.push(b'"');
    }
    let forwarded = HeaderValue::from_bytes(&buf[end..]);
    if let Ok(v) = HeaderValue::from_bytes(&buf[ip]) {
        append(headers, X_FORWARDED_FOR, v);
    }
    if let Ok(v) = forwarded {
        append(headers, header::FORWARDED, v);
    }
    append(headers, X_FORWARDED_PROTO, HeaderValue::from_static(proto));
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

/// `ip` in dotted decimal, as its `Display` writes it (the formatting
/// machinery costs about 1,300 instructions a request, this about 60).
fn push_v4(buf: &mut Vec<u8>, ip: std::net::Ipv4Addr) {
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            buf.push(b'.');
        }
        if octet >= 100 {
            buf.push(b'0' + octet / 100);
        }
        if octet >= 10 {
            buf.push(b'0' + octet / 10 % 10);
        }
        buf.push(b'0' + octet % 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_named_headers_go_too() {
        let mut h = HeaderMap::new();
        h.insert("connection", "keep-alive, X-Secret".parse().unwrap());
        h.append("connection", "x-other".parse().unwrap());
        h.insert("x-secret", "1".parse().unwrap());
        h.insert("x-other", "1".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("te", "trailers".parse().unwrap());
        h.insert("transfer-encoding", "chunked".parse().unwrap());
        h.insert("upgrade", "websocket".parse().unwrap());
        h.insert("proxy-connection", "close".parse().unwrap());
        h.insert("content-length", "5".parse().unwrap());
        h.insert("x-kept", "1".parse().unwrap());
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["content-length", "x-kept"]);
    }

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
            "2001:db8::1".parse().unwrap(),
            Version::HTTP_11,
            &incoming,
            &up,
            false,
            "http",
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
            "192.0.2.7".parse().unwrap(),
            Version::HTTP_2,
            &incoming,
            &up,
            true,
            "https",
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
            peer,
            Version::HTTP_11,
            &incoming,
            &up,
            false,
            "http",
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
            "192.0.2.7".parse().unwrap(),
            Version::HTTP_2,
            &incoming,
            &up,
            false,
            "http",
        );
        assert_eq!(h["host"], "api.example");
        assert_eq!(h["forwarded"], "for=192.0.2.7;proto=http;host=api.example");
        assert_eq!(h["via"], "2 limiter-gateway");
    }
}
