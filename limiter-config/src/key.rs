//! `RuleKey`: a rule's `key` as a `limiter-tower` `KeyExtractor`, and the
//! key a keyed rule's table holds ([`RuleKeyText`]).
//!
//! Keys are written with limiter-tower's one key encoding
//! (`key_encoding::KeyWriter`: injective, parts joined by `:`, every byte
//! that could confuse a reader percent-encoded) into a thread-local buffer
//! that is reused from request to request, then copied once into a [`RuleKeyText`]: no allocation for a key of up
//! to 31 bytes (an IPv4 address, an IPv6 `/64`), one of the key's exact length for a
//! longer one, none per part. A library caller's key (`try_acquire_key("10.0.0.7")`) is
//! written as one part the same way, so it names the same key as the
//! HTTP layer's `key: ip` for that address.

use std::cell::RefCell;

use http::header::HeaderName;
use limiter_tower::key_encoding::KeyWriter;
use limiter_tower::{ClientIp, KeyError, KeyExtractor, PeerIp, RequestHead};

use limiter_rules::{KeyPart, MatchSpec, PathMatch};

/// The key a keyed rule's table holds: the encoded text, in 32 bytes.
///
/// A key of up to 31 bytes (every IPv4 address, every IPv6 `/64` as
/// `key: ip` writes it, most user ids) is held inline, with no allocation; a longer one (an IPv6 `/64`, a composite
/// key) in one allocation of its exact length behind a thin pointer. The
/// representation is canonical (a text has exactly one form), and
/// equality, order and hash are those of the text.
///
/// # Examples
///
/// ```
/// use limiter_config::RuleLimiter;
/// use limiter_core::ManualClock;
///
/// let key = RuleLimiter::<ManualClock>::key("2001:db8::");
/// assert_eq!(key.as_str(), "2001%3Adb8%3A%3A");
/// assert_eq!(size_of_val(&key), 32);
/// ```
#[derive(Clone)]
pub struct RuleKeyText(Repr);

#[derive(Clone)]
enum Repr {
    /// The first `len` bytes of `bytes`; `Len`'s unused values are the
    /// niche that lets `Heap` share the 16 bytes.
    Inline {
        bytes: [u8; INLINE],
        len: Len,
    },
    Heap(Box<Box<str>>),
}

const INLINE: usize = 31;

const _: () = assert!(size_of::<RuleKeyText>() == 32);

/// A length of 0 to 31.
#[derive(Clone, Copy)]
#[repr(u8)]
#[rustfmt::skip]
enum Len {
    L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15, L16, L17, L18, L19, L20, L21, L22, L23, L24, L25, L26, L27, L28, L29, L30, L31,
}

#[rustfmt::skip]
const LENS: [Len; INLINE + 1] = [
    Len::L0, Len::L1, Len::L2, Len::L3, Len::L4, Len::L5, Len::L6, Len::L7, Len::L8, Len::L9, Len::L10, Len::L11, Len::L12, Len::L13, Len::L14, Len::L15, Len::L16, Len::L17, Len::L18, Len::L19, Len::L20, Len::L21, Len::L22, Len::L23, Len::L24, Len::L25, Len::L26, Len::L27, Len::L28, Len::L29, Len::L30, Len::L31,
];

impl RuleKeyText {
    /// The encoded text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Inline bytes are copied from a `str` at a char boundary (the
            // whole of it), so they are valid UTF-8.
            Repr::Inline { bytes, len } => {
                std::str::from_utf8(&bytes[..*len as usize]).unwrap_or_default()
            }
            Repr::Heap(text) => text,
        }
    }
}

impl From<&str> for RuleKeyText {
    fn from(text: &str) -> RuleKeyText {
        match LENS.get(text.len()) {
            Some(&len) => {
                let mut bytes = [0; INLINE];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                RuleKeyText(Repr::Inline { bytes, len })
            }
            None => RuleKeyText(Repr::Heap(Box::new(Box::from(text)))),
        }
    }
}

impl Default for RuleKeyText {
    fn default() -> RuleKeyText {
        RuleKeyText::from("")
    }
}

impl std::ops::Deref for RuleKeyText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for RuleKeyText {
    fn eq(&self, other: &RuleKeyText) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for RuleKeyText {}

impl std::hash::Hash for RuleKeyText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::fmt::Debug for RuleKeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

impl std::fmt::Display for RuleKeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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

    #[test]
    fn inline_and_heap_keys_are_their_text() {
        use std::collections::HashSet;
        let texts: Vec<String> = (0..40).map(|n| "k".repeat(n)).collect();
        let keys: HashSet<RuleKeyText> = texts
            .iter()
            .map(|t| RuleKeyText::from(t.as_str()))
            .collect();
        assert_eq!(keys.len(), 40);
        for t in &texts {
            let k = RuleKeyText::from(t.as_str());
            assert_eq!((k.as_str(), k.clone()), (t.as_str(), k.clone()));
            assert!(keys.contains(&k));
        }
        assert_eq!(RuleKeyText::default().as_str(), "");
    }
}
