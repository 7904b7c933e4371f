//! `RateLimit-Policy`: the draft-10 numbers of a [`Policy`] ([`PolicyItem`])
//! and the header value that states them.
//!
//! The value depends on the layer's name and the policy alone, so a layer
//! writing [`Draft10`](super::Draft10) makes it once ([`PolicyValue`]) and
//! its responses share it: writing it for each response costs about 5 % of
//! a hello-world request's instructions (docs/benchmarks.md).

use std::sync::OnceLock;

use http::HeaderValue;
use limiter_core::Policy;

/// The draft-10 statement of a policy: `q` permits every `w` seconds, at
/// most `burst` at once (`None`: `q` at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PolicyItem {
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
    fn of(policy: &Policy) -> PolicyItem {
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
pub(crate) fn policy_value(name: &str, policy: &Policy) -> Option<HeaderValue> {
    let item = PolicyItem::of(policy);
    let (mut q, mut w, mut burst) = (
        itoa::Buffer::new(),
        itoa::Buffer::new(),
        itoa::Buffer::new(),
    );
    let (q, w) = (q.format(item.q), w.format(item.w));
    let burst = item.burst.map(|b| burst.format(b));
    // The exact size, so that `Bytes` takes the allocation as it is.
    let len = name.len() + 8 + q.len() + w.len() + burst.map_or(0, |b| 15 + b.len());
    let mut out = Vec::with_capacity(len);
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\";q=");
    out.extend_from_slice(q.as_bytes());
    out.extend_from_slice(b";w=");
    out.extend_from_slice(w.as_bytes());
    if let Some(burst) = burst {
        out.extend_from_slice(b";limiter-burst=");
        out.extend_from_slice(burst.as_bytes());
    }
    // The name was checked to be a valid sf-string when the layer was
    // built, so the value is visible ASCII.
    HeaderValue::from_maybe_shared(bytes::Bytes::from(out)).ok()
}

/// One layer's `RateLimit-Policy` value: made for the first policy the
/// layer states (its quota) and shared by every response under it. A
/// response under another policy (a key with a quota of its own, a quota
/// changed later) gets a value of its own.
#[derive(Debug, Default)]
pub(crate) struct PolicyValue {
    first: OnceLock<(Policy, Option<HeaderValue>)>,
}

impl PolicyValue {
    /// The value of `policy` under `name` (the layer's name, the same on
    /// every call).
    pub(crate) fn get(&self, name: &str, policy: &Policy) -> Option<HeaderValue> {
        let (first, value) = self
            .first
            .get_or_init(|| (*policy, policy_value(name, policy)));
        if first == policy {
            value.clone()
        } else {
            policy_value(name, policy)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

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

    #[test]
    fn a_layers_value_is_made_once_for_its_first_policy() {
        let value = PolicyValue::default();
        let quota = Policy {
            burst: 5,
            interval: Duration::from_millis(200),
        };
        let first = value.get("a", &quota).unwrap();
        assert_eq!(first, "\"a\";q=5;w=1");
        let shared = |v: HeaderValue| v.as_bytes().as_ptr() == first.as_bytes().as_ptr();
        assert!(
            shared(value.get("a", &quota).unwrap()),
            "shared, not made again"
        );
        // Other policies: their own values, and the first stays shared.
        let other = Policy { burst: 6, ..quota };
        assert_eq!(
            value.get("a", &other).unwrap(),
            "\"a\";q=10;w=2;limiter-burst=6"
        );
        let other = Policy {
            interval: Duration::from_nanos(1_000_000_000 / 6),
            ..other
        };
        assert_eq!(value.get("a", &other).unwrap(), "\"a\";q=6;w=1");
        assert!(shared(value.get("a", &quota).unwrap()));
    }
}
