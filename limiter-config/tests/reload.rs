//! Hot reload under a `ManualClock`: state kept through `set_quota`, a bad
//! edit changes nothing (and is counted), rules appear, disappear and are
//! replaced as documented, and readers never see a mixed rule set.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use limiter_config::{CONFIG_ERRORS, CONFIG_GENERATION, Problem, RuleLimiter, RuleSet};
use limiter_core::{AcquireError, ManualClock, Quota};
use limiter_keyed::KeyedError;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::TempDir;

fn token_bucket(name: &str, rate: &str, burst: u32) -> String {
    format!("  {name}:\n    algorithm: token_bucket\n    rate: \"{rate}\"\n    burst: {burst}\n")
}

fn file(rules: &[String]) -> String {
    format!("rate_limits:\n{}", rules.concat())
}

#[test]
fn a_drained_limiter_stays_drained_under_the_new_rate() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &file(&[token_bucket("api", "10/s", 5)]));
    let clock = ManualClock::new();
    let rules = RuleSet::load_with_clock(&path, clock.clone()).unwrap();
    let held = rules.get("api").unwrap(); // a handle taken before the reload
    let api = held.gcra().unwrap();
    api.try_acquire_n(5).unwrap();
    assert_eq!(api.available(), 0);

    dir.write("rules.yaml", &file(&[token_bucket("api", "1/s", 5)]));
    let report = rules.reload().unwrap();
    assert_eq!(report.generation, 2);
    assert_eq!(report.updated, ["api"]);
    let now = rules.get("api").unwrap();
    let api = now.gcra().unwrap();
    assert_eq!(
        api.quota(),
        Quota::per_second(1).unwrap().with_burst(5).unwrap()
    );
    // Still drained (a reset would give 5 at once), and the next permit
    // comes one new period (1 s, not 100 ms) later.
    assert_eq!(api.available(), 0);
    assert_eq!(
        api.try_acquire(),
        Err(AcquireError::RateLimited {
            wait: Duration::from_secs(1)
        })
    );
    clock.advance(Duration::from_millis(999));
    assert_eq!(api.available(), 0);
    clock.advance(Duration::from_millis(1));
    assert_eq!(api.available(), 1);
    // The handle held across the reload decides on the same live state.
    assert_eq!(held.gcra().unwrap().available(), 1);
    assert_eq!(held.gcra().unwrap().quota().burst(), 5);
}

#[test]
fn every_key_of_a_keyed_rule_keeps_its_state() {
    let dir = TempDir::new();
    let keyed = |rate: &str| {
        file(&[format!(
            "  per_ip:\n    algorithm: token_bucket\n    rate: \"{rate}\"\n    burst: 4\n    per_ip: true\n"
        )])
    };
    let path = dir.write("rules.yaml", &keyed("4/s"));
    let clock = ManualClock::new();
    let rules = RuleSet::load_with_clock(&path, clock.clone()).unwrap();
    let rule = rules.get("per_ip").unwrap();
    let keys = rule.keyed().unwrap();
    let key = RuleLimiter::<ManualClock>::key;
    keys.try_acquire_n(&key("10.0.0.1"), 4).unwrap(); // drained
    keys.try_acquire_n(&key("10.0.0.2"), 2).unwrap(); // half
    keys.try_acquire_n(&key("10.0.0.3"), 0).unwrap(); // full

    dir.write("rules.yaml", &keyed("1/s"));
    assert_eq!(rules.reload().unwrap().updated, ["per_ip"]);
    let rule = rules.get("per_ip").unwrap();
    let keys = rule.keyed().unwrap();
    let available = |k: &str| keys.available(&key(k));
    assert_eq!(
        (
            available("10.0.0.1"),
            available("10.0.0.2"),
            available("10.0.0.3")
        ),
        (0, 2, 4)
    );
    assert_eq!(
        keys.try_acquire(&key("10.0.0.1")),
        Err(KeyedError::Limited(AcquireError::RateLimited {
            wait: Duration::from_secs(1)
        }))
    );
    // The library's keyed calls decide on the same keys.
    assert!(matches!(
        futures::executor::block_on(rule.try_acquire_key_n("10.0.0.2", 3)),
        Err(limiter_config::RuleError::Limited(_))
    ));
    clock.advance(Duration::from_secs(1));
    assert_eq!((available("10.0.0.1"), available("10.0.0.2")), (1, 3));
    assert_eq!(available("10.0.0.9"), 4); // a new key, full, new quota
    assert_eq!(
        keys.quota(),
        Quota::per_second(1).unwrap().with_burst(4).unwrap()
    );
}

#[test]
fn a_bad_edit_leaves_the_old_rules_working_and_is_counted() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &file(&[token_bucket("api", "10/s", 2)]));
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let rules = metrics::with_local_recorder(&recorder, || {
        RuleSet::load_with_clock(&path, clock.clone()).unwrap()
    });
    rules
        .get("api")
        .unwrap()
        .gcra()
        .unwrap()
        .try_acquire()
        .unwrap();

    dir.write(
        "rules.yaml",
        "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: 0\n    burst: 2\n",
    );
    let errors = metrics::with_local_recorder(&recorder, || rules.reload()).unwrap_err();
    assert!(matches!(
        errors.errors()[0].problem,
        Problem::InvalidRate { .. }
    ));
    assert_eq!(errors.errors()[0].pos.line, 4);
    // Nothing changed: same generation, same quota, same state.
    assert_eq!(rules.generation(), 1);
    let api = rules.get("api").unwrap();
    let api = api.gcra().unwrap();
    assert_eq!(
        api.quota(),
        Quota::per_second(10).unwrap().with_burst(2).unwrap()
    );
    assert_eq!(api.available(), 1);
    api.try_acquire().unwrap();
    assert!(api.try_acquire().is_err());

    // A file that does not even parse, then a deleted file: same.
    dir.write("rules.yaml", "rate_limits: [\n");
    assert!(metrics::with_local_recorder(&recorder, || rules.reload()).is_err());
    std::fs::remove_file(&path).unwrap();
    let gone = metrics::with_local_recorder(&recorder, || rules.reload()).unwrap_err();
    assert!(matches!(gone.errors()[0].problem, Problem::Io { .. }));
    assert_eq!(rules.generation(), 1);

    dir.write("rules.yaml", &file(&[token_bucket("api", "20/s", 2)]));
    assert_eq!(
        metrics::with_local_recorder(&recorder, || rules.reload())
            .unwrap()
            .generation,
        2
    );

    let metrics: Vec<(String, DebugValue)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
        .collect();
    let value = |name: &str| {
        metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("{name} not recorded: {metrics:?}"))
    };
    assert_eq!(value(CONFIG_ERRORS), &DebugValue::Counter(3));
    assert_eq!(value(CONFIG_GENERATION), &DebugValue::Gauge(2.0.into()));
}

#[test]
fn rules_appear_disappear_and_are_replaced_as_documented() {
    let dir = TempDir::new();
    let path = dir.write(
        "rules.yaml",
        &file(&[
            token_bucket("kept", "10/s", 3),
            token_bucket("algo", "10/s", 3),
            token_bucket("keyed", "10/s", 3),
            token_bucket("gone", "10/s", 3),
        ]),
    );
    let rules = RuleSet::load_with_clock(&path, ManualClock::new()).unwrap();
    for name in ["kept", "algo", "keyed"] {
        rules
            .get(name)
            .unwrap()
            .gcra()
            .unwrap()
            .try_acquire_n(3)
            .unwrap();
    }
    dir.write(
        "rules.yaml",
        &file(&[
            // Only the mode changes: the limiter is untouched.
            "  kept:\n    algorithm: token_bucket\n    rate: \"10/s\"\n    burst: 3\n    mode: delay\n".into(),
            "  algo:\n    algorithm: leaky_bucket\n    rate: \"10/s\"\n    burst: 3\n".into(),
            "  keyed:\n    algorithm: token_bucket\n    rate: \"10/s\"\n    burst: 3\n    key: ip\n".into(),
            token_bucket("new", "10/s", 3),
        ]),
    );
    let report = rules.reload().unwrap();
    assert_eq!(report.unchanged, ["kept"]);
    assert_eq!(report.replaced, ["algo", "keyed"]);
    assert_eq!(
        (report.added, report.removed),
        (vec!["new".to_owned()], vec!["gone".to_owned()])
    );
    assert!(rules.get("gone").is_none());
    assert_eq!(rules.get("kept").unwrap().gcra().unwrap().available(), 0);
    // A replaced limiter starts fresh: that is what a new algorithm means.
    assert_eq!(rules.get("algo").unwrap().gcra().unwrap().available(), 3);
    assert!(rules.get("keyed").unwrap().keyed().is_some());
    assert_eq!(rules.get("new").unwrap().gcra().unwrap().available(), 3);
}

/// Readers racing 200 reloads between two versions of the file each see a
/// whole version: version 1 has rules a and b with burst 1 and odd
/// generations, version 2 rules a and c with burst 2 and even generations.
#[test]
fn readers_never_see_a_mixed_rule_set() {
    let dir = TempDir::new();
    let v1 = file(&[token_bucket("a", "10/s", 1), token_bucket("b", "10/s", 1)]);
    let v2 = file(&[token_bucket("a", "10/s", 2), token_bucket("c", "10/s", 2)]);
    let path = dir.write("rules.yaml", &v1);
    let rules = RuleSet::load_with_clock(&path, ManualClock::new()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Each reader reports its first read: the reloads start once both
    // run, however late a loaded machine schedules their threads.
    let (running, started) = std::sync::mpsc::channel();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (rules, stop, running) = (rules.clone(), Arc::clone(&stop), running.clone());
            std::thread::spawn(move || {
                let mut seen = [0u64; 2];
                // Relaxed: a flag to stop; the data is read through the snapshot.
                while !stop.load(Ordering::Relaxed) {
                    let snap = rules.snapshot();
                    let version = if snap.generation() % 2 == 1 { 1 } else { 2 };
                    let names: Vec<&str> = snap.rules().map(|r| r.name()).collect();
                    let bursts: Vec<u32> = snap
                        .rules()
                        .map(|r| r.spec().algorithm.quota().unwrap().burst())
                        .collect();
                    if version == 1 {
                        assert_eq!((names, bursts), (vec!["a", "b"], vec![1, 1]));
                    } else {
                        assert_eq!((names, bursts), (vec!["a", "c"], vec![2, 2]));
                    }
                    seen[version - 1] += 1;
                    if seen[0] + seen[1] == 1 {
                        let _ = running.send(());
                    }
                }
                seen
            })
        })
        .collect();
    drop(running);
    for _ in 0..2 {
        started
            .recv_timeout(Duration::from_secs(20))
            .expect("both readers read within 20 s");
    }
    for i in 0..200 {
        dir.write("rules.yaml", if i % 2 == 0 { &v2 } else { &v1 });
        assert_eq!(rules.reload().unwrap().generation, i + 2);
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let seen = r.join().expect("a reader saw a mixed rule set");
        assert!(seen[0] + seen[1] > 0);
    }
    assert_eq!(rules.generation(), 201);
}
