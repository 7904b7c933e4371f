//! `RuleKey`: a rule's `key` as a `limiter-tower` `KeyExtractor`, and the
//! key a keyed rule's table holds ([`RuleKeyText`]).
//!
//! Keys are written with limiter-tower's one key encoding
//! (`key_encoding::KeyWriter`: injective, parts joined by `:`, every byte
//! that could confuse a reader percent-encoded) into a thread-local buffer
//! that is reused from request to request, then copied once into a boxed
//! string of exactly their length: one allocation per keyed request,
//! none per part, none for a global rule (its key has no parts and is
//! empty). A library caller's key (`try_acquire_key("10.0.0.7")`) is
//! written as one part the same way, so it names the same key as the
//! HTTP layer's `key: ip` for that address.

use std::cell::RefCell;

use http::header::HeaderName;
use limiter_tower::key_encoding::KeyWriter;
use limiter_tower::{ClientIp, KeyError, KeyExtractor, PeerIp, RequestHead};

use limiter_rules::{KeyPart, MatchSpec, PathMatch};

/// The key a keyed rule's table holds: the encoded text, boxed at its
/// exact length (16 bytes inline).
pub type RuleKeyText = Box<str>;

thread_local! {
    /// The buffer keys are written into, reused by every request of the
    /// thread.
    static BUFFER: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Writes a key with `write` into the thread's buffer and returns a copy of
/// exactly its length.
fn with_buffer<E>(
    write: impl FnOnce(&mut KeyWriter<'_>) -> Result<(), E>,
) -> Result<RuleKeyText, E> {
    BUFFER.with(|buffer| {
        // A key written while another is being written (never: writing
        // calls no user code) would get a fresh buffer instead of panicking.
        let mut fresh = String::new();
        let mut guard = buffer.try_borrow_mut();
        let out = match guard.as_mut() {
            Ok(b) => &mut **b,
            Err(_) => &mut fresh,
        };
        out.clear();
        write(&mut KeyWriter::new(out))?;
        Ok(RuleKeyText::from(out.as_str()))
    })
}

/// A library caller's key, written as one part (see the module docs).
pub(crate) fn library_key(key: &str) -> RuleKeyText {
    let written: Result<_, std::convert::Infallible> = with_buffer(|w| {
        w.part_str(key);
        Ok(())
    });
    match written {
        Ok(k) => k,
        Err(never) => match never {},
    }
}

/// Whether `encoded` is the one-part encoding of `raw` (a priority class's
/// name against the class header's encoded value), without writing it.
pub(crate) fn encodes(encoded: &str, raw: &str) -> bool {
    let mut written = String::with_capacity(encoded.len());
    KeyWriter::new(&mut written).part_str(raw);
    written == encoded
}

/// The key extractor of a rule.
#[derive(Debug, Clone)]
pub(crate) struct RuleKey {
    parts: Vec<Part>,
    /// The rule's match path, the key of `route` without axum's
    /// `MatchedPath`.
    route: Option<String>,
}

#[derive(Debug, Clone)]
enum Part {
    Peer(PeerIp),
    Client(ClientIp),
    Route,
    Header(HeaderName),
    /// A priority class's name: the header's value, "" without it.
    Class(HeaderName),
}

impl RuleKey {
    pub(crate) fn new(
        parts: &[KeyPart],
        trusted: &[ipnet::IpNet],
        matcher: Option<&MatchSpec>,
        class_header: Option<&HeaderName>,
    ) -> RuleKey {
        let mut parts: Vec<Part> = parts
            .iter()
            .map(|p| match p {
                KeyPart::Ip if trusted.is_empty() => Part::Peer(PeerIp::new()),
                KeyPart::Ip => Part::Client(ClientIp::x_forwarded_for(trusted.iter().copied())),
                KeyPart::Route => Part::Route,
                KeyPart::Header(h) => Part::Header(h.clone()),
            })
            .collect();
        parts.extend(class_header.cloned().map(Part::Class));
        let route = matcher.map(|m| match &m.path {
            PathMatch::Route(r) | PathMatch::Prefix(r) => r.clone(),
        });
        RuleKey { parts, route }
    }
}

impl KeyExtractor for RuleKey {
    type Key = RuleKeyText;

    fn extract(&self, request: &RequestHead<'_>) -> Result<RuleKeyText, KeyError> {
        if self.parts.is_empty() {
            // A global rule: the empty key, no allocation.
            return Ok(RuleKeyText::default());
        }
        with_buffer(|key| {
            for part in &self.parts {
                match part {
                    Part::Peer(p) => key.part_ip(p.extract(request)?),
                    Part::Client(c) => key.part_ip(c.extract(request)?),
                    Part::Route => {
                        // axum's matched route template (through
                        // limiter-tower's `Route`, under its `axum`
                        // feature), else the rule's own match path.
                        #[cfg(feature = "axum")]
                        let matched = limiter_tower::Route.extract(request)?;
                        #[cfg(feature = "axum")]
                        let matched =
                            (&*matched != limiter_tower::Route::UNMATCHED).then_some(&*matched);
                        #[cfg(not(feature = "axum"))]
                        let matched: Option<&str> = None;
                        key.part_str(matched.or(self.route.as_deref()).unwrap_or("<unmatched>"));
                    }
                    Part::Class(name) => key.part_bytes(
                        request
                            .headers()
                            .get(name)
                            .map_or(&b""[..], |v| v.as_bytes()),
                    ),
                    Part::Header(name) => {
                        let value = request
                            .headers()
                            .get(name)
                            .ok_or_else(|| KeyError::MissingHeader { name: name.clone() })?;
                        key.part_bytes(value.as_bytes());
                    }
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composite_keys_do_not_collide() {
        let key = RuleKey::new(
            &[
                KeyPart::Header(HeaderName::from_static("x-a")),
                KeyPart::Header(HeaderName::from_static("x-b")),
            ],
            &[],
            None,
            None,
        );
        let k = |a: &[u8], b: &[u8]| {
            let req = http::Request::builder()
                .header("x-a", http::HeaderValue::from_bytes(a).unwrap())
                .header("x-b", http::HeaderValue::from_bytes(b).unwrap())
                .body(())
                .unwrap();
            key.extract(&RequestHead::of(&req)).unwrap()
        };
        assert_ne!(k(b"a:b", b"c"), k(b"a", b"b:c"));
        assert_ne!(k(b"%41", b""), k(b"A", b""));
        assert_ne!(k(b"\xff", b""), k(b"%FF", b""));
        assert_eq!(&*k(b"u1", b"p"), "u1:p");
        assert_eq!(&*k(b"a:b", b"{c}"), "a%3Ab:%7Bc%7D");
    }

    #[test]
    fn a_library_key_names_the_http_key_of_the_same_address() {
        let key = RuleKey::new(&[KeyPart::Ip], &[], None, None);
        for addr in ["10.0.0.7", "2001:db8::"] {
            let ip: std::net::IpAddr = addr.parse().unwrap();
            let mut req = http::Request::builder().body(()).unwrap();
            req.extensions_mut()
                .insert(limiter_tower::PeerAddr(std::net::SocketAddr::new(ip, 1)));
            let from_http = key.extract(&RequestHead::of(&req));
            assert_eq!(from_http.ok(), Some(library_key(addr)));
        }
        assert!(encodes("a%3Ab", "a:b") && !encodes("a:b", "a:b"));
    }
}
