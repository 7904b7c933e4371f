//! The Lua script (`gcra.lua`) and its reply, in Rust types.
//!
//! Every script is sent with `EVALSHA`; when the server answers `NOSCRIPT`
//! (after a restart, a failover to a replica that never saw it, or a
//! `SCRIPT FLUSH`) the same call is sent once more as `EVAL` with the whole
//! source ([`Lua::eval`]). Both are safe: `NOSCRIPT` means nothing ran, and
//! `EVAL` cannot answer `NOSCRIPT`, so losing the script cache never reaches
//! a caller, however often it is flushed (redis-rs' own `Script` loads the
//! script and retries `EVALSHA` once, which a second flush in between turns
//! into an error). `EVAL` also caches the script, so the next call's
//! `EVALSHA` finds it again.
//!
//! Arguments and reply are integers; times are microseconds. The script's
//! header lists them; [`Op`] and [`Reply`] mirror it.

use redis::aio::ConnectionLike;

use crate::error::RedisLimitError;
use crate::time::ScriptQuota;

/// A Lua script with its SHA1, sent by hash and by source on `NOSCRIPT`.
#[derive(Debug, Clone)]
pub(crate) struct Lua {
    source: &'static str,
    hash: String,
}

impl Lua {
    pub(crate) fn new(source: &'static str) -> Lua {
        Lua {
            source,
            hash: redis::Script::new(source).get_hash().to_owned(),
        }
    }

    /// Runs the script on `keys` with `args`: `EVALSHA`, then `EVAL` if the
    /// server does not have it.
    pub(crate) async fn eval<C: ConnectionLike>(
        &self,
        conn: &mut C,
        keys: &[&str],
        args: &[String],
    ) -> Result<Vec<i64>, RedisLimitError> {
        let call = |verb: &str, body: &str| {
            let mut cmd = redis::cmd(verb);
            cmd.arg(body).arg(keys.len()).arg(keys).arg(args);
            cmd
        };
        match call("EVALSHA", &self.hash).query_async(conn).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                Ok(call("EVAL", self.source).query_async(conn).await?)
            }
            other => Ok(other?),
        }
    }
}

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
    pub(crate) script: &'a Lua,
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

    /// Runs the script (`EVALSHA`, `EVAL` on `NOSCRIPT`).
    pub(crate) async fn run<C: ConnectionLike>(
        &self,
        conn: &mut C,
    ) -> Result<Reply, RedisLimitError> {
        let (op, arg) = match self.op {
            Op::Reserve { max_wait } => ("r", max_wait.min(Self::MAX_WAIT_MICROS)),
            Op::Lease { max } => ("l", u64::from(max.max(self.n))),
            Op::Peek => ("p", 0),
        };
        let now = self.now.map(|n| n.to_string()).unwrap_or_default();
        let args = [
            op.to_owned(),
            self.quota.t.to_string(),
            self.quota.burst.to_string(),
            self.n.to_string(),
            arg.to_string(),
            self.margin_ms.to_string(),
            now,
        ];
        let values = self.script.eval(conn, &[self.key], &args).await?;
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
