//! One injective text encoding for keys: how a typed key (an address, a
//! header value, a route, a tuple of them) becomes the string a backend
//! that counts by strings (Redis, a rule's keyed table) is asked about.
//!
//! # The encoding
//!
//! A key is a sequence of *parts*, joined by `:`. Each part is written byte
//! by byte: the visible ASCII characters other than `%`, `:`, `{` and `}`
//! as they are, every other byte (space, control characters, non-ASCII
//! bytes, and those four) as `%` and two upper-case hex digits, as in a URI
//! (RFC 3986 §2.1).
//!
//! ```text
//! ("user 7", "/orders/{id}")  →  user%207:/orders/%7Bid%7D
//! 2001:db8::  (an IpAddr)     →  2001%3Adb8%3A%3A
//! ```
//!
//! # Guarantees
//!
//! * Injective: no encoded part contains a raw `:`, and percent-encoding is
//!   reversible, so two keys of one type with the same number of parts
//!   write the same string only if every part is equal. Every
//!   [`EncodeKey`] implementation writes the same number of parts for every
//!   value of its type (a pair two, an address one), so two different keys
//!   of one type never share a string.
//! * No Redis Cluster hash tag can come from a key: `{` and `}` are always
//!   encoded, so a client choosing its header value cannot choose the slot.
//! * Cheap: parts are written straight into the caller's buffer
//!   ([`KeyWriter`]); runs of plain bytes are copied whole, and addresses
//!   and numbers are formatted into it, not into a `String` of their own.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use http::HeaderValue;

/// Writes the parts of one key into a buffer (see the [module docs](self)).
///
/// # Examples
///
/// ```
/// use limiter_tower::key_encoding::KeyWriter;
///
/// let mut buf = String::new();
/// let mut key = KeyWriter::new(&mut buf);
/// key.part_str("tenant:a");
/// key.part_ip("10.0.0.7".parse()?);
/// key.part_bytes(b"\xff");
/// assert_eq!(buf, "tenant%3Aa:10.0.0.7:%FF");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct KeyWriter<'a, O: KeyOut + ?Sized = String> {
    out: &'a mut O,
    parts: usize,
}

/// Where a [`KeyWriter`] writes: a `String`, or a caller's own buffer (a
/// fixed-size key, say) that may store an escape in a form of its own.
pub trait KeyOut {
    /// Appends bytes written as they are (plain bytes, the `:` between
    /// parts, the digits and dots of an address).
    fn push_plain(&mut self, plain: &str);

    /// Appends the escape of `byte`: `%` and two upper-case hex digits.
    fn push_escaped(&mut self, byte: u8) {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let escape = [
            b'%',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0xf)],
        ];
        // `%` and hex digits are ASCII.
        self.push_plain(std::str::from_utf8(&escape).unwrap_or_default());
    }
}

impl KeyOut for String {
    fn push_plain(&mut self, plain: &str) {
        self.push_str(plain);
    }
}

impl<'a, O: KeyOut + ?Sized> KeyWriter<'a, O> {
    /// A writer appending to `out` (clear a reused buffer first).
    pub fn new(out: &'a mut O) -> KeyWriter<'a, O> {
        KeyWriter { out, parts: 0 }
    }

    /// How many parts were written.
    pub fn parts(&self) -> usize {
        self.parts
    }

    fn separate(&mut self) {
        if self.parts > 0 {
            self.out.push_plain(":");
        }
        self.parts += 1;
    }

    /// Writes a part from text.
    pub fn part_str(&mut self, part: &str) {
        self.part_bytes(part.as_bytes());
    }

    /// Writes a part from bytes (a header value that is not text, say).
    pub fn part_bytes(&mut self, part: &[u8]) {
        self.separate();
        encode_into(self.out, part);
    }

    /// Writes an address as its text (`10.0.0.7`, `2001%3Adb8%3A%3A`).
    pub fn part_ip(&mut self, ip: IpAddr) {
        match ip {
            // Dotted decimal, every byte plain: each octet through `itoa`,
            // without the formatting machinery (the common key).
            IpAddr::V4(v4) => {
                self.separate();
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        self.out.push_plain(".");
                    }
                    self.out.push_plain(itoa::Buffer::new().format(octet));
                }
            }
            IpAddr::V6(_) => self.part_fmt(format_args!("{ip}")),
        }
    }

    /// Writes a number in decimal.
    pub fn part_u64(&mut self, n: u64) {
        // Digits are plain: written as they are.
        self.separate();
        self.out.push_plain(itoa::Buffer::new().format(n));
    }

    /// Writes a part by formatting `args`, encoded as it is written.
    pub fn part_fmt(&mut self, args: fmt::Arguments<'_>) {
        self.separate();
        // Writing into a `KeyOut` cannot fail.
        let _ = fmt::write(&mut Encoded(&mut *self.out), args);
    }
}

/// Whether `b` is written as it is.
fn is_plain(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'%' | b':' | b'{' | b'}')
}

/// Appends `bytes` percent-encoded, copying runs of plain bytes whole.
fn encode_into<O: KeyOut + ?Sized>(out: &mut O, bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        let plain = rest
            .iter()
            .position(|&b| !is_plain(b))
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(plain);
        // Plain bytes are ASCII, so the run is valid UTF-8.
        if !run.is_empty() {
            out.push_plain(std::str::from_utf8(run).unwrap_or_default());
        }
        if let Some((&b, after)) = tail.split_first() {
            out.push_escaped(b);
            rest = after;
        } else {
            rest = tail;
        }
    }
}

/// A `fmt::Write` that percent-encodes what it is given.
struct Encoded<'a, O: KeyOut + ?Sized>(&'a mut O);

impl<O: KeyOut + ?Sized> fmt::Write for Encoded<'_, O> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        encode_into(self.0, s.as_bytes());
        Ok(())
    }
}

/// A key that can be written as text, injectively (see the
/// [module docs](self)).
///
/// An implementation must write the same number of parts for every value
/// of its type; that, with the encoding of each part, is what keeps two
/// different keys apart.
///
/// # Examples
///
/// ```
/// use limiter_tower::key_encoding::{EncodeKey, KeyWriter, encode_key};
///
/// struct Tenant { id: u64, region: &'static str }
///
/// impl EncodeKey for Tenant {
///     fn encode(&self, key: &mut KeyWriter<'_>) {
///         key.part_u64(self.id);
///         key.part_str(self.region);
///     }
/// }
///
/// let mut buf = String::new();
/// encode_key(&Tenant { id: 7, region: "eu:west" }, &mut buf);
/// assert_eq!(buf, "7:eu%3Awest");
/// ```
pub trait EncodeKey: Send + Sync + 'static {
    /// Writes this key's parts.
    fn encode(&self, key: &mut KeyWriter<'_>);
}

/// Clears `buf` and writes `key` into it.
pub fn encode_key<K: EncodeKey + ?Sized>(key: &K, buf: &mut String) {
    buf.clear();
    key.encode(&mut KeyWriter::new(buf));
}

/// The one key of a global limit: the part `global`.
impl EncodeKey for () {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_str("global");
    }
}

impl EncodeKey for IpAddr {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_ip(*self);
    }
}

impl EncodeKey for str {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_str(self);
    }
}

impl EncodeKey for String {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_str(self);
    }
}

impl EncodeKey for Arc<str> {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_str(self);
    }
}

impl EncodeKey for &'static str {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_str(self);
    }
}

impl EncodeKey for u64 {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_u64(*self);
    }
}

impl EncodeKey for u32 {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_u64((*self).into());
    }
}

/// A header value's bytes (text or not).
impl EncodeKey for HeaderValue {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        key.part_bytes(self.as_bytes());
    }
}

impl<A: EncodeKey, B: EncodeKey> EncodeKey for (A, B) {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        self.0.encode(key);
        self.1.encode(key);
    }
}

impl<A: EncodeKey, B: EncodeKey, C: EncodeKey> EncodeKey for (A, B, C) {
    fn encode(&self, key: &mut KeyWriter<'_>) {
        self.0.encode(key);
        self.1.encode(key);
        self.2.encode(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<K: EncodeKey>(k: K) -> String {
        let mut out = String::from("stale");
        encode_key(&k, &mut out);
        out
    }

    /// The inverse, for the injectivity property: the parts back.
    fn decode(s: &str) -> Vec<Vec<u8>> {
        s.split(':')
            .map(|part| {
                let b = part.as_bytes();
                let mut out = Vec::new();
                let mut i = 0;
                while i < b.len() {
                    if b[i] == b'%' {
                        let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                        out.push(u8::from_str_radix(hex, 16).unwrap());
                        i += 3;
                    } else {
                        assert!(is_plain(b[i]), "raw {:?} in {s:?}", b[i] as char);
                        out.push(b[i]);
                        i += 1;
                    }
                }
                out
            })
            .collect()
    }

    #[test]
    fn composite_keys_never_collide() {
        assert_ne!(text(("a:b", "c")), text(("a", "b:c")));
        assert_ne!(text(("a%", "3Ab")), text(("a:", "b")));
        assert_eq!(text(("user-7", "/orders/{id}")), "user-7:/orders/%7Bid%7D");
        assert_eq!(text(()), "global");
        assert_eq!(text(("", "")), ":");
        assert_eq!(text((7u32, 8u64, "x y")), "7:8:x%20y");
    }

    #[test]
    fn header_values_and_addresses() {
        assert_eq!(text(HeaderValue::from_static("%ff")), "%25ff");
        assert_eq!(text(HeaderValue::from_bytes(&[0xff]).unwrap()), "%FF");
        assert_eq!(text(HeaderValue::from_static("k:1")), "k%3A1");
        assert_eq!(text("10.0.0.7".parse::<IpAddr>().unwrap()), "10.0.0.7");
        assert_eq!(
            text("2001:db8::".parse::<IpAddr>().unwrap()),
            "2001%3Adb8%3A%3A"
        );
    }

    #[test]
    fn every_byte_round_trips_and_no_hash_tag_survives() {
        let all: Vec<u8> = (0..=255).collect();
        let mut out = String::new();
        let mut key = KeyWriter::new(&mut out);
        key.part_bytes(&all);
        key.part_bytes(b"{tag}");
        assert_eq!(key.parts(), 2);
        assert!(!out.contains(['{', '}']));
        assert_eq!(decode(&out), vec![all, b"{tag}".to_vec()]);
    }

    #[test]
    fn pairs_decode_to_their_parts() {
        // Injectivity on a grid of awkward parts: each pair reads back as itself.
        let parts = ["", ":", "%", "%3A", "a:b", "{x}", "é", " ", "\\", "::"];
        for a in parts {
            for b in parts {
                let s = text((a, b));
                assert_eq!(
                    decode(&s),
                    vec![a.as_bytes().to_vec(), b.as_bytes().to_vec()]
                );
            }
        }
    }

    #[test]
    fn an_ipv4_address_is_its_dotted_decimal_text() {
        for bits in (0..=u32::MAX)
            .step_by(65_537)
            .chain([0, 1, 100, 0x0a00_0007, u32::MAX])
        {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(bits));
            let mut buf = String::from("x");
            let mut key = KeyWriter::new(&mut buf);
            key.part_str("p");
            key.part_ip(ip);
            assert_eq!(buf, format!("xp:{ip}"));
        }
    }
}
