//! The rate-limit headers: what a decision tells the client.
//!
//! [`RateLimitInfo`] is taken from the decision itself (never a second read
//! of the limiter), and a [`HeaderStyle`] writes it. The default is the
//! IETF HTTPAPI draft-10 pair:
//!
//! ```text
//! RateLimit-Policy: "default";q=10;w=1
//! RateLimit: "default";r=7;t=1
//! ```
//!
//! `RateLimit-Policy` states the steady rate and the burst: `q` permits
//! every `w` seconds is the rate (`1/t` for a GCRA quota with emission
//! interval `t`), and when `q` is more than may be sent at once, the
//! parameter `limiter-burst` (a vendor parameter, draft-10 §3.1) says how
//! many may:
//!
//! ```text
//! RateLimit-Policy: "orders";q=800;w=1;limiter-burst=1    800/s, one at a time
//! RateLimit-Policy: "reports";q=2;w=20                     one per 10 s, burst 2
//! ```
//!
//! `w` is the shortest whole number of seconds, at least the time an
//! emptied limit takes to refill (`burst · t`), for which `q = ⌊w/t⌋`
//! states the rate exactly or within 0.1 %; `q` never states more than the
//! rate. So `q ≥ burst`, and when `q = burst` (a limit whose refill takes
//! whole seconds) the item alone is exact and `limiter-burst` is left out.
//! A client that spends at most `limiter-burst` (else `q`) at once and
//! earns `q` more every `w` seconds (a token bucket of those numbers) is
//! admitted in full, at the whole rate. See docs/http.md for the reading
//! against draft-10 and its successors.
//!
//! `RateLimit`'s `r` is the permits left and `t` the whole seconds,
//! rounded up, until there are more (0 when full).
//! On a rejection `r=0` and `t` is the wait rounded up, and `Retry-After`
//! is the same number (at least 1), so a client that obeys either header
//! retries no earlier than the request conforms.
//!
//! The draft is still moving: implement [`HeaderStyle`] for another syntax,
//! or pick [`LegacyHeaders`] (`X-RateLimit-*`) or [`NoHeaders`].

use std::any::TypeId;
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderName;
use http::{HeaderMap, HeaderValue};
use limiter_core::Policy;

mod policy;
mod refusal;

use policy::{PolicyValue, policy_value};
use refusal::refusal_values;

const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// What one decision says about a key's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitInfo<'a> {
    /// The policy name (`RateLimit-Policy`'s key), from the layer's name.
    pub name: &'a str,
    /// The limit the key is decided under.
    pub policy: Policy,
    /// Permits left right after the decision.
    pub remaining: u32,
    /// Time until more than `remaining` are available.
    pub reset: Duration,
}

/// Whole seconds, rounded up: `ceil_secs(1 ms) == 1`, `ceil_secs(0) == 0`;
/// `u64::MAX` for a duration that rounds up beyond it.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

/// `Retry-After` for a wait: whole seconds rounded up, at least 1.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    ceil_secs(wait).max(1)
}

/// The `Retry-After` value of a wait ([`retry_after_secs`]): its digits,
/// copied into one allocation of their size (http's `From<u64>` makes two).
pub(crate) fn retry_after_value(wait: Duration) -> HeaderValue {
    let digits = Bytes::copy_from_slice(
        itoa::Buffer::new()
            .format(retry_after_secs(wait))
            .as_bytes(),
    );
    // SAFETY: ASCII digits are visible ASCII, a valid header value.
    unsafe { HeaderValue::from_maybe_shared_unchecked(digits) }
}

/// Writes [`RateLimitInfo`] into response headers.
pub trait HeaderStyle: Send + Sync + 'static {
    /// Adds the headers for `info` to `headers`.
    fn write(&self, info: &RateLimitInfo<'_>, headers: &mut HeaderMap);
}

/// `RateLimit-Policy` and `RateLimit` in the IETF HTTPAPI draft-10 syntax
/// (the default).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http::HeaderMap;
/// use limiter_tower::{Draft10, HeaderStyle, Policy, RateLimitInfo};
///
/// // 10 per second, burst 20.
/// let info = RateLimitInfo {
///     name: "api",
///     policy: Policy { burst: 20, interval: Duration::from_millis(100) },
///     remaining: 7,
///     reset: Duration::from_millis(100),
/// };
/// let mut headers = HeaderMap::new();
/// Draft10.write(&info, &mut headers);
/// assert_eq!(headers["ratelimit-policy"], r#""api";q=20;w=2"#);
/// assert_eq!(headers["ratelimit"], r#""api";r=7;t=1"#);
///
/// // 800 per second, one at a time.
/// let info = RateLimitInfo {
///     policy: Policy { burst: 1, interval: Duration::from_micros(1250) },
///     ..info
/// };
/// Draft10.write(&info, &mut headers);
/// assert_eq!(headers["ratelimit-policy"], r#""api";q=800;w=1;limiter-burst=1"#);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Draft10;

impl HeaderStyle for Draft10 {
    fn write(&self, info: &RateLimitInfo<'_>, headers: &mut HeaderMap) {
        // Any name: the value is checked (an invalid one writes nothing).
        let item = HeaderValue::from_maybe_shared(item_bytes(info)).ok();
        write_draft10(policy_value(info.name, &info.policy), item, headers);
    }
}

/// Writes `RateLimit-Policy` (`policy`) and `RateLimit` (`item`).
fn write_draft10(policy: Option<HeaderValue>, item: Option<HeaderValue>, headers: &mut HeaderMap) {
    if let (Some(policy), Some(item)) = (policy, item) {
        headers.insert(RATELIMIT_POLICY, policy);
        headers.insert(RATELIMIT, item);
    }
}

/// The `RateLimit` value `"name";r=remaining;t=reset` of `info`, written
/// into one allocation of its exact size (which `Bytes` then owns as it is).
fn item_bytes(info: &RateLimitInfo<'_>) -> Bytes {
    let (mut r, mut t) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (r, t) = (r.format(info.remaining), t.format(ceil_secs(info.reset)));
    let mut out = Vec::with_capacity(info.name.len() + r.len() + t.len() + 8);
    out.push(b'"');
    out.extend_from_slice(info.name.as_bytes());
    out.extend_from_slice(b"\";r=");
    out.extend_from_slice(r.as_bytes());
    out.extend_from_slice(b";t=");
    out.extend_from_slice(t.as_bytes());
    Bytes::from(out)
}

/// The style a layer writes with: [`Draft10`] with its `RateLimit-Policy`
/// value made once for the layer's quota ([`PolicyValue`]), any other
/// style as it is.
pub(crate) enum LayerStyle {
    Draft10(PolicyValue),
    Other(Box<dyn HeaderStyle>),
}

impl LayerStyle {
    /// `style`, told apart by type: `(Draft10, LegacyHeaders)` is `Other`.
    pub(crate) fn new<S: HeaderStyle>(style: S) -> LayerStyle {
        if TypeId::of::<S>() == TypeId::of::<Draft10>() {
            LayerStyle::Draft10(PolicyValue::default())
        } else {
            LayerStyle::Other(Box::new(style))
        }
    }

    /// Writes a refusal's `Retry-After` (the wait `info.reset`) and the
    /// headers of `info` (`remaining` 0). Draft-10's `RateLimit` value and
    /// `Retry-After` state the same seconds: one allocation holds both.
    pub(crate) fn write_refusal(&self, info: &RateLimitInfo<'_>, headers: &mut HeaderMap) {
        if let LayerStyle::Draft10(policy) = self
            && let Some((item, retry_after)) = refusal_values(info)
        {
            // SAFETY: as in `write`: the checked name, ASCII digits and
            // punctuation; `retry_after` is the item's digits.
            let (item, retry_after) = unsafe {
                (
                    HeaderValue::from_maybe_shared_unchecked(item),
                    HeaderValue::from_maybe_shared_unchecked(retry_after),
                )
            };
            headers.insert(http::header::RETRY_AFTER, retry_after);
            write_draft10(policy.get(info.name, &info.policy), Some(item), headers);
        } else {
            headers.insert(http::header::RETRY_AFTER, retry_after_value(info.reset));
            self.write(info, headers);
        }
    }

    /// Writes the headers of `info`, whose name is always the layer's.
    pub(crate) fn write(&self, info: &RateLimitInfo<'_>, headers: &mut HeaderMap) {
        match self {
            LayerStyle::Draft10(policy) => {
                // SAFETY: the layer's name passed `RateLimitBuilder::build`'s
                // check (visible ASCII or space, no '"' or '\\') or is
                // "default"; the rest is ASCII digits and `";r=`, `;t=`.
                let item = unsafe { HeaderValue::from_maybe_shared_unchecked(item_bytes(info)) };
                write_draft10(policy.get(info.name, &info.policy), Some(item), headers);
            }
            LayerStyle::Other(style) => style.write(info, headers),
        }
    }
}

/// The de-facto `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
/// `X-RateLimit-Reset` (seconds until more, rounded up).
#[derive(Debug, Clone, Copy, Default)]
pub struct LegacyHeaders;

impl HeaderStyle for LegacyHeaders {
    fn write(&self, info: &RateLimitInfo<'_>, headers: &mut HeaderMap) {
        headers.insert(X_LIMIT, info.policy.burst.into());
        headers.insert(X_REMAINING, info.remaining.into());
        headers.insert(X_RESET, ceil_secs(info.reset).into());
    }
}

/// Both [`Draft10`] and [`LegacyHeaders`].
impl<A: HeaderStyle, B: HeaderStyle> HeaderStyle for (A, B) {
    fn write(&self, info: &RateLimitInfo<'_>, headers: &mut HeaderMap) {
        self.0.write(info, headers);
        self.1.write(info, headers);
    }
}

/// No rate-limit headers (`Retry-After` on a 429 is still sent).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHeaders;

impl HeaderStyle for NoHeaders {
    fn write(&self, _info: &RateLimitInfo<'_>, _headers: &mut HeaderMap) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_up() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(2)), 2);
        assert_eq!(ceil_secs(Duration::from_millis(2001)), 3);
        assert_eq!(ceil_secs(Duration::MAX), u64::MAX);
        assert_eq!(retry_after_secs(Duration::MAX), u64::MAX);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(100)), 1);
        assert_eq!(retry_after_value(Duration::from_millis(1001)), "2");
        assert_eq!(retry_after_value(Duration::MAX), "18446744073709551615");
    }

    #[test]
    fn draft10_and_legacy_syntax() {
        let info = RateLimitInfo {
            name: "api",
            policy: Policy {
                burst: 10,
                interval: Duration::from_millis(250),
            },
            remaining: 4,
            reset: Duration::from_millis(300),
        };
        let mut h = HeaderMap::new();
        (Draft10, LegacyHeaders).write(&info, &mut h);
        // 4 per second, burst 10: 12 every 3 s, 10 at once.
        assert_eq!(h["ratelimit-policy"], "\"api\";q=12;w=3;limiter-burst=10");
        assert_eq!(h["ratelimit"], "\"api\";r=4;t=1");
        assert_eq!(h["x-ratelimit-limit"], "10");
        assert_eq!(h["x-ratelimit-remaining"], "4");
        assert_eq!(h["x-ratelimit-reset"], "1");
    }

    #[test]
    fn a_layer_writes_what_its_style_writes() {
        let long = "n".repeat(200);
        let mut info = RateLimitInfo {
            name: "a",
            policy: Policy {
                burst: 5,
                interval: Duration::from_millis(200),
            },
            remaining: 0,
            reset: Duration::from_millis(200),
        };
        let draft10 = LayerStyle::new(Draft10);
        let both = LayerStyle::new((Draft10, LegacyHeaders));
        assert!(matches!(draft10, LayerStyle::Draft10(_)));
        assert!(matches!(both, LayerStyle::Other(_)));
        let written = |style: &dyn Fn(&RateLimitInfo<'_>, &mut HeaderMap),
                       info: &RateLimitInfo<'_>| {
            let mut h = HeaderMap::new();
            style(info, &mut h);
            h
        };
        let steps: [&dyn Fn(&mut RateLimitInfo<'_>); 4] = [
            &|_| {},
            &|i| i.reset = Duration::from_millis(1200),
            &|i| i.remaining = u32::MAX,
            &|i| i.policy.burst = 6,
        ];
        for step in steps {
            step(&mut info);
            let expected = written(&|i, h| Draft10.write(i, h), &info);
            assert_eq!(written(&|i, h| draft10.write(i, h), &info), expected);
            let mut h = written(&|i, h| both.write(i, h), &info);
            assert_eq!(
                h.remove("x-ratelimit-remaining"),
                Some(info.remaining.into())
            );
            h.remove("x-ratelimit-limit");
            h.remove("x-ratelimit-reset");
            assert_eq!(h, expected);
        }
        assert_eq!(
            written(&|i, h| draft10.write(i, h), &info)["ratelimit"],
            "\"a\";r=4294967295;t=2"
        );
        // A name longer than any buffer of the writer's.
        let info = RateLimitInfo {
            name: &long,
            ..info
        };
        let h = written(&|i, h| Draft10.write(i, h), &info);
        assert_eq!(h["ratelimit"], format!("\"{long}\";r=4294967295;t=2"));
        assert_eq!(
            h["ratelimit-policy"],
            format!("\"{long}\";q=10;w=2;limiter-burst=6")
        );
    }
}
