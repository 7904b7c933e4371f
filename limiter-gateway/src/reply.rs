//! The gateway's answers, below every module that makes one: the body
//! type of every response it sends ([`ProxyBody`]: the upstream's stream or
//! its own document) and its own problem documents, written by the
//! workspace's one writer (`limiter_tower::problem`).

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{Either, Full};
use limiter_tower::problem::Problem;

use crate::response::ResponseBody;

/// The body of every response the gateway sends: the upstream's stream,
/// or a document of the gateway's own (its problem documents, and the
/// rules' 429, 413 and 503, which limiter-tower's layer writes into this
/// type as `Either::Right` through `AnswerBody`).
pub type ProxyBody = Either<ResponseBody, Full<Bytes>>;

/// A problem document response (the workspace's one writer,
/// `limiter_tower::problem`).
pub fn problem(status: StatusCode, detail: &str) -> Response<ProxyBody> {
    Problem::new(status)
        .detail(detail)
        .into_response()
        .map(Either::Right)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_json() {
        let r = problem(StatusCode::BAD_GATEWAY, "a \"quoted\"\nline");
        assert_eq!(r.status(), 502);
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        let Either::Right(body) = r.into_body() else {
            unreachable!("a problem has its own body")
        };
        let bytes = futures_lite_collect(body);
        assert_eq!(
            bytes,
            "{\"type\":\"about:blank\",\"title\":\"Bad Gateway\",\"status\":502,\"detail\":\"a \\\"quoted\\\"\\u000aline\"}"
        );
    }

    fn futures_lite_collect(body: Full<Bytes>) -> String {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = rt.block_on(body.collect()).unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }
}
