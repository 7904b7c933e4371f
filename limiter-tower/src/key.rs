//! [`KeyExtractor`]: what a request is counted by.
//!
//! An extractor reads a [`RequestHead`] (method, URI, headers, extensions:
//! never the body) and returns the key, or a [`KeyError`] that the layer
//! turns into a response naming the problem. No extractor falls back to a
//! shared bucket on its own: [`KeyExtractor::or`] does, when the user asks.
//!
//! Built-ins: [`Global`] (one bucket), [`PeerIp`](crate::PeerIp) and
//! [`ClientIp`](crate::ClientIp) (addresses), [`Header`] (an API key, a user
//! id), [`Extension`] (a value an earlier layer put on the request, such as
//! an authenticated user), [`Route`] (axum's route template), and pairs of
//! extractors for composites such as `userID:apiPath`:
//! `(Extension::<UserId>::new(), Route)`.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use http::header::HeaderName;
use http::{Extensions, HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};

/// The parts of a request that keys, costs and bypass rules may read.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> RequestHead<'a> {
    /// The head of `request`.
    pub fn of<B>(request: &'a Request<B>) -> RequestHead<'a> {
        RequestHead {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        }
    }

    /// The request method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The request URI (the raw path: do not key on it, see [`Route`]).
    pub fn uri(&self) -> &'a Uri {
        self.uri
    }

    /// The request headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The request extensions (axum's `ConnectInfo`, `MatchedPath`, values
    /// set by earlier layers).
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

/// Why no key could be read from a request.
///
/// Each variant has the status the layer answers with and a detail that
/// names the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The request carries no peer address: the server was not set up to
    /// record it. Answered with `500`: it is a deployment mistake, not the
    /// client's.
    MissingPeer,
    /// The request lacks the header the key is read from. Answered with `400`.
    MissingHeader {
        /// The header.
        name: HeaderName,
    },
    /// The request lacks the extension the key is read from (the layer that
    /// sets it did not run first). Answered with `500`.
    MissingExtension {
        /// The extension's type.
        type_name: &'static str,
    },
}

impl KeyError {
    /// The status the layer answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            KeyError::MissingHeader { .. } => StatusCode::BAD_REQUEST,
            KeyError::MissingPeer | KeyError::MissingExtension { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::MissingPeer => f.write_str(
                "the rate limiter needs the client's socket address but the request has none; \
                 serve with `into_make_service_with_connect_info::<SocketAddr>()` (axum) or insert \
                 `limiter_tower::PeerAddr` into each request's extensions (hyper)",
            ),
            KeyError::MissingHeader { name } => {
                write!(
                    f,
                    "the request has no `{name}` header, which this API requires"
                )
            }
            KeyError::MissingExtension { type_name } => write!(
                f,
                "the rate limiter keys on the request extension `{type_name}` but it is not set; \
                 add the layer that sets it before (outside) the rate limiter"
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// Reads the key a request is counted by.
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key; it must be what the backend counts by.
    type Key: Send + Sync + 'static;

    /// The key of `request`.
    ///
    /// # Errors
    ///
    /// A [`KeyError`] when the request does not carry what the key is made
    /// of.
    fn extract(&self, request: &RequestHead<'_>) -> Result<Self::Key, KeyError>;

    /// Uses `fallback` as the key when this extractor fails: an explicit
    /// shared bucket for requests without the key.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::header::HeaderName;
    /// use http::{HeaderValue, Request};
    /// use limiter_tower::{Header, KeyExtractor, RequestHead};
    ///
    /// let key = Header::new(HeaderName::from_static("x-api-key"))
    ///     .or(HeaderValue::from_static("anonymous"));
    /// let request = Request::new(());
    /// assert_eq!(key.extract(&RequestHead::of(&request))?, "anonymous");
    /// # Ok::<(), limiter_tower::KeyError>(())
    /// ```
    fn or(self, fallback: Self::Key) -> Or<Self>
    where
        Self: Sized,
        Self::Key: Clone,
    {
        Or {
            extractor: self,
            fallback,
        }
    }
}

/// One bucket for every request (the key is `()`), for a global
/// [`RateLimiter`](limiter_core::RateLimiter).
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

impl KeyExtractor for Global {
    type Key = ();

    fn extract(&self, _request: &RequestHead<'_>) -> Result<(), KeyError> {
        Ok(())
    }
}

/// The value of a request header: an API key, a user id set by a trusted
/// gateway. A request without it is answered `400`.
///
/// # Examples
///
/// ```
/// use http::header::HeaderName;
/// use http::Request;
/// use limiter_tower::{Header, KeyExtractor, RequestHead};
///
/// let key = Header::new(HeaderName::from_static("x-api-key"));
/// let request = Request::builder().header("x-api-key", "k-123").body(())?;
/// assert_eq!(key.extract(&RequestHead::of(&request))?, "k-123");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Only key on a header a client cannot pick freely (one it must
/// authenticate with, or one your gateway overwrites): a client that can
/// choose its key can take a fresh bucket per request.
#[derive(Debug, Clone)]
pub struct Header {
    name: HeaderName,
}

impl Header {
    /// Keys on header `name`.
    pub fn new(name: HeaderName) -> Header {
        Header { name }
    }
}

impl KeyExtractor for Header {
    type Key = HeaderValue;

    fn extract(&self, request: &RequestHead<'_>) -> Result<HeaderValue, KeyError> {
        request
            .headers()
            .get(&self.name)
            .cloned()
            .ok_or_else(|| KeyError::MissingHeader {
                name: self.name.clone(),
            })
    }
}

/// A value of type `T` that an earlier layer stored in the request's
/// extensions (an authenticated user id, a tenant).
///
/// # Examples
///
/// ```
/// use http::Request;
/// use limiter_tower::{Extension, KeyExtractor, RequestHead};
///
/// #[derive(Clone, Hash, PartialEq, Eq, Debug)]
/// struct UserId(u64);
///
/// let mut request = Request::new(());
/// request.extensions_mut().insert(UserId(42)); // set by your auth layer
/// let key = Extension::<UserId>::new().extract(&RequestHead::of(&request))?;
/// assert_eq!(key, UserId(42));
/// # Ok::<(), limiter_tower::KeyError>(())
/// ```
pub struct Extension<T> {
    _type: PhantomData<fn() -> T>,
}

impl<T> Extension<T> {
    /// Keys on the extension of type `T`.
    pub fn new() -> Extension<T> {
        Extension { _type: PhantomData }
    }
}

impl<T> Default for Extension<T> {
    fn default() -> Extension<T> {
        Extension::new()
    }
}

impl<T> Clone for Extension<T> {
    fn clone(&self) -> Extension<T> {
        Extension::new()
    }
}

impl<T> fmt::Debug for Extension<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Extension<{}>", std::any::type_name::<T>())
    }
}

impl<T: Clone + Hash + Eq + Send + Sync + 'static> KeyExtractor for Extension<T> {
    type Key = T;

    fn extract(&self, request: &RequestHead<'_>) -> Result<T, KeyError> {
        request
            .extensions()
            .get::<T>()
            .cloned()
            .ok_or(KeyError::MissingExtension {
                type_name: std::any::type_name::<T>(),
            })
    }
}

/// The route template a request matched (axum's `MatchedPath`, such as
/// `/users/{id}`), never the raw path, so ids in paths cannot create
/// unbounded keys. A request that matched no route (a 404) has the key
/// [`Route::UNMATCHED`].
#[cfg(feature = "axum")]
#[derive(Debug, Clone, Copy, Default)]
pub struct Route;

#[cfg(feature = "axum")]
impl Route {
    /// The key of requests that matched no route.
    pub const UNMATCHED: &'static str = "<unmatched>";
}

#[cfg(feature = "axum")]
impl KeyExtractor for Route {
    type Key = std::sync::Arc<str>;

    fn extract(&self, request: &RequestHead<'_>) -> Result<std::sync::Arc<str>, KeyError> {
        Ok(request
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .map_or_else(|| Route::UNMATCHED.into(), |p| p.as_str().into()))
    }
}

/// A composite key: both parts, as a pair.
impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for (A, B) {
    type Key = (A::Key, B::Key);

    fn extract(&self, request: &RequestHead<'_>) -> Result<Self::Key, KeyError> {
        Ok((self.0.extract(request)?, self.1.extract(request)?))
    }
}

/// An extractor with a fallback key; see [`KeyExtractor::or`].
#[derive(Debug, Clone)]
pub struct Or<E: KeyExtractor> {
    extractor: E,
    fallback: E::Key,
}

impl<E: KeyExtractor> KeyExtractor for Or<E>
where
    E::Key: Clone,
{
    type Key = E::Key;

    fn extract(&self, request: &RequestHead<'_>) -> Result<E::Key, KeyError> {
        Ok(self
            .extractor
            .extract(request)
            .unwrap_or_else(|_| self.fallback.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_key_and_its_absence() {
        let key = Header::new(HeaderName::from_static("x-user"));
        let mut request = Request::new(());
        let err = key.extract(&RequestHead::of(&request)).unwrap_err();
        assert_eq!(err.status(), StatusCode::BAD_REQUEST);
        assert!(err.to_string().contains("x-user"));
        request
            .headers_mut()
            .insert("x-user", HeaderValue::from_static("alice"));
        assert_eq!(key.extract(&RequestHead::of(&request)).unwrap(), "alice");
    }

    #[test]
    fn extension_composite_with_route() {
        #[derive(Clone, Hash, PartialEq, Eq, Debug)]
        struct UserId(u32);
        let key = (Extension::<UserId>::new(), Route);
        let mut request = Request::new(());
        assert_eq!(
            key.extract(&RequestHead::of(&request))
                .unwrap_err()
                .status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        request.extensions_mut().insert(UserId(7));
        let (user, route) = key.extract(&RequestHead::of(&request)).unwrap();
        assert_eq!((user, &*route), (UserId(7), Route::UNMATCHED));
    }
}
