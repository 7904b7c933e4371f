//! The layer's answers to gRPC calls: trailers-only responses (HTTP 200,
//! the status in the headers), as gRPC servers answer an error.
//!
//! | outcome | `grpc-status` | `grpc-status-details-bin` |
//! |---|---|---|
//! | rate limited | `8` (`RESOURCE_EXHAUSTED`) | `google.rpc.Status` with a `google.rpc.RetryInfo` of the exact wait |
//! | cost above the burst | `8` (`RESOURCE_EXHAUSTED`) | none (no wait would help) |
//! | backend failed, `fail_open` off | `14` (`UNAVAILABLE`) | none |
//!
//! A call is gRPC when it comes over HTTP/2 (or later) and its
//! `content-type` is `application/grpc` or
//! `application/grpc+…` ([`is_grpc`]). `grpc-message` is percent-encoded
//! as the gRPC HTTP/2 protocol says (bytes outside `0x20..=0x7E`, and `%`);
//! `-bin` values are base64 without padding. The three protobuf messages
//! are written here by hand (a few varints and length prefixes), so that
//! the layer needs no protobuf crate; the tests decode them with
//! tonic-types (prost).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, Version, header};
use http_body_util::Full;

/// `RESOURCE_EXHAUSTED`.
pub const RESOURCE_EXHAUSTED: u8 = 8;
/// `UNAVAILABLE`.
pub const UNAVAILABLE: u8 = 14;

/// Whether `request` is a gRPC call: HTTP/2 or later (gRPC runs on
/// nothing older; the version is tested first, so an HTTP/1 request costs
/// no header lookup) with `content-type` `application/grpc` or
/// `application/grpc+…` (such as `+proto`).
pub fn is_grpc<B>(request: &Request<B>) -> bool {
    request.version() >= Version::HTTP_2
        && request
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| {
                let v = v.as_bytes();
                v.len() >= 16
                    && v[..16].eq_ignore_ascii_case(b"application/grpc")
                    && matches!(v.get(16), None | Some(b'+' | b';'))
            })
}

/// A trailers-only gRPC answer: HTTP 200, `content-type: application/grpc`,
/// `grpc-status: code`, `grpc-message: message` (percent-encoded here) and,
/// with a wait, `grpc-status-details-bin` carrying it as
/// `google.rpc.RetryInfo`.
///
/// # Examples
///
/// ```
/// use limiter_tower::grpc::{RESOURCE_EXHAUSTED, trailers_only};
///
/// let response = trailers_only(RESOURCE_EXHAUSTED, "limit reached", None);
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.headers()["grpc-status"], "8");
/// assert_eq!(response.headers()["grpc-message"], "limit reached");
/// ```
pub fn trailers_only(code: u8, message: &str, wait: Option<Duration>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert("grpc-status", HeaderValue::from(u16::from(code)));
    let encoded = percent_encode(message);
    // Percent-encoded text is visible ASCII: a valid value.
    if let Ok(v) = HeaderValue::from_str(&encoded) {
        h.insert("grpc-message", v);
    }
    if let Some(wait) = wait {
        let status = status_with_retry_info(code, message, wait);
        if let Ok(v) = HeaderValue::from_str(&base64(&status)) {
            h.insert("grpc-status-details-bin", v);
        }
    }
    response
}

/// gRPC's percent-encoding of `grpc-message`.
fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for &b in message.as_bytes() {
        if (0x20..=0x7E).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xF)]));
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The largest `google.protobuf.Duration` (10,000 years): a longer wait is
/// stated as this.
const MAX_DURATION_SECS: u64 = 315_576_000_000;

/// `google.rpc.Status { code, message, details: [Any(RetryInfo { retry_delay: wait })] }`.
fn status_with_retry_info(code: u8, message: &str, wait: Duration) -> Vec<u8> {
    // google.protobuf.Duration { seconds = 1, nanos = 2 }
    let mut duration = Vec::new();
    let (secs, nanos) = if wait.as_secs() > MAX_DURATION_SECS {
        (MAX_DURATION_SECS, 0)
    } else {
        (wait.as_secs(), wait.subsec_nanos())
    };
    if secs != 0 {
        duration.push(0x08);
        varint(&mut duration, secs);
    }
    if nanos != 0 {
        duration.push(0x10);
        varint(&mut duration, u64::from(nanos));
    }
    // google.rpc.RetryInfo { retry_delay = 1 }
    let mut retry_info = Vec::new();
    field_bytes(&mut retry_info, 1, &duration);
    // google.protobuf.Any { type_url = 1, value = 2 }
    let mut any = Vec::new();
    field_bytes(&mut any, 1, b"type.googleapis.com/google.rpc.RetryInfo");
    field_bytes(&mut any, 2, &retry_info);
    // google.rpc.Status { code = 1, message = 2, details = 3 }
    let mut status = vec![0x08];
    varint(&mut status, u64::from(code));
    field_bytes(&mut status, 2, message.as_bytes());
    field_bytes(&mut status, 3, &any);
    status
}

/// A length-delimited field (wire type 2) numbered `field` (below 16).
fn field_bytes(out: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    out.push(field << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        // The low seven bits, with the continuation bit.
        out.push((v as u8 & 0x7F) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Standard base64 without padding, as gRPC's `-bin` metadata is sent.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        // A chunk of k bytes gives k + 1 digits.
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 0x3F) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types() {
        let mut r = Request::new(());
        *r.version_mut() = Version::HTTP_2;
        assert!(!is_grpc(&r));
        for (v, grpc) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("Application/GRPC+json", true),
            ("application/grpc-web", false),
            ("application/grpcx", false),
            ("application/json", false),
            ("text/plain", false),
        ] {
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(v));
            assert_eq!(is_grpc(&r), grpc, "{v}");
        }
        // gRPC needs HTTP/2: the same head over HTTP/1.1 is not a call.
        *r.version_mut() = Version::HTTP_11;
        assert!(!is_grpc(&r));
    }

    #[test]
    fn base64_and_percent_encoding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg");
        assert_eq!(base64(b"fo"), "Zm8");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xFB, 0xFF]), "+/8");
        assert_eq!(percent_encode("a b%c\né"), "a b%25c%0A%C3%A9");
    }

    #[test]
    fn retry_info_bytes() {
        // Status{code 8, message "x", details [Any{RetryInfo{Duration{1s, 500ms}}}]}
        let s = status_with_retry_info(8, "x", Duration::from_millis(1500));
        let url = b"type.googleapis.com/google.rpc.RetryInfo";
        let mut expected = vec![0x08, 8, 0x12, 1, b'x', 0x1A, 2 + url.len() as u8 + 2 + 10];
        expected.extend_from_slice(&[0x0A, url.len() as u8]);
        expected.extend_from_slice(url);
        expected.extend_from_slice(&[
            0x12, 10, 0x0A, 8, 0x08, 1, 0x10, 0x80, 0xCA, 0xB5, 0xEE, 0x01,
        ]);
        assert_eq!(s, expected);
    }
}
