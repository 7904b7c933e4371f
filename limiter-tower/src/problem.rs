//! RFC 9457 problem documents (`application/problem+json`): the one writer
//! every response of the workspace's HTTP crates goes through.
//!
//! A [`Problem`] writes its JSON as it is built, into one `String`: no
//! intermediate value tree, no serde, no allocation besides the body
//! itself. The document always starts with the members RFC 9457 defines for
//! a status-only problem, in this order:
//!
//! ```json
//! {"type":"about:blank","title":"Too Many Requests","status":429,"detail":"…", …extension members}
//! ```
//!
//! # Guarantees
//!
//! * The output is valid JSON (RFC 8259) for any input: every string, member
//!   names included, goes through [`write_json_string`], which escapes `"`,
//!   `\` and every control character below U+0020 (as `\u00XX`).
//! * The `title` of an `about:blank` problem is the status's reason phrase
//!   as RFC 9110 names it ([`title`]), `413 Content Too Large` and
//!   `422 Unprocessable Content` included; a status without a registered
//!   phrase has no `title` (RFC 9457 §4.2.1: the title is then the status).
//! * Extension members are typed ([`JsonValue`]): strings, integers,
//!   booleans, finite floats (`null` otherwise), `Option`s and slices of
//!   them. Names are the caller's: give each member once and do not reuse
//!   `type`, `title`, `status`, `detail` or `instance` (RFC 9457 §3.2
//!   recommends names of at least three ASCII letters, digits or `_`).
//!
//! # Examples
//!
//! ```
//! use http::StatusCode;
//! use limiter_tower::problem::Problem;
//!
//! let body = Problem::new(StatusCode::TOO_MANY_REQUESTS)
//!     .detail("rate limit exceeded")
//!     .member("retry_after_ms", 1500u64)
//!     .member("violated_policies", &["per-ip"][..])
//!     .into_body();
//! assert_eq!(
//!     body,
//!     r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded","retry_after_ms":1500,"violated_policies":["per-ip"]}"#
//! );
//! ```

use std::fmt;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

mod json;

use json::{Escaped, push_u64};
pub use json::{JsonValue, write_json_string};

/// The media type of a problem document.
pub const CONTENT_TYPE: &str = "application/problem+json";

/// An RFC 9457 problem document under construction (see the
/// [module docs](self)).
#[derive(Debug, Clone)]
#[must_use = "a problem does nothing until it becomes a body or a response"]
pub struct Problem {
    status: StatusCode,
    /// The JSON so far, without its closing `}`.
    body: String,
}

impl Problem {
    /// A problem of type `about:blank` for `status`, titled with the
    /// status's RFC 9110 reason phrase.
    pub fn new(status: StatusCode) -> Problem {
        let mut body = String::with_capacity(192);
        body.push_str("{\"type\":\"about:blank\"");
        if let Some(title) = title(status) {
            body.push_str(",\"title\":");
            write_json_string(&mut body, title);
        }
        body.push_str(",\"status\":");
        push_u64(&mut body, status.as_u16().into());
        Problem { status, body }
    }

    /// A problem of the type `type_uri` (a URI reference that identifies the
    /// problem type, such as
    /// `https://iana.org/assignments/http-problem-types#quota-exceeded`),
    /// with that type's `title`.
    pub fn of_type(status: StatusCode, type_uri: &str, title: &str) -> Problem {
        let mut body = String::with_capacity(192 + type_uri.len() + title.len());
        body.push_str("{\"type\":");
        write_json_string(&mut body, type_uri);
        body.push_str(",\"title\":");
        write_json_string(&mut body, title);
        body.push_str(",\"status\":");
        push_u64(&mut body, status.as_u16().into());
        Problem { status, body }
    }

    /// The status the document states (and its response carries).
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Adds `detail`: an explanation for a person, specific to this
    /// occurrence.
    pub fn detail(mut self, detail: &str) -> Problem {
        self.body.push_str(",\"detail\":");
        write_json_string(&mut self.body, detail);
        self
    }

    /// Adds a `detail` written by formatting `args`, escaped as it is
    /// written (no intermediate `String`).
    ///
    /// ```
    /// use http::StatusCode;
    /// use limiter_tower::problem::Problem;
    ///
    /// let body = Problem::new(StatusCode::BAD_REQUEST)
    ///     .detail_fmt(format_args!("bad header {:?}", "x\ny"))
    ///     .into_body();
    /// assert!(body.ends_with(r#""detail":"bad header \"x\\ny\""}"#));
    /// ```
    pub fn detail_fmt(mut self, args: fmt::Arguments<'_>) -> Problem {
        self.body.push_str(",\"detail\":\"");
        // Writing into a String cannot fail.
        let _ = fmt::write(&mut Escaped(&mut self.body), args);
        self.body.push('"');
        self
    }

    /// Adds `instance`: a URI reference naming this occurrence.
    pub fn instance(mut self, uri: &str) -> Problem {
        self.body.push_str(",\"instance\":");
        write_json_string(&mut self.body, uri);
        self
    }

    /// Adds the extension member `name` with `value`.
    pub fn member<V: JsonValue>(mut self, name: &str, value: V) -> Problem {
        self.body.push(',');
        write_json_string(&mut self.body, name);
        self.body.push(':');
        value.write_json(&mut self.body);
        self
    }

    /// The finished document.
    pub fn into_body(mut self) -> String {
        self.body.push('}');
        self.body
    }

    /// The response: the status, `Content-Type: application/problem+json`
    /// and the document as its body. Map the body into your own body type
    /// (`response.map(Either::Right)`) where it differs.
    pub fn into_response(self) -> Response<Full<Bytes>> {
        let status = self.status;
        response(status, Bytes::from(self.into_body()))
    }
}

/// A wait in whole milliseconds, rounded up, so a client that waits this
/// long is not early: the unit of every `retry_after_ms` the workspace
/// writes (the `429` document's, the gateway's `/explain`).
pub fn millis_up(d: std::time::Duration) -> u64 {
    // In u64: whole seconds are whole milliseconds (no 128-bit division).
    let ms = u64::from(d.subsec_nanos().div_ceil(1_000_000));
    d.as_secs()
        .checked_mul(1_000)
        .and_then(|s| s.checked_add(ms))
        .unwrap_or(u64::MAX)
}

/// The response of a finished document: `status`, its `Content-Type` and
/// `body`.
fn response(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// A problem document that is fixed but for one integer, stated in one or
/// more places (a `429`'s wait, in its `detail` and its `retry_after_ms`):
/// for a response sent often, whose text should not be escaped and
/// formatted anew each time.
///
/// The fixed text is [`Problem`]'s own, byte for byte: the document is
/// written once by the builder, with a [`Placeholder`] in each of the integer's
/// places, and cut there. [`fill`](Template::fill) then copies the pieces,
/// with the integer's digits between them, into one allocation of the
/// document's exact size (so `Bytes` takes it without allocating again).
#[derive(Debug, Clone)]
pub(crate) struct Template {
    status: StatusCode,
    /// The document around the integer's places: one more piece than
    /// places.
    pieces: Box<[Box<[u8]>]>,
    /// The pieces' total length.
    fixed: usize,
}

impl Template {
    /// The document that `write` builds when given a [`Placeholder`] for the
    /// integer. Its fixed text must not contain `U+FFFF` (the placeholder's mark).
    pub(crate) fn new(write: impl FnOnce(Placeholder) -> Problem) -> Template {
        let problem = write(Placeholder);
        let status = problem.status;
        let body = problem.into_body();
        let pieces: Box<[Box<[u8]>]> = body
            .split(Placeholder::MARK)
            .map(|p| p.as_bytes().into())
            .collect();
        let fixed = pieces.iter().map(|p| p.len()).sum();
        Template {
            status,
            pieces,
            fixed,
        }
    }

    /// The document stating `n` in every place.
    pub(crate) fn document(&self, n: u64) -> Bytes {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(n).as_bytes();
        let places = self.pieces.len().saturating_sub(1);
        let mut body = Vec::with_capacity(self.fixed + places * digits.len());
        if let Some((last, pieces)) = self.pieces.split_last() {
            for piece in pieces {
                body.extend_from_slice(piece);
                body.extend_from_slice(digits);
            }
            body.extend_from_slice(last);
        }
        Bytes::from(body)
    }

    /// The response of `document`, one of this template's documents.
    pub(crate) fn respond(&self, document: Bytes) -> Response<Full<Bytes>> {
        response(self.status, document)
    }
}

/// The place of a [`Template`]'s integer: written as the mark `U+FFFF` (a
/// noncharacter, which Unicode reserves for a program's internal use), by
/// `Display` (in a [`Problem::detail_fmt`]) and as a member's value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placeholder;

impl Placeholder {
    const MARK: char = '\u{ffff}';
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Write::write_char(f, Placeholder::MARK)
    }
}

impl JsonValue for Placeholder {
    fn write_json(&self, out: &mut String) {
        out.push(Placeholder::MARK);
    }
}

/// The reason phrase RFC 9110 (and RFC 6585 for 428, 429, 431, 511) gives
/// `status`, for a problem's `title`; `None` for an unregistered status.
///
/// ```
/// use http::StatusCode;
/// use limiter_tower::problem::title;
///
/// assert_eq!(title(StatusCode::PAYLOAD_TOO_LARGE), Some("Content Too Large"));
/// assert_eq!(title(StatusCode::TOO_MANY_REQUESTS), Some("Too Many Requests"));
/// assert_eq!(title(StatusCode::from_u16(599).unwrap()), None);
/// ```
pub fn title(status: StatusCode) -> Option<&'static str> {
    match status.as_u16() {
        // The `http` crate keeps the RFC 7231 names of these two.
        413 => Some("Content Too Large"),
        422 => Some("Unprocessable Content"),
        _ => status.canonical_reason(),
    }
}

/// The body of a response whose body is complete (a `Full`), as text: for
/// the tests of the layer's own responses.
#[cfg(test)]
pub(crate) fn full_body(response: Response<Full<Bytes>>) -> String {
    use http_body_util::BodyExt as _;
    use std::future::Future as _;
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut collect = std::pin::pin!(response.into_body().collect());
    match collect.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(c)) => String::from_utf8(c.to_bytes().to_vec()).unwrap(),
        _ => panic!("a full body is ready at once"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_follow_rfc_9110_and_unknown_statuses_have_none() {
        let body = Problem::new(StatusCode::PAYLOAD_TOO_LARGE).into_body();
        assert_eq!(
            body,
            r#"{"type":"about:blank","title":"Content Too Large","status":413}"#
        );
        let unknown = StatusCode::from_u16(599).unwrap();
        assert_eq!(
            Problem::new(unknown).detail("d").into_body(),
            r#"{"type":"about:blank","status":599,"detail":"d"}"#
        );
        assert_eq!(
            title(StatusCode::UNPROCESSABLE_ENTITY),
            Some("Unprocessable Content")
        );
    }

    #[test]
    fn typed_problems_and_responses() {
        let problem = Problem::of_type(
            StatusCode::TOO_MANY_REQUESTS,
            "https://iana.org/assignments/http-problem-types#quota-exceeded",
            "Quota Exceeded",
        )
        .detail_fmt(format_args!("{} \"{}\"", 1, "two"))
        .instance("/orders/7");
        assert_eq!(
            problem.clone().into_body(),
            concat!(
                r#"{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","#,
                r#""title":"Quota Exceeded","status":429,"detail":"1 \"two\"","instance":"/orders/7"}"#
            )
        );
        let response = problem.into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::CONTENT_TYPE], CONTENT_TYPE);
    }

    #[test]
    fn templates_fill_in_the_writers_own_document() {
        let template = Template::new(|n| {
            Problem::new(StatusCode::BAD_REQUEST)
                .detail_fmt(format_args!("a \"{n}\"\n{n}"))
                .member("x\n", "y")
                .member("n", n)
        });
        let cases = [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX];
        for n in cases {
            let written = Problem::new(StatusCode::BAD_REQUEST)
                .detail_fmt(format_args!("a \"{n}\"\n{n}"))
                .member("x\n", "y")
                .member("n", n)
                .into_body();
            let response = template.respond(template.document(n));
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
            assert_eq!(response.headers()[header::CONTENT_TYPE], CONTENT_TYPE);
            assert_eq!(response.headers().len(), 1);
            assert_eq!(full_body(response), written);
        }
        // No placeholder: the document as it is, whatever the number.
        let fixed = Template::new(|_| Problem::new(StatusCode::BAD_GATEWAY).detail("d"));
        assert_eq!(
            full_body(fixed.respond(fixed.document(7))),
            r#"{"type":"about:blank","title":"Bad Gateway","status":502,"detail":"d"}"#
        );
    }
}
