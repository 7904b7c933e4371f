//! Where a user key's state lives: [`RedisLimiter::redis_key`] and the
//! hash-tag rule that places keys on Redis Cluster slots.
//!
//! Invariants: a key without a hash tag is stored at `{prefix:key}` (its
//! own slot, from `prefix:key`); a key with a non-empty hash tag (Redis'
//! rule: the first `{`, the first `}` after it, at least one byte between)
//! is stored at `prefix:key`, so the cluster places it by its tag, and keys
//! that share a tag share a slot (what a multi-key decision needs). The
//! prefix never holds a brace (checked at `build()`), so it never changes
//! which tag Redis finds.

use crate::limiter::RedisLimiter;

impl RedisLimiter {
    /// The Redis key that holds `key`'s state: `{prefix:key}`. The braces are
    /// a Redis Cluster hash tag: the whole name is hashed, and any key the
    /// limiter may add for the same user key later lands on the same slot.
    ///
    /// A `key` that carries its own hash tag (a non-empty `{tag}`, as Redis
    /// defines it: the first `{` and the first `}` after it) is stored as
    /// `prefix:key` instead, so the cluster places it by `tag`: keys that
    /// must meet in one multi-key decision
    /// ([`try_acquire_all`](RedisLimiter::try_acquire_all)) share a tag,
    /// for example `{acct:7}:user:42` and `{acct:7}:global`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limiter_core::Quota;
    /// use limiter_redis::RedisLimiter;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// # let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, Default::default())?;
    /// let limiter = RedisLimiter::builder(conn, Quota::per_second(5)?)
    ///     .key_prefix("login")
    ///     .build()?;
    /// assert_eq!(limiter.redis_key("10.0.0.7"), "{login:10.0.0.7}");
    /// assert_eq!(limiter.redis_key("{acct:7}:user:42"), "login:{acct:7}:user:42");
    /// assert_eq!(limiter.redis_key("{}x"), "{login:{}x}"); // an empty tag is no tag
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> String {
        if has_hash_tag(key) {
            format!("{}:{}", self.inner.prefix, key)
        } else {
            format!("{{{}:{}}}", self.inner.prefix, key)
        }
    }
}

/// Whether `key` has a Redis Cluster hash tag: a `{` followed later by a `}`
/// with at least one byte between them.
fn has_hash_tag(key: &str) -> bool {
    key.find('{')
        .and_then(|open| key[open + 1..].find('}'))
        .is_some_and(|len| len > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_tag_is_a_nonempty_brace_pair() {
        for (key, tagged) in [
            ("user:42", false),
            ("{t}x", true),
            ("a:{t7}:b", true),
            ("{}x", false),
            ("x{", false),
            ("}{t}", true),
            ("{}{t}", false), // Redis takes the first `{` and the first `}` after it
        ] {
            assert_eq!(has_hash_tag(key), tagged, "{key}");
        }
    }
}
