//! What a request must satisfy before any rule sees it, and the client
//! errors the gateway counts.
//!
//! In order: a head with ambiguous framing (module `framing`) is `400`
//! and its connection closed; the request's `Host` and target authority
//! are valid and agree (module `host`, RFC 9112 §3.2, else `400`); the
//! request target is at most `max_field_bytes` (else `414`) and so is every
//! header field, name and value (else `431`: nginx's
//! `large_client_header_buffers` of 8 KiB); the path is normalised (module
//! `paths`: the rules and the upstream routing see the normal form, the
//! proxy forwards it, a bad escape or, under [`PathMode::Reject`], a path
//! not in normal form is `400`). Every refusal is a problem document and
//! one count of `gateway_client_errors_total{kind}`.

use std::borrow::Cow;
use std::sync::OnceLock;

use http::uri::PathAndQuery;
use http::{HeaderValue, Request, Response, StatusCode, Uri};

use crate::framing::Ambiguity;
use crate::paths::{PathMode, normalize};
use crate::reply::{ProxyBody, problem};

/// A client error, by what the client got wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientError {
    /// A `Host` missing from HTTP/1.1, repeated, not `host[:port]`, or
    /// naming another authority than the target (module `host`).
    Host,
    /// A path with a bad escape, or not normal under `reject`.
    Path,
    /// A request target over `max_field_bytes`.
    TargetTooLong,
    /// A header field over `max_field_bytes`, or too many / too large a
    /// head (hyper's own `431`, not counted here).
    HeaderTooLarge,
    /// A head with both `Content-Length` and `Transfer-Encoding`, or a
    /// repeated `Content-Length` (module `framing`).
    Framing,
    /// A request body that does not parse (a bad chunk size).
    BodyMalformed,
    /// A request body the client stopped sending.
    BodyAborted,
}

impl ClientError {
    const ALL: [ClientError; 7] = [
        ClientError::Host,
        ClientError::Path,
        ClientError::TargetTooLong,
        ClientError::HeaderTooLarge,
        ClientError::Framing,
        ClientError::BodyMalformed,
        ClientError::BodyAborted,
    ];

    fn label(self) -> &'static str {
        match self {
            ClientError::Host => "host",
            ClientError::Path => "path",
            ClientError::TargetTooLong => "target_too_long",
            ClientError::HeaderTooLarge => "header_too_large",
            ClientError::Framing => "framing",
            ClientError::BodyMalformed => "body_malformed",
            ClientError::BodyAborted => "body_aborted",
        }
    }

    /// Counts one.
    pub(crate) fn count(self) {
        counters()[self as usize].increment(1);
    }
}

/// The metric of client errors.
pub(crate) const CLIENT_ERRORS: &str = "gateway_client_errors_total";

fn counters() -> &'static [metrics::Counter; 7] {
    static COUNTERS: OnceLock<[metrics::Counter; 7]> = OnceLock::new();
    COUNTERS.get_or_init(|| {
        metrics::describe_counter!(
            CLIENT_ERRORS,
            "Requests refused or cut short by the client's own mistake, by kind (never counted as upstream errors)."
        );
        ClientError::ALL.map(|k| metrics::counter!(CLIENT_ERRORS, "kind" => k.label()))
    })
}

/// Registers every series (so each exists from start).
pub(crate) fn register() {
    counters();
}

/// The answer to a request whose head has ambiguous framing (module
/// `framing`): `400`, and the connection closed after it (the body is
/// never read, so nothing after it on the connection can be trusted).
pub(crate) fn refuse_framing(ambiguity: Ambiguity) -> Response<ProxyBody> {
    let mut response = Refusal::new(
        ClientError::Framing,
        StatusCode::BAD_REQUEST,
        ambiguity.detail(),
    )
    .answer();
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The path the proxy forwards when it differs from the matched one (a
/// path with `;` parameters), as a request extension.
#[derive(Debug, Clone)]
pub(crate) struct ForwardPath(pub(crate) PathAndQuery);

/// How requests are checked (from the gateway file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checks {
    pub(crate) paths: PathMode,
    pub(crate) max_field_bytes: usize,
}

/// Why a request is refused before any rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// What the client got wrong.
    pub(crate) kind: ClientError,
    /// The status it is answered with.
    pub(crate) status: StatusCode,
    /// The problem document's detail.
    pub(crate) detail: Cow<'static, str>,
}

impl Refusal {
    fn new(kind: ClientError, status: StatusCode, detail: impl Into<Cow<'static, str>>) -> Refusal {
        Refusal {
            kind,
            status,
            detail: detail.into(),
        }
    }

    /// The answer sent instead of the request: a problem document, counted.
    pub(crate) fn answer(self) -> Response<ProxyBody> {
        self.kind.count();
        problem(self.status, &self.detail)
    }
}

fn with_path(uri: &Uri, path: &str) -> Option<PathAndQuery> {
    let pq = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    PathAndQuery::try_from(pq).ok()
}

/// Checks `request` (module doc) and rewrites its path to the normal form;
/// the answer to send instead when it fails (not boxed: it is sent at once,
/// and the success path carries nothing).
#[allow(clippy::result_large_err)]
pub(crate) fn check<B>(
    request: &mut Request<B>,
    checks: Checks,
) -> Result<(), Response<ProxyBody>> {
    inspect(request, checks).map_err(Refusal::answer)
}

/// [`check`] without answering or counting: what `/explain` runs, so that
/// it decides on what the listener's rules would see.
pub(crate) fn inspect<B>(request: &mut Request<B>, checks: Checks) -> Result<(), Refusal> {
    let bad = |detail| Refusal::new(ClientError::Path, StatusCode::BAD_REQUEST, detail);
    if let Err(detail) = crate::host::check(request.version(), request.uri(), request.headers()) {
        return Err(Refusal::new(
            ClientError::Host,
            StatusCode::BAD_REQUEST,
            detail,
        ));
    }
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |pq| pq.as_str().len());
    if target > checks.max_field_bytes {
        return Err(Refusal::new(
            ClientError::TargetTooLong,
            StatusCode::URI_TOO_LONG,
            "the request target is too long",
        ));
    }
    let too_large = request
        .headers()
        .iter()
        .any(|(name, value): (_, &HeaderValue)| {
            name.as_str().len() + value.len() > checks.max_field_bytes
        });
    if too_large {
        return Err(Refusal::new(
            ClientError::HeaderTooLarge,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "a header field is too large",
        ));
    }
    let path = request.uri().path();
    let normal = normalize(path).map_err(|e| bad(Cow::Owned(e.to_string())))?;
    if normal.forward == path && normal.matched == path {
        return Ok(());
    }
    if checks.paths == PathMode::Reject && normal.forward != path {
        return Err(bad(Cow::Owned(format!(
            "the path is not in normal form; send {}",
            normal.forward
        ))));
    }
    let uri = request.uri();
    let (Some(matched), Some(forward)) = (
        with_path(uri, &normal.matched),
        with_path(uri, &normal.forward),
    ) else {
        return Err(bad(Cow::Borrowed("the path cannot be normalised")));
    };
    let keep_forward = normal.forward != normal.matched;
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(matched);
    let Ok(new) = Uri::from_parts(parts) else {
        return Err(bad(Cow::Borrowed("the path cannot be normalised")));
    };
    *request.uri_mut() = new;
    if keep_forward {
        request.extensions_mut().insert(ForwardPath(forward));
    }
    Ok(())
}
