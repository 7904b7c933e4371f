//! The Lua script (`gcra.lua`) and its reply, in Rust types.
//!
//! The script is sent with `EVALSHA` through [`redis::Script`], which loads
//! it and retries once when the server answers `NOSCRIPT` (after a restart
//! or `SCRIPT FLUSH`). That retry is safe: `NOSCRIPT` means nothing ran.
//!
//! Arguments and reply are integers; times are microseconds. The script's
//! header lists them; [`Op`] and [`Reply`] mirror it.

use redis::aio::ConnectionManager;

use crate::error::RedisLimitError;
use crate::time::ScriptQuota;

/// What the script is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Take `n` permits at a slot at most `max_wait` µs away (0 = a try).
    Reserve { max_wait: u64 },
    /// Take at least `n` and up to `max` permits available now.
    Lease { max: u32 },
    /// Report, write nothing.
    Peek,
}

/// The script's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) allowed: bool,
    /// Permits taken (`n`, or more for a lease; 0 when denied or peeking).
    pub(crate) granted: u32,
    /// Permits a try could take after this decision.
    pub(crate) remaining: u32,
    /// µs until a granted reservation's slot.
    pub(crate) wait: u64,
    /// µs until a denied request would conform.
    pub(crate) retry_after: u64,
    /// µs until the key is full again (`tat − now`).
    pub(crate) reset_after: u64,
}

impl Reply {
    fn parse(values: &[i64]) -> Result<Reply, RedisLimitError> {
        let bad = || RedisLimitError::UnexpectedReply(format!("{values:?}"));
        let &[allowed, granted, remaining, wait, retry_after, reset_after] = values else {
            return Err(bad());
        };
        let count = |v: i64| u32::try_from(v).map_err(|_| bad());
        let micros = |v: i64| u64::try_from(v).map_err(|_| bad());
        Ok(Reply {
            allowed: allowed == 1,
            granted: count(granted)?,
            remaining: count(remaining)?,
            wait: micros(wait)?,
            retry_after: micros(retry_after)?,
            reset_after: micros(reset_after)?,
        })
    }
}

/// One invocation of the script: the call the limiter wraps in its timeout.
pub(crate) struct Call<'a> {
    pub(crate) script: &'a redis::Script,
    pub(crate) key: &'a str,
    pub(crate) quota: ScriptQuota,
    pub(crate) op: Op,
    pub(crate) n: u32,
    pub(crate) margin_ms: u64,
    /// `now` in µs in client-clock mode; `None` to use Redis' `TIME`.
    pub(crate) now: Option<u64>,
}

impl Call<'_> {
    /// The script source, also shown in `docs/distributed.md`.
    pub(crate) const SOURCE: &'static str = include_str!("gcra.lua");

    /// The largest `max_wait` the script is given, in µs (2^50, about 35.7
    /// years): keeps `now + tau + t + max_wait` below 2^53 for every valid
    /// quota until the year 2112.
    pub(crate) const MAX_WAIT_MICROS: u64 = 1 << 50;

    /// Runs the script (`EVALSHA`, loading it on `NOSCRIPT`).
    pub(crate) async fn run(&self, conn: &mut ConnectionManager) -> Result<Reply, RedisLimitError> {
        let (op, arg) = match self.op {
            Op::Reserve { max_wait } => ("r", max_wait.min(Self::MAX_WAIT_MICROS)),
            Op::Lease { max } => ("l", u64::from(max.max(self.n))),
            Op::Peek => ("p", 0),
        };
        let now = self.now.map(|n| n.to_string()).unwrap_or_default();
        let values: Vec<i64> = self
            .script
            .key(self.key)
            .arg(op)
            .arg(self.quota.t)
            .arg(self.quota.burst)
            .arg(self.n)
            .arg(arg)
            .arg(self.margin_ms)
            .arg(now)
            .invoke_async(conn)
            .await?;
        Reply::parse(&values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_and_malformed_ones_are_errors() {
        assert_eq!(
            Reply::parse(&[1, 3, 2, 0, 0, 4_000]).unwrap(),
            Reply {
                allowed: true,
                granted: 3,
                remaining: 2,
                wait: 0,
                retry_after: 0,
                reset_after: 4_000
            }
        );
        assert!(matches!(
            Reply::parse(&[1, 2, 3]),
            Err(RedisLimitError::UnexpectedReply(_))
        ));
        assert!(matches!(
            Reply::parse(&[0, 0, -1, 0, 0, 0]),
            Err(RedisLimitError::UnexpectedReply(_))
        ));
    }

    #[test]
    fn the_script_writes_integers_only() {
        // tostring() of a large double prints 1.7e+15: every write must go
        // through string.format('%d').
        assert!(!Call::SOURCE.contains("tostring"));
        assert!(Call::SOURCE.contains("string.format('%d', new_tat)"));
    }
}
