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
//! `q` is the burst and `w` the time an emptied limit takes to fill
//! (`burst · t`), in whole seconds rounded up; `r` is the permits left and
//! `t` the whole seconds, rounded up, until there are more (0 when full).
//! On a rejection `r=0` and `t` is the wait rounded up, and `Retry-After`
//! is the same number (at least 1), so a client that obeys either header
//! retries no earlier than the request conforms.
//!
//! The draft is still moving: implement [`HeaderStyle`] for another syntax,
//! or pick [`LegacyHeaders`] (`X-RateLimit-*`) or [`NoHeaders`].

use std::time::Duration;

use http::header::HeaderName;
use http::{HeaderMap, HeaderValue};

const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

use crate::backend::Policy;

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

/// Whole seconds, rounded up: `ceil_secs(1 ms) == 1`, `ceil_secs(0) == 0`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use limiter_tower::{ceil_secs, retry_after_secs};
///
/// assert_eq!(ceil_secs(Duration::from_millis(1500)), 2);
/// assert_eq!(ceil_secs(Duration::ZERO), 0);
/// assert_eq!(retry_after_secs(Duration::from_millis(100)), 1); // never 0
/// ```
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// `Retry-After` for a wait: whole seconds rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    ceil_secs(wait).max(1)
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
/// let info = RateLimitInfo {
///     name: "api",
///     policy: Policy { limit: 20, window: Duration::from_secs(2) },
///     remaining: 7,
///     reset: Duration::from_millis(100),
/// };
/// let mut headers = HeaderMap::new();
/// Draft10.write(&info, &mut headers);
/// assert_eq!(headers["ratelimit-policy"], r#""api";q=20;w=2"#);
/// assert_eq!(headers["ratelimit"], r#""api";r=7;t=1"#);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Draft10;

impl HeaderStyle for Draft10 {
    fn write(&self, info: &RateLimitInfo<'_>, headers: &mut HeaderMap) {
        // Written by hand rather than through `format!`: this runs on every
        // response, and the formatting machinery was most of its cost.
        let item = |key: [u8; 2], a: u64, key_b: [u8; 2], b: u64| {
            let mut out = Vec::with_capacity(info.name.len() + 32);
            out.push(b'"');
            out.extend_from_slice(info.name.as_bytes());
            out.extend_from_slice(b"\";");
            out.extend_from_slice(&key);
            push_decimal(&mut out, a);
            out.push(b';');
            out.extend_from_slice(&key_b);
            push_decimal(&mut out, b);
            // The name was checked to be a valid sf-string when the layer
            // was built, so the value is visible ASCII.
            HeaderValue::from_maybe_shared(bytes::Bytes::from(out)).ok()
        };
        // The policy is the same on every response of a limit: each thread
        // keeps the last one it wrote and clones it (a reference count)
        // while name and policy match.
        let policy = LAST_POLICY.with_borrow_mut(|last| match last {
            Some((name, policy, value)) if *policy == info.policy && **name == *info.name => {
                Some(value.clone())
            }
            _ => {
                let window = ceil_secs(info.policy.window).max(1);
                let value = item(*b"q=", info.policy.limit.into(), *b"w=", window)?;
                *last = Some((info.name.into(), info.policy, value.clone()));
                Some(value)
            }
        });
        let limit = item(*b"r=", info.remaining.into(), *b"t=", ceil_secs(info.reset));
        if let (Some(p), Some(l)) = (policy, limit) {
            headers.insert(RATELIMIT_POLICY, p);
            headers.insert(RATELIMIT, l);
        }
    }
}

thread_local! {
    /// The last `RateLimit-Policy` value this thread wrote, with the limit
    /// name and policy it states.
    static LAST_POLICY: std::cell::RefCell<Option<(Box<str>, Policy, HeaderValue)>> =
        const { std::cell::RefCell::new(None) };
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        // n % 10 < 10: the cast keeps the digit.
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The de-facto `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
/// `X-RateLimit-Reset` (seconds until more, rounded up).
#[derive(Debug, Clone, Copy, Default)]
pub struct LegacyHeaders;

impl HeaderStyle for LegacyHeaders {
    fn write(&self, info: &RateLimitInfo<'_>, headers: &mut HeaderMap) {
        headers.insert(X_LIMIT, info.policy.limit.into());
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
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(100)), 1);
    }

    #[test]
    fn draft10_and_legacy_syntax() {
        let info = RateLimitInfo {
            name: "api",
            policy: Policy {
                limit: 10,
                window: Duration::from_millis(2500),
            },
            remaining: 4,
            reset: Duration::from_millis(300),
        };
        let mut h = HeaderMap::new();
        (Draft10, LegacyHeaders).write(&info, &mut h);
        assert_eq!(h["ratelimit-policy"], "\"api\";q=10;w=3");
        assert_eq!(h["ratelimit"], "\"api\";r=4;t=1");
        assert_eq!(h["x-ratelimit-limit"], "10");
        assert_eq!(h["x-ratelimit-remaining"], "4");
        assert_eq!(h["x-ratelimit-reset"], "1");
    }

    #[test]
    fn a_cached_policy_is_rewritten_when_name_or_policy_change() {
        let mut info = RateLimitInfo {
            name: "a",
            policy: Policy {
                limit: 5,
                window: Duration::from_secs(1),
            },
            remaining: 4,
            reset: Duration::ZERO,
        };
        let written = |info: &RateLimitInfo<'_>| {
            let mut h = HeaderMap::new();
            Draft10.write(info, &mut h);
            h["ratelimit-policy"].to_str().unwrap().to_owned()
        };
        assert_eq!(written(&info), "\"a\";q=5;w=1");
        assert_eq!(written(&info), "\"a\";q=5;w=1");
        info.name = "b";
        assert_eq!(written(&info), "\"b\";q=5;w=1");
        info.policy.limit = 6;
        assert_eq!(written(&info), "\"b\";q=6;w=1");
        info.policy.window = Duration::from_secs(2);
        assert_eq!(written(&info), "\"b\";q=6;w=2");
    }

    #[test]
    fn decimals_are_written_whole() {
        for n in [0, 7, 10, 99, 1_000, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
