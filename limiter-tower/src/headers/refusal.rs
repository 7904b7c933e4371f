//! A refusal's `RateLimit` value and `Retry-After`: draft-10 states the
//! wait in both, in the same whole seconds, so one allocation holds the
//! two values (`Bytes::from_owner` of inline bytes, the second value a
//! slice of the first).

use bytes::Bytes;

use super::{RateLimitInfo, ceil_secs};

/// A refusal's `RateLimit` value `"name";r=0;t=N` and its `N`, the
/// `Retry-After`, in one allocation; `None` when they differ (no wait:
/// `t=0`, `Retry-After: 1`) or the name is longer than a layer's.
pub(super) fn refusal_values(info: &RateLimitInfo<'_>) -> Option<(Bytes, Bytes)> {
    let secs = ceil_secs(info.reset);
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(secs).as_bytes();
    let parts: [&[u8]; 4] = [b"\"", info.name.as_bytes(), b"\";r=0;t=", digits];
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if secs == 0 || len > REFUSAL_CAPACITY {
        return None;
    }
    let mut item = RefusalItem([0; REFUSAL_CAPACITY], len);
    let mut at = 0;
    for part in parts {
        item.0[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    let item = Bytes::from_owner(item);
    let retry_after = item.slice(len - digits.len()..);
    Some((item, retry_after))
}

/// The bytes of [`refusal_values`] and their length, inline:
/// `Bytes::from_owner` boxes them once, and both values share that box.
struct RefusalItem([u8; REFUSAL_CAPACITY], usize);

/// A layer's name (at most 64 bytes), the punctuation and 20 digits.
const REFUSAL_CAPACITY: usize = 96;

impl AsRef<[u8]> for RefusalItem {
    fn as_ref(&self) -> &[u8] {
        &self.0[..self.1]
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderMap;
    use limiter_core::Policy;

    use super::super::{Draft10, LayerStyle, LegacyHeaders, RateLimitInfo, retry_after_value};

    #[test]
    fn a_refusal_writes_retry_after_and_the_styles_headers() {
        let long = "n".repeat(90);
        let policy = Policy {
            burst: 5,
            interval: Duration::from_millis(200),
        };
        let waits = [0, 1, 999_999_999, 1_000_000_001, u64::MAX].map(Duration::from_nanos);
        for (name, reset) in ["a", "default", long.as_str()].into_iter().flat_map(|n| {
            waits
                .into_iter()
                .chain([Duration::MAX])
                .map(move |w| (n, w))
        }) {
            let (remaining, wait) = (0, reset);
            let info = RateLimitInfo {
                name,
                policy,
                remaining,
                reset,
            };
            for style in [LayerStyle::new(Draft10), LayerStyle::new(LegacyHeaders)] {
                let mut expected = HeaderMap::new();
                expected.insert(http::header::RETRY_AFTER, retry_after_value(wait));
                style.write(&info, &mut expected);
                let mut h = HeaderMap::new();
                style.write_refusal(&info, &mut h);
                assert_eq!(h, expected, "{name} {wait:?}");
            }
        }
    }
}
