//! `RuleKey`: a rule's `key` as a `limiter-tower` `KeyExtractor`, and the
//! key a keyed rule's table holds ([`RuleKeyText`]).
//!
//! Keys are written with limiter-tower's one key encoding
//! (`key_encoding::KeyWriter`: injective, parts joined by `:`, every byte
//! that could confuse a reader percent-encoded) straight into the key's
//! compact form, on the stack: no allocation for an IPv4 or IPv6 `/64`
//! key, or any key of up to 23 bytes; one for a longer one; none per part,
//! and no buffer kept between requests. A library caller's key
//! (`try_acquire_key("10.0.0.7")`) is written as one part the same way, so
//! it names the same key as the HTTP layer's `key: ip` for that address.

use http::header::HeaderName;
use limiter_tower::key_encoding::{KeyOut, KeyWriter};
use limiter_tower::{ClientIp, KeyError, KeyExtractor, PeerIp, RequestHead};

use limiter_rules::{KeyPart, MatchSpec, PathMatch};

/// The key a keyed rule's table holds: the encoded text, in 24 bytes.
///
/// Held compactly: every `%3A` of the text (an escaped `:`, three bytes)
/// as one byte, `0x01`, which the key encoding never writes raw (control
/// bytes are always escaped), so the compact form and the text determine
/// each other. A compact form of up to 23 bytes is held inline, with no
/// allocation: every IPv4 address and every IPv6 `/64` as `key: ip`
/// writes them (at most 21 bytes, `ffff%3Affff%3Affff%3Affff%3A%3A`
/// being `ffff␁ffff␁ffff␁ffff␁␁`), and most user ids. A longer one (a
/// composite key, a long header value) is held in one allocation of its
/// exact length behind a thin pointer. Equality and hash are those of the
/// compact form, hence of the text.
///
/// # Examples
///
/// ```
/// use limiter_config::RuleLimiter;
/// use limiter_core::ManualClock;
///
/// let key = RuleLimiter::<ManualClock>::key("2001:db8::");
/// assert_eq!(key.text(), "2001%3Adb8%3A%3A");
/// assert_eq!(size_of_val(&key), 24);
/// ```
#[derive(Clone)]
pub struct RuleKeyText(Repr);

#[derive(Clone)]
enum Repr {
    /// The first `len` bytes of `bytes`; `Len`'s unused values are the
    /// niche that lets `Heap` share the 24 bytes.
    Inline {
        bytes: [u8; INLINE],
        len: Len,
    },
    Heap(Box<Box<[u8]>>),
}

const INLINE: usize = 23;

const _: () = assert!(size_of::<RuleKeyText>() == 24);

/// The compact form of the escape `%3A`.
const COLON: u8 = 0x01;

/// A length of 0 to 23.
#[derive(Clone, Copy)]
#[repr(u8)]
#[rustfmt::skip]
enum Len {
    L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15, L16, L17, L18, L19, L20, L21, L22, L23,
}

#[rustfmt::skip]
const LENS: [Len; INLINE + 1] = [
    Len::L0, Len::L1, Len::L2, Len::L3, Len::L4, Len::L5, Len::L6, Len::L7, Len::L8, Len::L9, Len::L10, Len::L11, Len::L12, Len::L13, Len::L14, Len::L15, Len::L16, Len::L17, Len::L18, Len::L19, Len::L20, Len::L21, Len::L22, Len::L23,
];

impl RuleKeyText {
    /// The compact form.
    fn compact(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { bytes, len } => &bytes[..*len as usize],
            Repr::Heap(bytes) => bytes,
        }
    }

    /// The encoded text (borrowed when it has no escaped `:`).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        let compact = self.compact();
        if !compact.contains(&COLON) {
            // The compact form of a text without `%3A` is that text.
            return std::borrow::Cow::Borrowed(std::str::from_utf8(compact).unwrap_or_default());
        }
        let mut text = String::with_capacity(compact.len() + 8);
        for chunk in self.chunks() {
            text.push_str(chunk);
        }
        std::borrow::Cow::Owned(text)
    }

    /// The encoded text in pieces: runs of the compact form and `%3A`.
    fn chunks(&self) -> impl Iterator<Item = &str> {
        let compact = self.compact();
        let mut pieces = compact.split(|&b| b == COLON).map(|run| {
            // Compact bytes other than `COLON` are the text's own, valid
            // UTF-8 between two escapes (an escape is ASCII).
            std::str::from_utf8(run).unwrap_or_default()
        });
        let first = pieces.next();
        first.into_iter().chain(pieces.flat_map(|run| ["%3A", run]))
    }
}

impl RuleKeyText {
    /// The key of a text the key encoding wrote ([`KeyWriter`]: no raw
    /// control byte, every `%` the start of an escape).
    pub(crate) fn from_encoded(text: &str) -> RuleKeyText {
        let mut bytes = [0; INLINE];
        let mut len = 0;
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            let (byte, step) = match rest {
                [b'%', b'3', b'A', ..] => (COLON, 3),
                [b, ..] => (*b, 1),
                [] => break,
            };
            if len == INLINE {
                return RuleKeyText::heap(text);
            }
            bytes[len] = byte;
            len += 1;
            rest = &rest[step..];
        }
        RuleKeyText(Repr::Inline {
            bytes,
            len: LENS[len],
        })
    }
}

impl RuleKeyText {
    /// A key whose compact form is longer than [`INLINE`].
    fn heap(text: &str) -> RuleKeyText {
        let mut compact = Vec::with_capacity(text.len());
        let mut rest = text.as_bytes();
        while let Some((&b, after)) = rest.split_first() {
            if let Some(tail) = rest.strip_prefix(b"%3A") {
                compact.push(COLON);
                rest = tail;
            } else {
                compact.push(b);
                rest = after;
            }
        }
        RuleKeyText(Repr::Heap(Box::new(compact.into_boxed_slice())))
    }
}

impl Default for RuleKeyText {
    fn default() -> RuleKeyText {
        RuleKeyText::from_encoded("")
    }
}

impl PartialEq for RuleKeyText {
    fn eq(&self, other: &RuleKeyText) -> bool {
        self.compact() == other.compact()
    }
}

impl Eq for RuleKeyText {}

impl std::hash::Hash for RuleKeyText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // The key is hashed alone, never beside another value, so its bytes
        // need no length before them.
        state.write(self.compact());
    }
}

impl std::fmt::Debug for RuleKeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.text().fmt(f)
    }
}

impl std::fmt::Display for RuleKeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.chunks().try_for_each(|chunk| f.write_str(chunk))
    }
}

/// A key being written: its compact form, inline until it outgrows
/// [`INLINE`] bytes, then on the heap.
struct Compact {
    inline: [u8; INLINE],
    len: usize,
    /// Empty until the key outgrows `inline`; then all of it.
    heap: Vec<u8>,
}

impl Compact {
    fn new() -> Compact {
        Compact {
            inline: [0; INLINE],
            len: 0,
            heap: Vec::new(),
        }
    }

    // Inlined, with a byte loop: the pieces are short (an octet, a dot,
    // an escape), where a call and `memcpy` would cost more than the copy.
    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if end <= INLINE && self.heap.is_empty() {
            for (slot, &b) in self.inline[self.len..end].iter_mut().zip(bytes) {
                *slot = b;
            }
            self.len = end;
            return;
        }
        self.spill(bytes);
    }

    /// Appends `bytes` on the heap, moving the inline bytes there first.
    #[cold]
    fn spill(&mut self, bytes: &[u8]) {
        if self.heap.is_empty() {
            self.heap.reserve(2 * INLINE);
            self.heap.extend_from_slice(&self.inline[..self.len]);
        }
        self.heap.extend_from_slice(bytes);
    }

    fn finish(self) -> RuleKeyText {
        if self.heap.is_empty() {
            return RuleKeyText(Repr::Inline {
                bytes: self.inline,
                len: LENS[self.len],
            });
        }
        RuleKeyText(Repr::Heap(Box::new(self.heap.into_boxed_slice())))
    }
}

impl KeyOut for Compact {
    #[inline]
    fn push_plain(&mut self, plain: &str) {
        self.push(plain.as_bytes());
    }

    /// An escaped `:` as [`COLON`], any other escape as its text.
    fn push_escaped(&mut self, byte: u8) {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        if byte == b':' {
            return self.push(&[COLON]);
        }
        self.push(&[
            b'%',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0xf)],
        ]);
    }
}

/// Writes a key with `write` into its compact form.
fn compact<E>(
    write: impl FnOnce(&mut KeyWriter<'_, Compact>) -> Result<(), E>,
) -> Result<RuleKeyText, E> {
    let mut out = Compact::new();
    write(&mut KeyWriter::new(&mut out))?;
    Ok(out.finish())
}

/// A library caller's key, written as one part (see the module docs).
pub(crate) fn library_key(key: &str) -> RuleKeyText {
    let mut out = Compact::new();
    KeyWriter::new(&mut out).part_str(key);
    out.finish()
}

/// Whether `encoded` is the one-part encoding of `raw` (a priority class's
/// name against the class header's encoded value).
pub(crate) fn encodes(encoded: &RuleKeyText, raw: &str) -> bool {
    *encoded == library_key(raw)
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
        compact(|key| {
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
        assert_eq!(k(b"u1", b"p").text(), "u1:p");
        assert_eq!(k(b"a:b", b"{c}").text(), "a%3Ab:%7Bc%7D");
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
        let encoded = |text: &str| RuleKeyText::from_encoded(text);
        assert!(encodes(&encoded("a%3Ab"), "a:b") && !encodes(&encoded("a:b"), "a:b"));
        // A raw 0x01 is escaped, so it never reads as a compact `%3A`.
        assert_eq!(library_key("\u{1}").text(), "%01");
        assert_ne!(library_key("\u{1}"), library_key(":"));
    }

    #[test]
    fn inline_and_heap_keys_are_their_text() {
        use std::collections::HashSet;
        // Plain texts, and texts of escaped colons, around the inline
        // capacity; each key is its text, and equal keys only to equal texts.
        let texts: Vec<String> = (0..40)
            .flat_map(|n| {
                [
                    "k".repeat(n),
                    "%3A".repeat(n),
                    format!("a%3A{}", "%33".repeat(n)),
                ]
            })
            .collect();
        let keys: HashSet<RuleKeyText> =
            texts.iter().map(|t| RuleKeyText::from_encoded(t)).collect();
        let distinct: HashSet<&String> = texts.iter().collect();
        assert_eq!(keys.len(), distinct.len());
        for t in &texts {
            let k = RuleKeyText::from_encoded(t);
            assert_eq!(k.text(), t.as_str());
            assert_eq!(k.to_string(), *t);
            assert!(keys.contains(&k));
        }
        assert_eq!(RuleKeyText::default().text(), "");
    }

    #[test]
    fn every_ip_key_is_inline() {
        let longest = [
            "255.255.255.255",
            "ffff:ffff:ffff:ffff::",
            "2001:db8:1:869f::",
        ];
        for addr in longest {
            let key = library_key(addr);
            assert!(
                matches!(key.0, Repr::Inline { .. }),
                "{addr} is held inline"
            );
            let mut text = String::new();
            KeyWriter::new(&mut text).part_str(addr);
            assert_eq!(key.text(), text);
        }
        let long = library_key("a-user-id-of-thirty-bytes-long");
        assert!(matches!(long.0, Repr::Heap(_)));
        assert_eq!(long.text(), "a-user-id-of-thirty-bytes-long");
    }
}
