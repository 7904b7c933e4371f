//! The responses the layer writes itself, as RFC 9457
//! `application/problem+json`.
//!
//! | outcome | status | body's extra members |
//! |---|---|---|
//! | rate limited | `429 Too Many Requests` + `Retry-After` | `retry_after_ms` |
//! | cost above the burst (can never conform) | `413 Content Too Large`, no `Retry-After` | `cost`, `burst` |
//! | backend failed and `fail_open` is off | `503 Service Unavailable` | |
//! | no key (missing peer address, header, extension) | the [`KeyError`]'s status (`500`, `400`) | |
//!
//! A gRPC call gets [`Rejection::grpc`] instead ([`crate::grpc`]).
//!
//! A user closure ([`RateLimitBuilder::on_rejection`](crate::RateLimitBuilder::on_rejection))
//! may replace the response of a request that is not gRPC; the layer still
//! adds `Retry-After` and the rate-limit headers to a 429.

use std::fmt;
use std::sync::LazyLock;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;

use crate::key::KeyError;
use crate::problem::{Problem, Template, millis_up};

/// Why the layer answered a request itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// The request does not conform (within the delay, in delay mode); it
    /// would after `retry_after`. Nothing was consumed.
    RateLimited {
        /// The exact wait.
        retry_after: Duration,
    },
    /// The request costs more than the burst: it can never conform, so no
    /// `Retry-After` is given.
    OverBurst {
        /// The request's cost.
        cost: u32,
        /// The burst.
        burst: u32,
    },
    /// The backend could not decide and the layer fails closed.
    Unavailable,
    /// No key could be read from the request.
    NoKey(KeyError),
}

impl Rejection {
    /// The status of the default response.
    pub fn status(&self) -> StatusCode {
        match self {
            Rejection::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Rejection::OverBurst { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Rejection::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Rejection::NoKey(e) => e.status(),
        }
    }

    /// A sentence for a person (the problem's `detail`; also this type's
    /// `Display`).
    pub fn detail(&self) -> String {
        self.to_string()
    }

    /// The default response: `application/problem+json`, written by
    /// [`Problem`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::Rejection;
    ///
    /// let response = Rejection::RateLimited { retry_after: Duration::from_millis(1500) }.problem();
    /// assert_eq!(response.status(), 429);
    /// assert_eq!(response.headers()["content-type"], "application/problem+json");
    /// ```
    pub fn problem(&self) -> Response<Full<Bytes>> {
        let problem = match self {
            // The one response sent at the rate of the refused requests:
            // filled in from its template.
            Rejection::RateLimited { retry_after } => {
                return rate_limited(millis_up(*retry_after));
            }
            Rejection::OverBurst { cost, burst } => Problem::new(self.status())
                .detail_fmt(format_args!("{self}"))
                .member("cost", *cost)
                .member("burst", *burst),
            Rejection::Unavailable | Rejection::NoKey(_) => {
                Problem::new(self.status()).detail_fmt(format_args!("{self}"))
            }
        };
        problem.into_response()
    }
}

impl Rejection {
    /// The answer to a gRPC call ([`crate::grpc`]): trailers-only,
    /// `grpc-status` 8 (`RESOURCE_EXHAUSTED`, with the wait as
    /// `google.rpc.RetryInfo` when rate limited) or 14 (`UNAVAILABLE`);
    /// `None` for a missing key, which is answered as HTTP.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_tower::Rejection;
    ///
    /// let response = Rejection::RateLimited { retry_after: Duration::from_millis(1500) }
    ///     .grpc()
    ///     .unwrap();
    /// assert_eq!(response.status(), 200);
    /// assert_eq!(response.headers()["grpc-status"], "8");
    /// assert!(response.headers().contains_key("grpc-status-details-bin"));
    /// ```
    pub fn grpc(&self) -> Option<Response<Full<Bytes>>> {
        use crate::grpc::{RESOURCE_EXHAUSTED, UNAVAILABLE, trailers_only};
        let (code, wait) = match self {
            Rejection::RateLimited { retry_after } => (RESOURCE_EXHAUSTED, Some(*retry_after)),
            Rejection::OverBurst { .. } => (RESOURCE_EXHAUSTED, None),
            Rejection::Unavailable => (UNAVAILABLE, None),
            Rejection::NoKey(_) => return None,
        };
        Some(trailers_only(code, &self.to_string(), wait))
    }
}

/// The `429` document but for its wait, written once by [`Problem`]:
/// `{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded; retry in N ms","retry_after_ms":N}`.
static RATE_LIMITED: LazyLock<Template> = LazyLock::new(|| {
    Template::new(|ms| {
        Problem::new(StatusCode::TOO_MANY_REQUESTS)
            .detail_fmt(format_args!("{}", RateLimitedDetail(ms)))
            .member("retry_after_ms", ms)
    })
});

/// The `429` of a wait of `ms` milliseconds.
fn rate_limited(ms: u64) -> Response<Full<Bytes>> {
    RATE_LIMITED.respond(RATE_LIMITED.document(ms))
}

/// The detail of [`Rejection::RateLimited`] for a wait of `ms`
/// milliseconds (a number, or a template's slot).
struct RateLimitedDetail<T>(T);

impl<T: fmt::Display> fmt::Display for RateLimitedDetail<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limit exceeded; retry in {} ms", self.0)
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::RateLimited { retry_after } => {
                RateLimitedDetail(millis_up(*retry_after)).fmt(f)
            }
            Rejection::OverBurst { cost, burst } => write!(
                f,
                "this request costs {cost} permits but at most {burst} are granted at once; it can never be admitted under this limit"
            ),
            Rejection::Unavailable => {
                f.write_str("the rate limiter is unavailable; try again later")
            }
            Rejection::NoKey(e) => fmt::Display::fmt(e, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::full_body as body;

    #[test]
    fn problem_bodies() {
        let r = Rejection::RateLimited {
            retry_after: Duration::from_nanos(1_000_001),
        };
        assert_eq!(
            body(r.problem()),
            r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded; retry in 2 ms","retry_after_ms":2}"#
        );
        let r = Rejection::OverBurst { cost: 5, burst: 2 };
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            body(r.problem()),
            r#"{"type":"about:blank","title":"Content Too Large","status":413,"detail":"this request costs 5 permits but at most 2 are granted at once; it can never be admitted under this limit","cost":5,"burst":2}"#
        );
        let r = Rejection::NoKey(KeyError::MissingPeer);
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body(r.problem()).contains("into_make_service_with_connect_info::<SocketAddr>()"));
    }

    #[test]
    fn a_429_is_the_writers_document_for_any_wait() {
        let nanos = [
            0,
            1,
            999_999,
            1_000_000,
            1_000_001,
            7_500_000_000,
            3_600_000_000_000,
            u64::MAX,
        ];
        let waits = nanos
            .into_iter()
            .map(Duration::from_nanos)
            .chain([Duration::MAX]);
        for retry_after in waits {
            let r = Rejection::RateLimited { retry_after };
            // What the writer makes of the rejection, built in full.
            let written = Problem::new(StatusCode::TOO_MANY_REQUESTS)
                .detail_fmt(format_args!("{r}"))
                .member("retry_after_ms", millis_up(retry_after))
                .into_body();
            let response = r.problem();
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(
                response.headers().iter().collect::<Vec<_>>(),
                [(
                    &http::header::CONTENT_TYPE,
                    &http::HeaderValue::from_static("application/problem+json")
                )]
            );
            assert_eq!(body(response), written, "{retry_after:?}");
        }
        assert_eq!(
            Rejection::RateLimited {
                retry_after: Duration::MAX
            }
            .detail(),
            "rate limit exceeded; retry in 18446744073709551615 ms"
        );
    }
}
