//! The file watcher in a real temporary directory: an edit is applied, a
//! bad edit is not, and an editor-style replace (write a new file, rename it
//! over the old) is seen too. Each wait is for the event, bounded by a
//! timeout, never a sleep.

mod support;

use std::time::Duration;

use limiter_config::RuleSet;
use limiter_core::{ManualClock, Quota};
use support::TempDir;

fn rules(rate: u32) -> String {
    format!("rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: {rate}\n    burst: 2\n")
}

/// Waits (bounded) until the watcher applies generation `g`.
async fn generation(rules: &RuleSet<ManualClock>, g: u64) {
    let mut rx = rules.subscribe();
    tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|&n| n >= g))
        .await
        .unwrap_or_else(|_| panic!("the watcher did not apply generation {g} within 20 s"))
        .expect("rule set alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_applies_edits_in_a_real_directory() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &rules(10));
    let rules_set = RuleSet::load_with_clock(&path, ManualClock::new()).unwrap();
    let (tx, mut failures) = tokio::sync::mpsc::unbounded_channel();
    let _watcher = rules_set
        .watch_with(move |outcome| {
            if let Err(errors) = outcome {
                let _ = tx.send(errors.to_string());
            }
        })
        .unwrap();
    let quota = |r: &RuleSet<ManualClock>| r.get("api").unwrap().gcra().unwrap().quota();

    std::fs::write(&path, rules(20)).unwrap();
    generation(&rules_set, 2).await;
    assert_eq!(
        quota(&rules_set),
        Quota::per_second(20).unwrap().with_burst(2).unwrap()
    );

    // A bad edit: reported to the callback, nothing applied.
    std::fs::write(
        &path,
        "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: -1\n",
    )
    .unwrap();
    // (A save seen half-written fails too; wait for the edit's own error.)
    let reported = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(failure) = failures.recv().await {
            if failure.contains("rules.yaml:4:11: rule `api`, field `rate`") {
                return;
            }
        }
    });
    reported
        .await
        .expect("the watcher did not report the bad edit within 20 s");
    assert_eq!(rules_set.generation(), 2);

    // An editor-style save: a new file renamed over the old one.
    let tmp = dir.write(".rules.yaml.swp", &rules(40));
    std::fs::rename(&tmp, &path).unwrap();
    generation(&rules_set, 3).await;
    assert_eq!(
        quota(&rules_set),
        Quota::per_second(40).unwrap().with_burst(2).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &rules(10));
    let rules_set = RuleSet::load_with_clock(&path, ManualClock::new()).unwrap();
    let reloader = rules_set.reload_on_sighup().unwrap();
    std::fs::write(&path, rules(30)).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    generation(&rules_set, 2).await;
    let quota = rules_set.get("api").unwrap().gcra().unwrap().quota();
    assert_eq!(quota, Quota::per_second(30).unwrap().with_burst(2).unwrap());
    drop(reloader);
}

/// An operator saves a bad file and sends SIGHUP: one refused reload, one
/// error, whichever trigger came first; the next good save is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_save_and_a_sighup_count_one_error() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", &rules(10));
    let rules_set = RuleSet::load_with_clock(&path, ManualClock::new()).unwrap();
    let (tx, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
    let _reloader = rules_set
        .reload_with(
            limiter_reload::Reloader::builder().sighup(true),
            move |outcome| {
                let _ = tx.send(outcome.map(|r| r.generation).map_err(|e| e.to_string()));
            },
        )
        .unwrap();
    std::fs::write(
        &path,
        "rate_limits:\n  api:\n    algorithm: token_bucket\n    rate: -1\n",
    )
    .unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(20), outcomes.recv())
            .await
            .expect("a reload within 20 s")
            .expect("reloader alive")
    };
    let first = next().await;
    assert!(
        first.as_ref().is_err_and(|e| e.contains("field `rate`")),
        "{first:?}"
    );
    // A good save: the very next outcome is its success, so neither the
    // watcher nor the SIGHUP retried the bad file.
    std::fs::write(&path, rules(20)).unwrap();
    assert_eq!(next().await, Ok(2));
    assert_eq!(rules_set.generation(), 2);
}
