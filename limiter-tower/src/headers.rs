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

use std::time::Duration;

use http::header::HeaderName;
use http::{HeaderMap, HeaderValue};

const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

use limiter_core::Policy;

use crate::decimal::Decimal;
use crate::last::Last;

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

/// The `Retry-After` value of a wait ([`retry_after_secs`]).
///
/// The refusals of a second mostly state the same number, so each thread
/// keeps the last value it made and clones it (a reference count) while
/// the number matches; another number is written anew (one allocation).
pub(crate) fn retry_after_value(wait: Duration) -> HeaderValue {
    let secs = retry_after_secs(wait);
    LAST_RETRY_AFTER.with_borrow_mut(|last| {
        last.get(secs, || {
            // Decimal digits are a valid header value, moved whole into
            // the one allocation the kept copy shares; http's own
            // formatter stands in should that ever fail.
            HeaderValue::from_maybe_shared(bytes::Bytes::from_owner(Decimal::new(secs)))
                .unwrap_or_else(|_| HeaderValue::from(secs))
        })
    })
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
        let reset = ceil_secs(info.reset);
        let (policy, item) = LAST_WRITTEN.with_borrow_mut(|last| {
            last.of(info.name);
            let policy = last
                .policy
                .get(info.policy, || policy_value(info.name, &info.policy));
            let item = last.item.get((info.remaining, reset), || {
                item_value(info.name, info.remaining.into(), reset)
            });
            (policy, item)
        });
        if let (Some(policy), Some(item)) = (policy, item) {
            headers.insert(RATELIMIT_POLICY, policy);
            headers.insert(RATELIMIT, item);
        }
    }
}

/// The header values this thread last wrote for one limit (see
/// [`Last`]), written anew when the limit's name or the numbers they
/// state change.
///
/// They repeat on most responses: the policy changes only with the quota,
/// a key far from its limit is answered the same `r` (its burst less the
/// request) and `t` on every request, and every refusal of a second
/// states `r=0` and the same `t`. A limit whose `r` moves on every request
/// writes each value anew (one allocation, as without the cache).
struct LastWritten {
    /// The limit's name (a buffer reused when the name changes).
    name: String,
    /// The `RateLimit-Policy` value of a policy.
    policy: Last<Policy, Option<HeaderValue>>,
    /// The `RateLimit` value of an `r` and a `t`.
    item: Last<(u32, u64), Option<HeaderValue>>,
}

impl LastWritten {
    /// Keeps the values when they are `name`'s, else forgets them.
    fn of(&mut self, name: &str) {
        if self.name != name {
            self.name.clear();
            self.name.push_str(name);
            self.policy.clear();
            self.item.clear();
        }
    }
}

/// The `RateLimit` value `"name";r=remaining;t=reset`.
///
/// Written by hand rather than through `format!`: the formatting machinery
/// was most of its cost. The value is assembled on the stack (each piece a
/// direct copy, no dynamic dispatch) and moved into the one allocation
/// that its `HeaderValue` and every clone of it share.
fn item_value(name: &str, remaining: u64, reset: u64) -> Option<HeaderValue> {
    let mut stack = StackValue::new();
    write_item(&mut stack, name, remaining, reset);
    // The name was checked to be a valid sf-string when the layer was
    // built, so the value is visible ASCII.
    if stack.bytes().is_some() {
        HeaderValue::from_maybe_shared(bytes::Bytes::from_owner(stack)).ok()
    } else {
        let mut long = Vec::new();
        write_item(&mut long, name, remaining, reset);
        HeaderValue::from_maybe_shared(bytes::Bytes::from(long)).ok()
    }
}

/// Writes the `RateLimit` item `"name";r=remaining;t=reset` into `out`.
fn write_item(out: &mut impl Sink, name: &str, remaining: u64, reset: u64) {
    out.put(b"\"");
    out.put(name.as_bytes());
    out.put(b"\";r=");
    push_decimal(out, remaining);
    out.put(b";t=");
    push_decimal(out, reset);
}

/// The draft-10 statement of a policy: `q` permits every `w` seconds, at
/// most `burst` at once (`None`: `q` at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PolicyItem {
    pub(crate) q: u64,
    pub(crate) w: u64,
    pub(crate) burst: Option<u32>,
}

/// The most a stated rate may fall short of the real one: 1/1000.
const LOSS_DENOMINATOR: u128 = 1_000;

impl PolicyItem {
    /// The item of `policy` (see the module docs): the shortest whole `w`
    /// of at least the refill time whose `q = ⌊w/t⌋` is exact or within
    /// 0.1 % of the rate.
    pub(crate) fn of(policy: &Policy) -> PolicyItem {
        const NANOS: u128 = 1_000_000_000;
        let burst = policy.burst;
        // The emission interval, in nanoseconds (at least 1).
        let t = policy.interval.as_nanos().max(1);
        if burst == 0 {
            let w = u64::try_from(t.div_ceil(NANOS)).unwrap_or(u64::MAX);
            return PolicyItem {
                q: 0,
                w: w.max(1),
                burst: None,
            };
        }
        let refill = (t * u128::from(burst)).div_ceil(NANOS).max(1);
        let loss_ok = |w: u128| (w * NANOS % t) * LOSS_DENOMINATOR <= w * NANOS;
        let w = if loss_ok(refill) {
            refill
        } else {
            // The smallest multiple of the exact window (w·10⁹ divisible by
            // t) not below the refill time, or the first window holding
            // 1000 emissions (a loss below 1/1000): whichever is shorter.
            let exact = t / gcd(t, NANOS);
            let exact = refill.div_ceil(exact) * exact;
            let thousand = (LOSS_DENOMINATOR * t).div_ceil(NANOS);
            exact.min(thousand.max(refill))
        };
        let q = w * NANOS / t;
        let to_u64 = |n: u128| u64::try_from(n).unwrap_or(u64::MAX);
        PolicyItem {
            q: to_u64(q),
            w: to_u64(w),
            burst: (q > u128::from(burst)).then_some(burst),
        }
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The `RateLimit-Policy` value of `policy` under `name`.
fn policy_value(name: &str, policy: &Policy) -> Option<HeaderValue> {
    let item = PolicyItem::of(policy);
    let mut out = Vec::with_capacity(name.len() + 48);
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\";q=");
    push_decimal(&mut out, item.q);
    out.extend_from_slice(b";w=");
    push_decimal(&mut out, item.w);
    if let Some(burst) = item.burst {
        out.extend_from_slice(b";limiter-burst=");
        push_decimal(&mut out, burst.into());
    }
    // The name was checked to be a valid sf-string when the layer was
    // built, so the value is visible ASCII.
    HeaderValue::from_maybe_shared(bytes::Bytes::from(out)).ok()
}

thread_local! {
    /// The header values this thread last wrote for a limit.
    static LAST_WRITTEN: std::cell::RefCell<LastWritten> =
        const {
            std::cell::RefCell::new(LastWritten {
                name: String::new(),
                policy: Last::new(),
                item: Last::new(),
            })
        };
    /// The last `Retry-After` value this thread made, with its number.
    static LAST_RETRY_AFTER: std::cell::RefCell<Last<u64, HeaderValue>> =
        const { std::cell::RefCell::new(Last::new()) };
}

/// Where a header value is written.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A header value on the stack: a quoted name of up to 64 bytes and two
/// parameters with 20-digit numbers fit; a longer one overflows (`None`
/// from [`bytes`](StackValue::bytes)) and is written again into a `Vec`.
/// A value that fits is moved whole into its `Bytes` (the owner of the
/// allocation its clones share).
struct StackValue {
    buf: [u8; 128],
    len: usize,
    overflow: bool,
}

impl StackValue {
    fn new() -> StackValue {
        StackValue {
            buf: [0; 128],
            len: 0,
            overflow: false,
        }
    }

    fn bytes(&self) -> Option<&[u8]> {
        (!self.overflow).then(|| &self.buf[..self.len])
    }
}

/// The bytes written (all of them unless it overflowed).
impl AsRef<[u8]> for StackValue {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Sink for StackValue {
    fn put(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.len..self.len + bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len += bytes.len();
            }
            None => self.overflow = true,
        }
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut (impl Sink + ?Sized), n: u64) {
    out.put(Decimal::new(n).as_bytes());
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
    fn a_cached_policy_is_rewritten_when_name_or_policy_change() {
        let mut info = RateLimitInfo {
            name: "a",
            policy: Policy {
                burst: 5,
                interval: Duration::from_millis(200),
            },
            remaining: 4,
            reset: Duration::ZERO,
        };
        let written = |info: &RateLimitInfo<'_>| draft10_header(info, "ratelimit-policy");
        assert_eq!(written(&info), "\"a\";q=5;w=1");
        assert_eq!(written(&info), "\"a\";q=5;w=1");
        info.name = "b";
        assert_eq!(written(&info), "\"b\";q=5;w=1");
        info.policy.burst = 6;
        // 5/s, burst 6: 10 every 2 s.
        assert_eq!(written(&info), "\"b\";q=10;w=2;limiter-burst=6");
        info.policy.interval = Duration::from_nanos(1_000_000_000 / 6);
        assert_eq!(written(&info), "\"b\";q=6;w=1");
    }

    /// The value of `name` in the headers `Draft10` writes for `info`.
    fn draft10_header(info: &RateLimitInfo<'_>, name: &str) -> String {
        let mut h = HeaderMap::new();
        Draft10.write(info, &mut h);
        h[name].to_str().unwrap().to_owned()
    }

    #[test]
    fn retry_after_values_follow_the_wait_through_the_thread_cache() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // Repeats (kept), changes (written anew), and back.
        let waits = [
            (ms(1), "1"),
            (Duration::ZERO, "1"),
            (s(1), "1"),
            (ms(1001), "2"),
            (ms(1001), "2"),
            (s(3600), "3600"),
            (ms(1), "1"),
            (Duration::MAX, "18446744073709551615"),
        ];
        for (wait, value) in waits {
            assert_eq!(retry_after_value(wait), value, "{wait:?}");
        }
    }

    #[test]
    fn a_cached_item_is_rewritten_when_name_remaining_or_reset_change() {
        let mut info = RateLimitInfo {
            name: "a",
            policy: Policy {
                burst: 5,
                interval: Duration::from_millis(200),
            },
            remaining: 0,
            reset: Duration::from_millis(200),
        };
        let written = |info: &RateLimitInfo<'_>| draft10_header(info, "ratelimit");
        assert_eq!(written(&info), "\"a\";r=0;t=1");
        assert_eq!(written(&info), "\"a\";r=0;t=1");
        info.name = "b";
        assert_eq!(written(&info), "\"b\";r=0;t=1");
        info.reset = Duration::from_millis(1200);
        assert_eq!(written(&info), "\"b\";r=0;t=2");
        info.remaining = 3;
        assert_eq!(written(&info), "\"b\";r=3;t=2");
        assert_eq!(written(&info), "\"b\";r=3;t=2");
        info.remaining = 0;
        assert_eq!(written(&info), "\"b\";r=0;t=2");
        info.name = "a";
        assert_eq!(written(&info), "\"a\";r=0;t=2");
        // A name that is a prefix of the last one is another name.
        info.name = "";
        assert_eq!(written(&info), "\"\";r=0;t=2");
        // A name too long for the stack.
        let long = "n".repeat(200);
        info.name = &long;
        assert_eq!(written(&info), format!("\"{long}\";r=0;t=2"));
        assert_eq!(written(&info), format!("\"{long}\";r=0;t=2"));
    }

    #[test]
    fn a_repeated_value_is_the_cached_one_and_a_new_one_is_written_anew() {
        let info = RateLimitInfo {
            name: "shared",
            policy: Policy {
                burst: 5,
                interval: Duration::from_millis(200),
            },
            remaining: 4,
            reset: Duration::from_millis(200),
        };
        let headers = |info: &RateLimitInfo<'_>| {
            let mut h = HeaderMap::new();
            Draft10.write(info, &mut h);
            h
        };
        let (first, second) = (headers(&info), headers(&info));
        // The same bytes, not a copy: the second response cloned the first's.
        for name in ["ratelimit", "ratelimit-policy"] {
            assert_eq!(
                first[name].as_bytes().as_ptr(),
                second[name].as_bytes().as_ptr(),
                "{name}"
            );
        }
        let third = headers(&RateLimitInfo {
            remaining: 3,
            ..info.clone()
        });
        assert_eq!(third["ratelimit"], "\"shared\";r=3;t=1");
        assert_ne!(
            first["ratelimit"].as_bytes().as_ptr(),
            third["ratelimit"].as_bytes().as_ptr()
        );
        assert_eq!(
            first["ratelimit-policy"].as_bytes().as_ptr(),
            third["ratelimit-policy"].as_bytes().as_ptr()
        );
    }

    /// The item of `burst` permits refilling in `window`.
    fn item(burst: u32, window: Duration) -> PolicyItem {
        let interval = window / burst.max(1);
        PolicyItem::of(&Policy { burst, interval })
    }

    #[test]
    fn policy_items_state_rate_and_burst() {
        let ms = Duration::from_millis;
        let (q, w) = (|i: PolicyItem| i.q, |i: PolicyItem| i.w);
        // 800/s, burst 1; 1000/s, burst 20: the whole rate, and the burst.
        let i = item(1, Duration::from_micros(1250));
        assert_eq!((q(i), w(i), i.burst), (800, 1, Some(1)));
        let i = item(20, ms(20));
        assert_eq!((q(i), w(i), i.burst), (1000, 1, Some(20)));
        // A refill of whole seconds: the burst over it, exact, no parameter.
        let i = item(2, Duration::from_secs(20));
        assert_eq!((q(i), w(i), i.burst), (2, 20, None));
        // 2.5/s, burst 1: one second would state 2/s; two state it exactly.
        let i = item(1, ms(400));
        assert_eq!((q(i), w(i), i.burst), (5, 2, Some(1)));
        // One per 1.7 s: exact over 17 s.
        let i = item(1, ms(1700));
        assert_eq!((q(i), w(i), i.burst), (10, 17, Some(1)));
        // Within 0.1 % at once: one second.
        let i = item(1, Duration::from_nanos(999_999_937));
        assert_eq!((q(i), w(i), i.burst), (1, 1, None));
        // No exact window soon (t coprime to 10⁹): the first window that
        // holds 1000 emissions.
        let i = item(1, Duration::from_nanos(500_000_001));
        assert_eq!((q(i), w(i), i.burst), (1001, 501, Some(1)));
        // Nothing allowed.
        assert_eq!((q(item(0, ms(1500))), w(item(0, ms(1500)))), (0, 2));
    }

    #[test]
    fn a_policy_item_never_overstates_and_loses_at_most_a_thousandth() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let t = 1 + next() % 5_000_000_000;
            let burst = 1 + (next() % 5_000) as u32;
            let window = Duration::from_nanos(t * u64::from(burst));
            let i = item(burst, window);
            let (q, w) = (u128::from(i.q), u128::from(i.w) * 1_000_000_000);
            let t = u128::from(t);
            assert!(q * t <= w, "{i:?} overstates t={t}");
            assert!(
                (w - q * t) * 1000 <= w,
                "{i:?} loses more than 0.1 % at t={t}"
            );
            assert!(q >= u128::from(burst) && w >= t * u128::from(burst));
            assert_eq!(i.burst.is_some(), q > u128::from(burst));
        }
    }
}
