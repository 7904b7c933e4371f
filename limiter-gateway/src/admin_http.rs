//! The admin listener's small HTTP pieces, shared by its endpoints
//! (`admin`, `admin_keys`): problem documents and JSON strings through the
//! workspace's one writer (`limiter_tower::problem`), path segments
//! percent-decoded once, and request bodies read up to a cap.

use std::borrow::Cow;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use limiter_tower::problem::Problem;

/// The largest request body an admin call reads (a JSON quota, say):
/// 64 KiB; a longer one is answered `413`.
pub(crate) const MAX_ADMIN_BODY: usize = 64 * 1024;

/// `s` escaped for the inside of a JSON string (the workspace's one
/// escaper, `limiter_tower::problem::write_json_string`, without its quotes).
pub(crate) fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    limiter_tower::problem::write_json_string(&mut out, s);
    out[1..out.len() - 1].to_owned()
}

/// An admin answer that is a problem document: `status` and `detail`.
pub(crate) fn problem(status: StatusCode, detail: &str) -> Response<Full<Bytes>> {
    Problem::new(status).detail(detail).into_response()
}

/// The path's segments after the leading `/`, each percent-decoded once
/// (a segment that does not decode to UTF-8 is kept as sent). A key in an
/// admin path (`/rules/{rule}/penalties/{key}`, `/rules/{rule}/keys/{key}`)
/// is the key text as `/explain` shows it, written as a path segment: `%`
/// as `%25`, `/` as `%2F`.
pub(crate) fn segments(path: &str) -> Vec<Cow<'_, str>> {
    path.strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(percent_decode)
        .collect()
}

/// `s` with every `%XX` replaced by its byte; `s` itself if it has no
/// escape or the result is not UTF-8.
pub(crate) fn percent_decode(s: &str) -> Cow<'_, str> {
    if !s.contains('%') {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_or(Cow::Borrowed(s), Cow::Owned)
}

/// The body of an admin call, at most [`MAX_ADMIN_BODY`] bytes (for the
/// calls that take a JSON document).
///
/// # Errors
///
/// The answer to send instead: `413` for a longer body, `400` for one
/// that failed to arrive.
pub(crate) async fn read_body<B>(body: B) -> Result<Bytes, Response<Full<Bytes>>>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match Limited::new(body, MAX_ADMIN_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("an admin request body holds at most {MAX_ADMIN_BODY} bytes"),
        )),
        Err(e) => Err(problem(
            StatusCode::BAD_REQUEST,
            &format!("the request body did not arrive: {e}"),
        )),
    }
}
