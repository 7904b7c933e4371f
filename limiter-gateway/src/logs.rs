//! The gateway's log lines: every event one line (text, or one JSON object
//! with `--log-format json` / `[log] format = "json"`), the rejection log,
//! and the optional access log.
//!
//! The **rejection log** writes one `WARN` line when a rule starts
//! rejecting after at least [`RejectionLog::QUIET`] without a rejection:
//! it names the rule (from its `RateLimit-Policy`) and carries
//! `previous_burst`, how many requests that same rule rejected in its
//! previous burst. It takes no lock on the request path: each rule has two
//! atomics, found through an `ArcSwap`ed map that only a rule seen for the
//! first time copies. Two rejections racing at a burst's edge may count in
//! either burst.
//!
//! The **access log** (`[log] access = true`, `--access-log`) writes one
//! `INFO` line per request under the target `access`: peer, method, path
//! as forwarded, status, rule (for a rejection), milliseconds to the
//! response head.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use http::HeaderMap;

use crate::config::LogConfig;

/// Installs the process's log subscriber: `RUST_LOG` (default `info`),
/// text or JSON lines on stderr, colours only on a terminal.
pub fn init_logging(config: &LogConfig) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if config.json {
        builder.json().flatten_event(true).init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

/// The rule a rejection names: its `RateLimit-Policy` key.
pub(crate) fn rule_of(headers: &HeaderMap) -> Option<&str> {
    let policy = headers.get("ratelimit-policy")?.to_str().ok()?;
    let name = policy.strip_prefix('"')?;
    name.split('"').next()
}

#[derive(Debug, Default)]
struct Burst {
    /// Nanoseconds since the log's start of the last rejection, plus one
    /// (0: none yet).
    last: AtomicU64,
    count: AtomicU64,
}

/// One line per burst of rejections, per rule (module doc).
#[derive(Debug)]
pub(crate) struct RejectionLog {
    start: Instant,
    rules: ArcSwap<HashMap<String, Arc<Burst>>>,
}

impl Default for RejectionLog {
    fn default() -> Self {
        RejectionLog {
            start: Instant::now(),
            rules: ArcSwap::from_pointee(HashMap::new()),
        }
    }
}

impl RejectionLog {
    pub(crate) const QUIET: Duration = Duration::from_secs(1);

    fn burst(&self, rule: &str) -> Arc<Burst> {
        if let Some(b) = self.rules.load().get(rule) {
            return Arc::clone(b);
        }
        // A rule rejecting for the first time: copy the map once.
        let mut found = None;
        self.rules.rcu(|map| {
            let mut map = HashMap::clone(map);
            let b = map.entry(rule.to_owned()).or_default();
            found = Some(Arc::clone(b));
            map
        });
        found.unwrap_or_default()
    }

    /// Notes a rejection by `rule` of a request for `path`.
    pub(crate) fn rejected(&self, rule: &str, path: &str) {
        let burst = self.burst(rule);
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX) | 1;
        // AcqRel: of racing rejections exactly one sees the quiet gap (the
        // swap is one read-modify-write); the counts need no other memory.
        let last = burst.last.swap(now, Ordering::AcqRel);
        let quiet = u64::try_from(Self::QUIET.as_nanos()).unwrap_or(u64::MAX);
        if last == 0 || now.saturating_sub(last) >= quiet {
            // Relaxed: a statistic (module doc: edges may count either way).
            let previous = burst.count.swap(1, Ordering::Relaxed);
            tracing::warn!(
                rule,
                path,
                previous_burst = previous,
                "rate limit: rule rejecting requests (one line per burst)"
            );
        } else {
            // Relaxed: as above.
            burst.count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_key_names_the_rule() {
        let mut h = HeaderMap::new();
        h.insert("ratelimit-policy", "\"pay\";q=200;w=2".parse().unwrap());
        assert_eq!(rule_of(&h), Some("pay"));
        assert_eq!(rule_of(&HeaderMap::new()), None);
    }

    #[test]
    fn each_rule_counts_its_own_burst() {
        let log = RejectionLog::default();
        for _ in 0..3 {
            log.rejected("a", "/a");
        }
        log.rejected("b", "/b");
        let count = |r: &str| log.rules.load()[r].count.load(Ordering::Relaxed);
        assert_eq!((count("a"), count("b")), (3, 1));
    }
}
