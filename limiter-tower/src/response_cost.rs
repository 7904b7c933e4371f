//! What a cost after the response reads: the response's head
//! ([`ResponseHead`]), the header reader [`cost_in_header`], and a layer's
//! setting (`ResponseCost`: the reader and the debt cap). The charge itself
//! is module `charge`.

use std::fmt;
use std::time::Duration;

use http::header::HeaderName;
use http::{Extensions, HeaderMap, Response, StatusCode, Version};

/// The parts of a response that a cost after the response may read.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    status: StatusCode,
    version: Version,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> ResponseHead<'a> {
    /// The head of `response`.
    pub fn of<B>(response: &'a Response<B>) -> ResponseHead<'a> {
        ResponseHead {
            status: response.status(),
            version: response.version(),
            headers: response.headers(),
            extensions: response.extensions(),
        }
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The response headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The response extensions (values the inner service put there).
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

/// Reads a request's total cost from its response head; `None`: missing or
/// malformed.
pub(crate) type ResponseCostFn = dyn Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync;

/// How a layer charges after the response.
pub(crate) struct ResponseCost {
    pub(crate) read: Box<ResponseCostFn>,
    pub(crate) max_debt: Duration,
}

impl fmt::Debug for ResponseCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseCost")
            .field("max_debt", &self.max_debt)
            .finish_non_exhaustive()
    }
}

/// The total cost in header `name`: one value of 1 to 20 ASCII digits
/// (optional surrounding spaces or tabs) that fits a `u64`. A missing
/// header, a header sent twice, a sign, a fraction or a unit is malformed.
///
/// # Examples
///
/// ```
/// use http::header::HeaderName;
/// use limiter_tower::{ResponseHead, cost_in_header};
///
/// let read = cost_in_header(HeaderName::from_static("x-tokens-used"));
/// let ok = http::Response::builder().header("x-tokens-used", " 250 ").body(()).unwrap();
/// assert_eq!(read(&ResponseHead::of(&ok)), Some(250));
/// let bad = http::Response::builder().header("x-tokens-used", "250tokens").body(()).unwrap();
/// assert_eq!(read(&ResponseHead::of(&bad)), None);
/// let missing = http::Response::new(());
/// assert_eq!(read(&ResponseHead::of(&missing)), None);
/// ```
pub fn cost_in_header(
    name: HeaderName,
) -> impl Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync + 'static {
    move |head| {
        let mut values = head.headers().get_all(&name).iter();
        let value = values.next()?;
        if values.next().is_some() {
            return None;
        }
        let digits = value.as_bytes().trim_ascii();
        if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        // ASCII digits: valid UTF-8; 20 digits may still overflow a u64.
        std::str::from_utf8(digits).ok()?.parse().ok()
    }
}
