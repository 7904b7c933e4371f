//! `token_bucket` and `leaky_bucket`: GCRA at `rate` with `burst` (default
//! 1); a leaky bucket holds requests (delay mode) by default, a token bucket
//! refuses them. Both can be keyed per client and run on Redis; a reload
//! moves their whole quota with `set_quota`.

use super::{Algorithm, Definition, Reader};

/// `token_bucket`.
pub(crate) const TOKEN_BUCKET: Definition = Definition {
    name: "token_bucket",
    fields: &["rate", "burst"],
    parse: token_bucket,
    delay_by_default: false,
    keyed: true,
    redis: true,
    calendar: true,
    not_taken: &[],
};

/// `leaky_bucket`.
pub(crate) const LEAKY_BUCKET: Definition = Definition {
    name: "leaky_bucket",
    fields: &["rate", "burst"],
    parse: leaky_bucket,
    delay_by_default: true,
    keyed: true,
    redis: true,
    calendar: true,
    not_taken: &[],
};

fn token_bucket(r: &mut dyn Reader) -> Option<Algorithm> {
    let (rate, quota) = r.quota()?;
    Some(Algorithm::TokenBucket { rate, quota })
}

fn leaky_bucket(r: &mut dyn Reader) -> Option<Algorithm> {
    let (rate, quota) = r.quota()?;
    Some(Algorithm::LeakyBucket { rate, quota })
}
