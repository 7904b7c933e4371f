//! Table pressure: one log line per interval for each keyed rule whose
//! table is full and forgetting clients that are still limited.
//!
//! A keyed rule (`per_ip`, or a `key:` other than global) holds at most
//! `max_keys` keys in `limiter-keyed`'s `KeyedLimiter`, which evicts when
//! full: a new client is never refused, the least recently seen limited
//! key is forgotten to make room (that client starts again with a full
//! burst). Each such eviction is counted by `KeyedLimiter::evictions()`, a
//! cumulative counter. [`report`] reads it for every keyed rule once per
//! interval and logs one `WARN` line per rule whose count grew since the
//! last reading: the rule, how many keys were evicted meanwhile, the keys
//! held and the cap. Nothing is done per request, so a table under
//! rotation by many clients costs one line per interval, whatever the
//! request rate.
//!
//! Readings are keyed by the rule's name and its limiter's identity: a
//! reload that keeps the rule keeps the limiter and its count; one that
//! replaces it starts a new count, read from 0.

use std::collections::HashMap;
use std::time::Duration;

use limiter_config::{RuleClock, RuleSet};
use tokio::sync::watch;

/// How often the tables are read (and so at most one line per rule).
pub(crate) const INTERVAL: Duration = Duration::from_secs(5);

/// The evictions of one keyed rule since the last reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pressure {
    pub(crate) rule: String,
    pub(crate) evicted: u64,
    pub(crate) keys: usize,
    pub(crate) max_keys: usize,
}

/// The last reading of each keyed rule's eviction counter.
#[derive(Debug, Default)]
pub(crate) struct TablePressure {
    /// By rule name: the limiter's address (its identity) and its count.
    seen: HashMap<String, (usize, u64)>,
}

impl TablePressure {
    /// Reads every keyed rule of the snapshot in force; returns the rules
    /// whose tables evicted limited keys since the last reading.
    pub(crate) fn read<C: RuleClock>(&mut self, rules: &RuleSet<C>) -> Vec<Pressure> {
        let snapshot = rules.snapshot();
        let mut seen = HashMap::new();
        let mut grew = Vec::new();
        for rule in snapshot.rules() {
            let Some(keyed) = rule.keyed() else {
                continue;
            };
            let id = std::ptr::from_ref(keyed) as usize;
            let count = keyed.evictions();
            let before = match self.seen.get(rule.name()) {
                Some(&(seen_id, n)) if seen_id == id => n,
                // New, or replaced by a reload: its own count from 0.
                _ => 0,
            };
            let evicted = count.wrapping_sub(before);
            if evicted > 0 {
                grew.push(Pressure {
                    rule: rule.name().to_owned(),
                    evicted,
                    keys: keyed.len(),
                    max_keys: keyed.max_keys(),
                });
            }
            seen.insert(rule.name().to_owned(), (id, count));
        }
        self.seen = seen;
        grew
    }
}

fn log(p: &Pressure) {
    tracing::warn!(
        rule = %p.rule,
        evicted = p.evicted,
        keys = p.keys,
        max_keys = p.max_keys,
        "keyed table full: limited clients forgotten to admit new ones (one line per 5 s; raise max_keys)"
    );
}

/// Reads the tables every `every` and logs each rule under pressure, one
/// line per rule per reading, until `stop` turns true.
pub(crate) async fn report<C: RuleClock>(
    rules: RuleSet<C>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut pressure = TablePressure::default();
    let mut tick = limiter_async::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => pressure.read(&rules).iter().for_each(log),
            _ = stop.wait_for(|s| *s) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use limiter_core::ManualClock;

    /// Log lines captured by a test's subscriber.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn pressure_lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .filter(|l| l.contains("keyed table full"))
                .map(str::to_owned)
                .collect()
        }
    }

    fn rule_set(clock: ManualClock, max_keys: usize) -> RuleSet<ManualClock> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        // Relaxed: a unique number, nothing published with it.
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("gateway-pressure-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rules.yaml");
        std::fs::write(
            &file,
            format!(
                "rate_limits:\n  per_client:\n    algorithm: token_bucket\n    rate: 1/h\n    burst: 1\n    per_ip: true\n    max_keys: {max_keys}\n    match: {{ prefix: \"/\" }}\n  global:\n    algorithm: token_bucket\n    rate: 10\n    burst: 10\n"
            ),
        )
        .unwrap();
        let rules = RuleSet::load_with_clock(&file, clock).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        rules
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_table_under_rotation_admits_every_client_and_logs_once_per_interval() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        let clock = ManualClock::new();
        let rules = rule_set(clock.clone(), 8);
        let (stop_tx, stop) = watch::channel(false);
        let task = tokio::spawn(report(rules.clone(), INTERVAL, stop));
        // The first reading (at 0 s) before any request; then requests at
        // 50 ms past each 100 ms, never at the instant of a reading.
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let rule = rules.get("per_client").unwrap();
        // 21 s of rotation, 25 new clients every 100 ms, each limited (1/h,
        // burst 1) after its one request: the table of 8 is always full of
        // limited keys, and every new client is admitted all the same.
        let mut client = 0u32;
        let mut per_tick = Vec::new();
        for step in 0..210u32 {
            for _ in 0..25 {
                client += 1;
                let key = format!(
                    "10.{}.{}.{}",
                    client >> 16,
                    (client >> 8) & 255,
                    client & 255
                );
                rule.try_acquire_key_n(&key, 1)
                    .await
                    .unwrap_or_else(|e| panic!("client {key} refused: {e}"));
            }
            clock.advance(Duration::from_millis(100));
            tokio::time::sleep(Duration::from_millis(100)).await;
            if step % 50 == 49 {
                per_tick.push(lines.pressure_lines().len());
            }
        }
        stop_tx.send_replace(true);
        task.await.unwrap();
        let keyed = rule.keyed().unwrap();
        assert_eq!(keyed.len(), 8);
        assert_eq!(keyed.evictions(), u64::from(client) - 8);
        // Readings at 0 s (nothing yet), 5, 10, 15, 20 s: one line each
        // from 5 s on, never one per request.
        let got = lines.pressure_lines();
        assert_eq!(got.len(), 4, "{got:#?}");
        assert_eq!(per_tick, [1, 2, 3, 4]);
        // The lines account for every eviction up to the last reading
        // (at 20 s: 200 steps of 25 clients, less the 8 kept).
        let evicted: u64 = got
            .iter()
            .map(|l| {
                let v = l.split("evicted=").nth(1).unwrap();
                v.split_whitespace().next().unwrap().parse::<u64>().unwrap()
            })
            .sum();
        assert_eq!(evicted, 200 * 25 - 8);
        assert!(
            got.iter()
                .all(|l| l.contains("rule=per_client") && l.contains("max_keys=8"))
        );
    }

    #[test]
    fn a_replaced_limiter_counts_from_zero_and_quiet_tables_say_nothing() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let clock = ManualClock::new();
        let rules = rule_set(clock.clone(), 2);
        let mut pressure = TablePressure::default();
        assert_eq!(pressure.read(&rules), []);
        let rule = rules.get("per_client").unwrap();
        rt.block_on(async {
            for key in ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"] {
                rule.try_acquire_key_n(key, 1).await.unwrap();
            }
        });
        assert_eq!(
            pressure.read(&rules),
            [Pressure {
                rule: "per_client".into(),
                evicted: 2,
                keys: 2,
                max_keys: 2
            }]
        );
        // Nothing new: no line.
        assert_eq!(pressure.read(&rules), []);
        // Another limiter under the same name (as a reload that replaces
        // the rule makes): read from its own 0, not from the old count.
        let other = rule_set(clock, 2);
        let rule = other.get("per_client").unwrap();
        rt.block_on(async {
            for key in ["10.0.0.5", "10.0.0.6", "10.0.0.7"] {
                rule.try_acquire_key_n(key, 1).await.unwrap();
            }
        });
        assert_eq!(pressure.read(&other)[0].evicted, 1);
    }
}
