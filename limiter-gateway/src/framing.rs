//! Request heads whose body framing is ambiguous, found in the bytes the
//! client sends: both `Content-Length` and `Transfer-Encoding`, or
//! `Content-Length` more than once. Such a request is answered `400` and
//! the connection closed, never forwarded (RFC 9112 §6.1 allows refusing
//! it; reading it by one header keeps a request-smuggling surface open
//! toward an upstream that reads it by the other).
//!
//! # Why the bytes
//!
//! hyper reads such a head by its `Transfer-Encoding` and drops the
//! `Content-Length` before the service sees the head (and a repeated equal
//! `Content-Length` is merged), so the service cannot tell. The
//! connection's stream therefore feeds what it reads to a [`FramingScan`],
//! which follows HTTP/1 framing just far enough to find each head's
//! framing fields: head lines up to the empty line, a `Content-Length`
//! body by its length, a chunked body by its chunk-size lines and its
//! trailers. It reports the first ambiguous head by its ordinal on the
//! connection (1 for the first); the service refuses the request with that
//! ordinal. After it, and after anything it cannot follow (an HTTP/2
//! preface, a line longer than the head limit, a length or chunk size that
//! does not parse, a transfer coding that is not chunked: all requests
//! hyper refuses itself, closing the connection), it stops reading.
//!
//! It costs one pass over the head bytes per request and nothing per body
//! byte of a `Content-Length` body; a line split across reads is copied
//! once into a buffer kept for the connection.

/// What makes a head's framing ambiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ambiguity {
    /// Both `Content-Length` and `Transfer-Encoding`.
    LengthAndCoding,
    /// `Content-Length` more than once (equal or not).
    LengthRepeated,
}

impl Ambiguity {
    /// The problem document's detail.
    pub(crate) fn detail(self) -> &'static str {
        match self {
            Ambiguity::LengthAndCoding => {
                "a request has Content-Length or Transfer-Encoding, not both"
            }
            Ambiguity::LengthRepeated => "a request has at most one Content-Length",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a request line (empty lines are skipped, as hyper does).
    Start,
    /// Header lines, up to the empty line.
    Fields,
    /// `n` body bytes to skip.
    Body(u64),
    /// A chunk-size line.
    ChunkSize,
    /// `n` chunk bytes to skip.
    ChunkData(u64),
    /// The CRLF after a chunk's bytes: an empty line.
    ChunkEnd,
    /// Trailer lines, up to the empty line.
    Trailers,
    /// Stopped (module doc).
    Off,
}

/// The framing fields of the head being read.
#[derive(Debug, Default, Clone, Copy)]
struct Fields {
    lengths: u32,
    length: Option<u64>,
    coded: bool,
    chunked: bool,
}

/// Follows the framing of one connection's requests (module doc).
#[derive(Debug)]
pub(crate) struct FramingScan {
    state: State,
    fields: Fields,
    /// A line begun in an earlier read.
    partial: Vec<u8>,
    max_line: usize,
    heads: u64,
}

impl FramingScan {
    /// A scan of a new connection; a line longer than `max_line` stops it.
    pub(crate) fn new(max_line: usize) -> FramingScan {
        FramingScan {
            state: State::Start,
            fields: Fields::default(),
            partial: Vec::new(),
            max_line,
            heads: 0,
        }
    }

    /// Reads the next `bytes` the client sent; the ordinal of the first
    /// ambiguous head and what is wrong with it, once, when it ends in
    /// them.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Option<(u64, Ambiguity)> {
        while !bytes.is_empty() {
            match self.state {
                State::Off => return None,
                State::Body(n) | State::ChunkData(n) => {
                    let take = n.min(bytes.len() as u64);
                    // `take` is at most `bytes.len()`, a usize.
                    bytes = &bytes[take as usize..];
                    self.state = match (self.state, n - take) {
                        (State::Body(_), 0) => State::Start,
                        (State::Body(_), left) => State::Body(left),
                        // The CRLF after the chunk's data (hyper checks it).
                        (_, 0) => State::ChunkEnd,
                        (_, left) => State::ChunkData(left),
                    };
                }
                _ => {
                    let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
                        if self.partial.len() + bytes.len() > self.max_line {
                            self.state = State::Off;
                        } else {
                            self.partial.extend_from_slice(bytes);
                        }
                        return None;
                    };
                    let mut line = std::mem::take(&mut self.partial);
                    let found = if line.is_empty() {
                        self.line(&bytes[..end])
                    } else {
                        line.extend_from_slice(&bytes[..end]);
                        self.line(&line)
                    };
                    line.clear();
                    self.partial = line;
                    bytes = &bytes[end + 1..];
                    if found.is_some() {
                        self.state = State::Off;
                        return found;
                    }
                }
            }
        }
        None
    }

    /// One whole line (without its `\n`) in a line state.
    fn line(&mut self, line: &[u8]) -> Option<(u64, Ambiguity)> {
        if line.len() > self.max_line {
            self.state = State::Off;
            return None;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match self.state {
            State::Start if line.is_empty() => {}
            State::Start if line.starts_with(b"PRI * HTTP/2") => self.state = State::Off,
            State::Start => {
                self.fields = Fields::default();
                self.state = State::Fields;
            }
            State::Fields if line.is_empty() => return self.end_of_head(),
            State::Fields => self.field(line),
            State::ChunkSize => {
                self.state = match chunk_size(line) {
                    Some(0) => State::Trailers,
                    Some(n) => State::ChunkData(n),
                    None => State::Off,
                }
            }
            State::ChunkEnd if line.is_empty() => self.state = State::ChunkSize,
            State::ChunkEnd => self.state = State::Off,
            State::Trailers if line.is_empty() => self.state = State::Start,
            _ => {}
        }
        None
    }

    fn field(&mut self, line: &[u8]) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return;
        };
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.eq_ignore_ascii_case(b"content-length") {
            self.fields.lengths += 1;
            self.fields.length = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse().ok());
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // The last coding of the last line decides, as in hyper.
            self.fields.coded = true;
            let last = value.rsplit(|&b| b == b',').next().unwrap_or(value);
            self.fields.chunked = trim(last).eq_ignore_ascii_case(b"chunked");
        }
    }

    fn end_of_head(&mut self) -> Option<(u64, Ambiguity)> {
        self.heads += 1;
        let f = self.fields;
        let ambiguity = if f.coded && f.lengths > 0 {
            Some(Ambiguity::LengthAndCoding)
        } else if f.lengths > 1 {
            Some(Ambiguity::LengthRepeated)
        } else {
            None
        };
        if let Some(a) = ambiguity {
            return Some((self.heads, a));
        }
        self.state = match (f.coded, f.chunked, f.lengths, f.length) {
            (true, true, _, _) => State::ChunkSize,
            (true, false, _, _) => State::Off,
            (false, _, 0, _) | (false, _, _, Some(0)) => State::Start,
            (false, _, _, Some(n)) => State::Body(n),
            (false, _, _, None) => State::Off,
        };
        None
    }
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ' && b != b'\t');
    let end = s.iter().rposition(|&b| b != b' ' && b != b'\t');
    match (start, end) {
        (Some(a), Some(b)) => &s[a..=b],
        _ => &[],
    }
}

/// The size of a chunk-size line (hex, before any `;` extension), `None`
/// if it does not parse or overflows.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line
        .iter()
        .position(|&b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    if digits == 0 || digits > 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(&line[..digits]).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in pieces of `step` bytes; the first ambiguity found.
    fn scan(wire: &str, step: usize) -> Option<(u64, Ambiguity)> {
        let mut scan = FramingScan::new(1024);
        let mut found = None;
        for piece in wire.as_bytes().chunks(step) {
            if let Some(f) = scan.feed(piece) {
                assert!(found.is_none(), "reported twice");
                found = Some(f);
            }
        }
        found
    }

    fn every_split(wire: &str) -> Option<(u64, Ambiguity)> {
        let whole = scan(wire, wire.len().max(1));
        for step in 1..wire.len() {
            assert_eq!(scan(wire, step), whole, "in pieces of {step}: {wire:?}");
        }
        whole
    }

    const GOOD: &str = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";

    #[test]
    fn both_framings_are_found_in_either_order() {
        for head in [
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n",
            "POST / HTTP/1.1\nTRANSFER-ENCODING:chunked\nCONTENT-LENGTH:0\n\n",
        ] {
            assert_eq!(
                every_split(head),
                Some((1, Ambiguity::LengthAndCoding)),
                "{head:?}"
            );
        }
    }

    #[test]
    fn a_repeated_length_is_found_equal_or_not() {
        for head in [
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
        ] {
            assert_eq!(every_split(head), Some((1, Ambiguity::LengthRepeated)));
        }
    }

    #[test]
    fn bodies_are_skipped_so_later_heads_are_counted_right() {
        // A length body holding a fake head, a chunked body with an
        // extension and a trailer, a plain GET, then the ambiguous fourth.
        let wire = format!(
            "POST / HTTP/1.1\r\nContent-Length: 56\r\n\r\n\
             GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n\
             POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
             5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n\
             \r\n{GOOD}\
             POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        assert_eq!(every_split(&wire), Some((4, Ambiguity::LengthAndCoding)));
    }

    #[test]
    fn plain_requests_are_never_reported() {
        let wire = format!(
            "{GOOD}POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc\
             POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n{GOOD}"
        );
        assert_eq!(every_split(&wire), None);
    }

    #[test]
    fn what_hyper_refuses_itself_stops_the_scan() {
        for wire in [
            // HTTP/2: not HTTP/1 lines.
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            // A coding that is not chunked, then what would be a head.
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            // A bad length, a bad chunk size.
            "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        ] {
            assert_eq!(every_split(wire), None, "{wire:?}");
        }
        // A line longer than the limit.
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "x".repeat(2000));
        assert_eq!(every_split(&long), None);
    }
}
