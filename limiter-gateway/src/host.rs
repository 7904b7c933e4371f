//! The request's host, checked before anything reads it (RFC 9112 §3.2:
//! a request whose `Host` is invalid, missing from HTTP/1.1 or repeated is
//! answered `400`).
//!
//! # What is valid
//!
//! A `Host` value, and the authority of an absolute-form target or of an
//! HTTP/2 `:authority`, is `host [ ":" port ]` with RFC 3986's grammar:
//!
//! * `host` is an IP-literal (`[` an IPv6 address or `v` HEX `.` … `]`),
//!   or a reg-name of unreserved characters, percent-escapes and
//!   sub-delimiters (`A-Z a-z 0-9 - . _ ~ ! $ & ' ( ) * + , ; =`), which
//!   covers dotted IPv4 too. It is never empty: an empty name names no
//!   server, and the gateway's targets always have one.
//! * `port`, when the `:` is there, is 1 to 5 digits, at most 65535 (an
//!   empty port is refused, though RFC 3986 lets it be empty: producers
//!   must omit it, and upstreams read it differently).
//!
//! So `[::1`, `[::1]x`, `exa mple.com`, `a@b.example` (user information is
//! not part of a `Host`, and RFC 9110 §4.2.4 makes it an error in an
//! `http` URI), `a/b`, `example.com:`, `example.com:99999x` and any byte
//! outside ASCII are refused.
//!
//! The authority of an absolute-form target or an HTTP/2 `:authority` must
//! be valid too. When an HTTP/1 absolute-form target comes with a `Host`,
//! the two must name the same host and port (ASCII case ignored, a missing
//! port being the scheme's default): RFC 9112 §3.2.2 tells an origin
//! server to ignore such a `Host`, but a proxy that forwards it would hand
//! the upstream a host the gateway did not route by.

use http::{HeaderMap, Uri, Version, header};

/// Why a request's host is refused: the problem document's detail.
pub(crate) type HostError = &'static str;

/// `authority`'s host and port (`None` for no port), or `None` if it is
/// not valid (module doc).
fn split(authority: &[u8]) -> Option<(&[u8], Option<u16>)> {
    let (host, port) = if authority.first() == Some(&b'[') {
        let close = authority.iter().position(|&b| b == b']')?;
        let (literal, rest) = authority.split_at(close + 1);
        if !is_ip_literal(&literal[1..close]) {
            return None;
        }
        match rest {
            [] => (literal, None),
            [b':', port @ ..] => (literal, Some(port)),
            _ => return None,
        }
    } else {
        match authority.iter().position(|&b| b == b':') {
            Some(colon) => (&authority[..colon], Some(&authority[colon + 1..])),
            None => (authority, None),
        }
    };
    if host.is_empty() || (host[0] != b'[' && !is_reg_name(host)) {
        return None;
    }
    let port = match port {
        None => None,
        Some(digits) => Some(parse_port(digits)?),
    };
    Some((host, port))
}

/// 1 to 5 digits, at most 65535.
fn parse_port(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn is_unreserved_or_sub_delim(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b)
}

/// RFC 3986's `reg-name`: unreserved, percent-escapes, sub-delimiters.
fn is_reg_name(s: &[u8]) -> bool {
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let hex = |j: usize| s.get(j).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(i + 1) && hex(i + 2)) {
                    return false;
                }
                i += 3;
            }
            b if is_unreserved_or_sub_delim(b) => i += 1,
            _ => return false,
        }
    }
    true
}

/// The inside of `[` `]`: an IPv6 address, or `v` HEX+ `.` (unreserved,
/// sub-delimiters, `:`)+ (IPvFuture).
fn is_ip_literal(inside: &[u8]) -> bool {
    if let [b'v' | b'V', rest @ ..] = inside {
        let Some(dot) = rest.iter().position(|&b| b == b'.') else {
            return false;
        };
        let (version, tail) = (&rest[..dot], &rest[dot + 1..]);
        return !version.is_empty()
            && version.iter().all(u8::is_ascii_hexdigit)
            && !tail.is_empty()
            && tail
                .iter()
                .all(|&b| b == b':' || is_unreserved_or_sub_delim(b));
    }
    std::str::from_utf8(inside).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

/// The port a request to `uri`'s scheme goes to when none is written.
fn default_port(uri: &Uri) -> u16 {
    match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("https") => 443,
        _ => 80,
    }
}

/// Whether two valid authorities name the same host and port.
fn same(a: (&[u8], Option<u16>), b: (&[u8], Option<u16>), default: u16) -> bool {
    a.0.eq_ignore_ascii_case(b.0) && a.1.unwrap_or(default) == b.1.unwrap_or(default)
}

/// Checks the request's `Host` header and target authority (module doc):
/// the problem document's detail when they are refused.
///
/// # Errors
///
/// An HTTP/1.1 request without exactly one `Host`, a `Host` or authority
/// that is not valid, or a `Host` that names another authority than the
/// target's.
pub(crate) fn check(version: Version, uri: &Uri, headers: &HeaderMap) -> Result<(), HostError> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err("a request has at most one Host header");
    }
    if host.is_none() && version == Version::HTTP_11 {
        return Err("an HTTP/1.1 request needs a Host header");
    }
    let host = match host {
        Some(value) => Some(split(value.as_bytes()).ok_or(
            "the Host header is not host[:port] (a name, an IPv4 address or a [bracketed] IPv6 address; a port of 1 to 5 digits up to 65535)",
        )?),
        None => None,
    };
    let Some(authority) = uri.authority() else {
        return Ok(());
    };
    let target = split(authority.as_str().as_bytes()).ok_or(
        "the request target's authority is not host[:port] (no user information, a port up to 65535)",
    )?;
    // HTTP/1's absolute form only: over HTTP/2 the gateway's own h2
    // upstream hop still sends the client's Host beside `:authority`.
    match host {
        Some(host) if version < Version::HTTP_2 && !same(host, target, default_port(uri)) => {
            Err("the Host header names another authority than the request target")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_hosts() {
        for good in [
            "example.com",
            "EXAMPLE.com:8080",
            "a",
            "192.0.2.1",
            "192.0.2.1:80",
            "[::1]",
            "[::1]:443",
            "[2001:db8::1]:65535",
            "[v1.fe80::a+en1]",
            "ex%41mple.com",
            "a-b_c~d.e!$&'()*+,;=",
            "x:0",
        ] {
            assert!(split(good.as_bytes()).is_some(), "{good}");
        }
    }

    #[test]
    fn invalid_hosts() {
        for bad in [
            "",
            "[::1",
            "[::1]x",
            "[::1]:",
            "[::1]:65536",
            "[not-ip]",
            "[v.x]",
            "[v1.]",
            "exa mple.com",
            "a@b.example",
            "a/b",
            "a?b",
            "a#b",
            "a\\b",
            "example.com:",
            "example.com:99999x",
            "example.com:99999",
            "example.com:65536",
            "example.com:123456",
            "example.com:-1",
            "example.com:80:80",
            ":80",
            "ex%4mple.com",
            "ex%zzmple.com",
            "exämple.com",
            "a\tb",
            "::1",
        ] {
            assert!(split(bad.as_bytes()).is_none(), "{bad:?}");
        }
    }

    fn headers(hosts: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for host in hosts {
            h.append(header::HOST, http::HeaderValue::from_bytes(host).unwrap());
        }
        h
    }

    #[test]
    fn one_host_and_an_agreeing_authority() {
        let origin: Uri = "/x".parse().unwrap();
        let v11 = Version::HTTP_11;
        assert!(check(v11, &origin, &headers(&[b"a.example"])).is_ok());
        assert!(check(v11, &origin, &headers(&[])).is_err());
        assert!(check(Version::HTTP_10, &origin, &headers(&[])).is_ok());
        assert!(check(Version::HTTP_10, &origin, &headers(&[b"a b"])).is_err());
        assert!(check(v11, &origin, &headers(&[b"a", b"a"])).is_err());
        assert!(check(v11, &origin, &headers(&[b"\xc3\xa4.example"])).is_err());

        let absolute: Uri = "http://A.example/x".parse().unwrap();
        assert!(check(v11, &absolute, &headers(&[b"a.example"])).is_ok());
        assert!(check(v11, &absolute, &headers(&[b"a.example:80"])).is_ok());
        assert!(check(v11, &absolute, &headers(&[b"a.example:8080"])).is_err());
        assert!(check(v11, &absolute, &headers(&[b"b.example"])).is_err());
        let tls: Uri = "https://a.example:443/x".parse().unwrap();
        assert!(check(v11, &tls, &headers(&[b"a.example"])).is_ok());
        let user: Uri = "http://u@a.example/x".parse().unwrap();
        assert!(check(v11, &user, &headers(&[b"a.example"])).is_err());
        // HTTP/2: the authority alone is enough.
        assert!(check(Version::HTTP_2, &absolute, &headers(&[])).is_ok());
    }
}
