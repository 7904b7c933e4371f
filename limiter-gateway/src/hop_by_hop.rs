//! Header hygiene between the two hops, the first half (module `forward`
//! adds the forwarding headers after it): hop-by-hop headers out.
//!
//! Hop-by-hop (RFC 9110 §7.6.1): `Connection` and every header it names,
//! and `Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`,
//! `Upgrade` (and `Trailer`, which RFC 9110 §6.6.2 ties to the hop's
//! chunked coding), removed in both directions. `Content-Length` is end to
//! end and stays; when it is absent hyper re-frames the stream as chunked
//! on the next hop.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

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

/// Removes the hop-by-hop headers of `headers`, those named by its
/// `Connection` headers too.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the message's few names, matched as text (by length
    // first), into a bitmask of `HOP_BY_HOP`; nothing allocated on the way
    // (a `Vec` of names, a `HeaderName` parsed per listed name and a
    // comparison with every hop-by-hop name cost about 1,800 instructions
    // a request).
    let mut present = 0u8;
    for name in headers.keys() {
        if let Some(i) = hop_by_hop(name.as_str()) {
            present |= 1 << i;
        }
    }
    if present == 0 {
        return;
    }
    // `HOP_BY_HOP[0]` is `Connection`: the names it lists go too, looked
    // up as text (a name that is no header name matches nothing); those
    // that are hop-by-hop anyway go below.
    if present & 1 != 0
        && let header::Entry::Occupied(line) = headers.entry(header::CONNECTION)
    {
        let mut values = line.remove_entry_mult().1;
        let first = values.next();
        let more: Vec<HeaderValue> = values.collect();
        for value in first.iter().chain(&more) {
            let Ok(value) = value.to_str() else {
                continue;
            };
            for name in value.split(',').map(str::trim) {
                if !HOP_BY_HOP
                    .iter()
                    .any(|h| name.eq_ignore_ascii_case(h.as_str()))
                {
                    headers.remove(name);
                }
            }
        }
    }
    for (i, name) in HOP_BY_HOP.iter().enumerate().skip(1) {
        if present & (1 << i) != 0 {
            headers.remove(name);
        }
    }
}

/// The index of `name` (lower case, as a `HeaderName` is) in `HOP_BY_HOP`.
fn hop_by_hop(name: &str) -> Option<usize> {
    match name {
        "connection" => Some(0),
        "proxy-connection" => Some(1),
        "keep-alive" => Some(2),
        "te" => Some(3),
        "trailer" => Some(4),
        "transfer-encoding" => Some(5),
        "upgrade" => Some(6),
        _ => None,
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
    fn the_text_match_agrees_with_the_hop_by_hop_list() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop(name.as_str()), Some(i));
        }
        assert_eq!(hop_by_hop("connectio"), None);
        assert_eq!(hop_by_hop("host"), None);
    }
}
