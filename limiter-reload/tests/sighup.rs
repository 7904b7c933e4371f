//! SIGHUP through the reloader (its own test binary: the signal goes to the
//! whole process): an edit then a SIGHUP is one callback, a SIGHUP alone
//! after it none, and a SIGHUP after an edit with the watch off is one.

use std::sync::mpsc::channel;
use std::time::Duration;

use limiter_reload::{ReloadError, Reloader};

fn hup() {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

#[test]
fn sighup_needs_a_runtime() {
    let path = std::env::temp_dir().join("limiter-reload-no-runtime.yaml");
    let err = Reloader::builder()
        .path(&path)
        .watch(false)
        .sighup(true)
        .start(|_| {})
        .unwrap_err();
    assert!(matches!(err, ReloadError::NoRuntime), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_and_a_sighup_are_one_reload() {
    let dir = std::env::temp_dir().join(format!("limiter-reload-hup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rules.yaml");
    std::fs::write(&path, "a: 1\n").unwrap();
    let (tx, rx) = channel();
    let file = path.clone();
    let reloader = Reloader::builder()
        .path(&path)
        .sighup(true)
        .quiet(Duration::from_millis(50))
        .start(move |change| {
            let _ = tx.send((change.trigger(), std::fs::read_to_string(&file).unwrap()));
        })
        .unwrap();
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("a callback within 20 s")
    };

    // The operator's habit: save, then SIGHUP.
    std::fs::write(&path, "a: 2\n").unwrap();
    hup();
    assert_eq!(next().1, "a: 2\n");
    // The SIGHUP again with nothing changed, then a sentinel edit: the next
    // callback is the sentinel's, so neither SIGHUP made a second one.
    hup();
    std::fs::write(&path, "a: 3\n").unwrap();
    assert_eq!(next().1, "a: 3\n");
    assert_eq!(reloader.reloads(), 2);
    drop(reloader);

    // SIGHUP alone (no watch) reloads an edit.
    let (tx, rx) = channel();
    let reloader = Reloader::builder()
        .path(&path)
        .watch(false)
        .sighup(true)
        .quiet(Duration::from_millis(20))
        .start(move |change| {
            let _ = tx.send(change.trigger());
        })
        .unwrap();
    std::fs::write(&path, "a: 4\n").unwrap();
    hup();
    let trigger = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(trigger.signal && !trigger.files);
    assert_eq!(reloader.reloads(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
