//! [`AnswerBody`]: the response body the layer writes its own answers
//! (429, 413, 503, no key) into.
//!
//! The trait is the one place that says how an answer becomes a body of
//! each type; the layer (`future.rs`) calls it where it answers, and so
//! does limiter-concurrency's layer (its 503 and gRPC answers).

use bytes::Bytes;
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{BodyExt as _, Either, Full};

/// A response body the layer can write its own answers into.
///
/// The layer answers in the inner service's own body type, as tower-http's
/// middlewares do: a [`RateLimitService`](crate::RateLimitService) around a
/// service of `Response<B>` is a service of `Response<B>`, so a framework
/// that wants one body type gets it unchanged. Under axum the inner body is
/// `axum::body::Body`, and the response goes out without axum boxing it
/// again (it boxes any other body type once per response).
///
/// | inner body | the layer's own answer is |
/// |---|---|
/// | `axum::body::Body` (feature `axum`) | `Body::new(full)`: one box, as axum would make of any body |
/// | [`Full<Bytes>`] | the document itself |
/// | [`Either<B, Full<Bytes>>`] for any `B` | `Either::Right(full)` |
/// | `tonic::body::Body` (feature `tonic`) | `Body::new(full)`: one box, as tonic makes of any body (none for the empty body of a gRPC answer) |
/// | [`BoxBody<Bytes, E>`], [`UnsyncBoxBody<Bytes, E>`] (tonic 0.12's body) | the document, boxed |
///
/// # A body the layer cannot write into
///
/// A body that only ever streams what it was given (hyper's `Incoming`)
/// cannot carry the layer's answer. Map it into `Either<B, Full<Bytes>>`
/// below the layer: the layer then answers `Either::Right`, and the inner
/// service's responses go through as `Either::Left`. With tower's
/// `ServiceBuilder` (outermost first):
///
/// ```
/// use std::convert::Infallible;
/// use bytes::Bytes;
/// use http::{Request, Response};
/// use http_body_util::{Either, Empty, Full};
/// use limiter_core::{Quota, RateLimiter};
/// use limiter_tower::{Global, RateLimitLayer};
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// // A body that cannot carry a document, standing in for hyper's `Incoming`.
/// type Streamed = Empty<Bytes>;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = RateLimiter::new(Quota::per_second(1)?);
/// let service = ServiceBuilder::new()
///     .layer(RateLimitLayer::new(limiter, Global))
///     .map_response(|response: Response<Streamed>| response.map(Either::Left))
///     .service(service_fn(|_: Request<()>| async {
///         Ok::<_, Infallible>(Response::new(Streamed::new()))
///     }));
/// let response: Response<Either<Streamed, Full<Bytes>>> =
///     service.clone().oneshot(Request::new(())).await?;
/// assert!(matches!(response.body(), Either::Left(_)));
/// let response = service.oneshot(Request::new(())).await?;
/// assert_eq!(response.status(), 429);
/// assert!(matches!(response.body(), Either::Right(_)));
/// # Ok(())
/// # }
/// ```
///
/// # The answer
///
/// The answer is the complete document ([`Rejection::problem`](crate::Rejection::problem),
/// or what [`on_rejection`](crate::RateLimitBuilder::on_rejection)
/// wrote), as a [`Full<Bytes>`]; the response's status and headers are the
/// layer's, set around the body this returns.
///
/// Implement it for a body type of your own that can hold a
/// `Full<Bytes>`.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
/// use limiter_tower::AnswerBody;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let body = axum::body::Body::from_answer(Full::new(Bytes::from_static(b"{}")));
/// assert_eq!(body.collect().await.unwrap().to_bytes(), "{}");
/// # }
/// ```
pub trait AnswerBody: Sized {
    /// This body type carrying the layer's answer `body`.
    fn from_answer(body: Full<Bytes>) -> Self;
}

impl AnswerBody for Full<Bytes> {
    #[inline]
    fn from_answer(body: Full<Bytes>) -> Self {
        body
    }
}

impl<B> AnswerBody for Either<B, Full<Bytes>> {
    #[inline]
    fn from_answer(body: Full<Bytes>) -> Self {
        Either::Right(body)
    }
}

impl<E: 'static> AnswerBody for BoxBody<Bytes, E> {
    fn from_answer(body: Full<Bytes>) -> Self {
        body.map_err(|never| match never {}).boxed()
    }
}

impl<E: 'static> AnswerBody for UnsyncBoxBody<Bytes, E> {
    fn from_answer(body: Full<Bytes>) -> Self {
        body.map_err(|never| match never {}).boxed_unsync()
    }
}

#[cfg(feature = "axum")]
impl AnswerBody for axum::body::Body {
    /// The document in axum's body: boxed once, here, as axum boxes any
    /// body that is not its own.
    fn from_answer(body: Full<Bytes>) -> Self {
        axum::body::Body::new(body)
    }
}

#[cfg(feature = "tonic")]
impl AnswerBody for tonic::body::Body {
    /// The document in tonic's body: boxed once, here, as tonic boxes any
    /// body that is not its own (an empty document, as a gRPC answer's
    /// trailers-only response has, is tonic's empty body: no box).
    fn from_answer(body: Full<Bytes>) -> Self {
        tonic::body::Body::new(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    fn text<B>(body: B) -> String
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: std::fmt::Debug,
    {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut collect = std::pin::pin!(body.collect());
        match std::future::Future::poll(collect.as_mut(), &mut cx) {
            std::task::Poll::Ready(Ok(c)) => String::from_utf8(c.to_bytes().to_vec()).unwrap(),
            _ => panic!("an answer is complete at once"),
        }
    }

    fn answer() -> Full<Bytes> {
        Full::new(Bytes::from_static(br#"{"status":429}"#))
    }

    #[test]
    fn every_body_carries_the_answer_whole() {
        let expected = r#"{"status":429}"#;
        assert_eq!(text(Full::from_answer(answer())), expected);
        let either = Either::<http_body_util::Empty<Bytes>, _>::from_answer(answer());
        assert!(matches!(either, Either::Right(_)));
        assert_eq!(either.size_hint().exact(), Some(expected.len() as u64));
        assert_eq!(text(either), expected);
        assert_eq!(
            text(BoxBody::<Bytes, String>::from_answer(answer())),
            expected
        );
        assert_eq!(
            text(UnsyncBoxBody::<Bytes, std::io::Error>::from_answer(answer())),
            expected
        );
        #[cfg(feature = "axum")]
        {
            let body = axum::body::Body::from_answer(answer());
            assert_eq!(body.size_hint().exact(), Some(expected.len() as u64));
            assert_eq!(text(body), expected);
        }
        #[cfg(feature = "tonic")]
        {
            let body = tonic::body::Body::from_answer(answer());
            assert_eq!(body.size_hint().exact(), Some(expected.len() as u64));
            assert_eq!(text(body), expected);
            let empty = tonic::body::Body::from_answer(Full::new(Bytes::new()));
            assert!(empty.is_end_stream());
            assert_eq!(empty.size_hint().exact(), Some(0));
        }
    }
}
