//! The reloader on a real filesystem with real inotify: an in-place edit,
//! an editor's rename, a Kubernetes ConfigMap `..data` swap done as the
//! kubelet does it, and an edit of a symlink's target in another directory
//! each give exactly one callback that names the file. Waits are for the
//! callback (bounded), never sleeps; "exactly one" is shown by a later
//! sentinel edit whose callback must be the next one.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use limiter_reload::{Change, Reloader};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "limiter-reload-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(std::fs::canonicalize(dir).unwrap())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A reloader on `path` reporting, per callback, the changed paths and the
/// contents it reads then.
fn start(path: &Path) -> (Reloader, Receiver<(Change, String)>) {
    let (tx, rx) = channel();
    let file = path.to_path_buf();
    let reloader = Reloader::builder()
        .path(path)
        .quiet(Duration::from_millis(50))
        .start(move |change| {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let _ = tx.send((change.clone(), text));
        })
        .unwrap();
    (reloader, rx)
}

fn next(rx: &Receiver<(Change, String)>) -> (Change, String) {
    rx.recv_timeout(Duration::from_secs(20))
        .expect("a callback within 20 s")
}

/// Writes `sentinel` to `file` and checks that the very next callback is
/// for it (naming the watched `path`): nothing else was queued for the
/// change before.
fn only_one_before(rx: &Receiver<(Change, String)>, file: &Path, path: &Path, sentinel: &str) {
    std::fs::write(file, sentinel).unwrap();
    let (change, text) = next(rx);
    assert_eq!(text, sentinel, "a second callback for the earlier change");
    assert!(change.contains(path));
}

#[test]
fn an_edit_in_place_is_one_callback() {
    let dir = TempDir::new("edit");
    let path = dir.0.join("rules.yaml");
    std::fs::write(&path, "a: 1\n").unwrap();
    let (reloader, rx) = start(&path);
    std::fs::write(&path, "a: 2\n").unwrap();
    let (change, text) = next(&rx);
    assert_eq!(text, "a: 2\n");
    assert_eq!(change.changed(), std::slice::from_ref(&path));
    assert!(change.trigger().files);
    only_one_before(&rx, &path, &path, "a: 3\n");
    assert_eq!(reloader.reloads(), 2);
}

#[test]
fn an_editors_rename_over_the_file_is_one_callback() {
    let dir = TempDir::new("rename");
    let path = dir.0.join("rules.yaml");
    std::fs::write(&path, "a: 1\n").unwrap();
    let (_reloader, rx) = start(&path);
    let tmp = dir.0.join(".rules.yaml.swp");
    std::fs::write(&tmp, "a: 2\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert_eq!(next(&rx).1, "a: 2\n");
    only_one_before(&rx, &path, &path, "a: 3\n");
}

/// A ConfigMap volume: `rules.yaml -> ..data/rules.yaml`,
/// `..data -> ..<timestamp>`; an update writes a new timestamped
/// directory, links `..data_tmp` to it, renames that over `..data` and
/// removes the old directory (kubelet's `AtomicWriter`).
#[test]
fn a_configmap_data_symlink_swap_is_one_callback() {
    let dir = TempDir::new("configmap");
    let v1 = dir.0.join("..2026_12_01_10_00_00.1");
    std::fs::create_dir(&v1).unwrap();
    std::fs::write(v1.join("rules.yaml"), "a: 1\n").unwrap();
    std::os::unix::fs::symlink("..2026_12_01_10_00_00.1", dir.0.join("..data")).unwrap();
    let path = dir.0.join("rules.yaml");
    std::os::unix::fs::symlink("..data/rules.yaml", &path).unwrap();
    let (_reloader, rx) = start(&path);

    let swap = |old: &str, new: &str, text: &str| {
        let v = dir.0.join(new);
        std::fs::create_dir(&v).unwrap();
        std::fs::write(v.join("rules.yaml"), text).unwrap();
        std::os::unix::fs::symlink(new, dir.0.join("..data_tmp")).unwrap();
        std::fs::rename(dir.0.join("..data_tmp"), dir.0.join("..data")).unwrap();
        std::fs::remove_dir_all(dir.0.join(old)).unwrap();
    };
    swap(
        "..2026_12_01_10_00_00.1",
        "..2026_12_01_10_05_00.2",
        "a: 2\n",
    );
    let (change, text) = next(&rx);
    assert_eq!(text, "a: 2\n");
    assert_eq!(change.changed(), std::slice::from_ref(&path));
    // A second swap: the watch follows the new target directory too.
    swap(
        "..2026_12_01_10_05_00.2",
        "..2026_12_01_10_10_00.3",
        "a: 3\n",
    );
    assert_eq!(next(&rx).1, "a: 3\n");
    // And an edit of the target in place (not what the kubelet does, but
    // what an operator debugging in the pod might).
    let target = dir.0.join("..2026_12_01_10_10_00.3").join("rules.yaml");
    std::fs::write(&target, "a: 4\n").unwrap();
    assert_eq!(next(&rx).1, "a: 4\n");
    only_one_before(&rx, &target, &path, "a: 5\n");
}

#[test]
fn an_edit_of_a_links_target_in_another_directory_is_one_callback() {
    let dir = TempDir::new("target");
    let (conf, real) = (dir.0.join("conf"), dir.0.join("real"));
    std::fs::create_dir(&conf).unwrap();
    std::fs::create_dir(&real).unwrap();
    let target = real.join("rules.yaml");
    std::fs::write(&target, "a: 1\n").unwrap();
    let path = conf.join("rules.yaml");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let (_reloader, rx) = start(&path);
    std::fs::write(&target, "a: 2\n").unwrap();
    let (change, text) = next(&rx);
    assert_eq!(text, "a: 2\n");
    assert_eq!(change.changed(), std::slice::from_ref(&path));
    only_one_before(&rx, &target, &path, "a: 3\n");
}

#[test]
fn a_trigger_without_a_change_calls_nothing_and_two_files_are_told_apart() {
    let dir = TempDir::new("two");
    let (a, b) = (dir.0.join("a.toml"), dir.0.join("b.toml"));
    std::fs::write(&a, "a = 1\n").unwrap();
    std::fs::write(&b, "b = 1\n").unwrap();
    let (tx, rx) = channel();
    let reloader = Reloader::builder()
        .path(&a)
        .path(&b)
        .watch(false)
        .quiet(Duration::from_millis(20))
        .start(move |change| {
            let _ = tx.send(change.clone());
        })
        .unwrap();
    reloader.trigger(); // nothing changed: no callback
    std::fs::write(&b, "b = 2\n").unwrap();
    reloader.trigger();
    let change = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(change.changed(), std::slice::from_ref(&b));
    assert!(change.trigger().manual && !change.trigger().files);
    assert!(!change.contains(&a));
    assert_eq!(reloader.reloads(), 1);
}
