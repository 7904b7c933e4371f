//! Directory mode ([`ReloaderBuilder::dir`]): a file added, removed or
//! edited under a watched directory (also in a subdirectory) is one
//! callback naming the directory, and so is a Kubernetes ConfigMap `..data`
//! swap (the link of a key it adds may come as a second); dot files do not
//! count.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use limiter_reload::Reloader;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "limiter-reload-dir-{name}-{}-{}",
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

/// A reloader on the directory `dir`, reporting per callback the changed
/// paths and the sorted names of the files under it then.
/// Per callback: the changed paths and the files then.
type Seen = (Vec<PathBuf>, Vec<String>);

fn start(dir: &std::path::Path) -> (Reloader, Receiver<Seen>) {
    let (tx, rx) = channel();
    let d = dir.to_path_buf();
    let reloader = Reloader::builder()
        .dir(dir)
        .quiet(Duration::from_millis(50))
        .start(move |change| {
            let _ = tx.send((change.changed().to_vec(), names(&d)));
        })
        .unwrap();
    (reloader, rx)
}

fn names(dir: &std::path::Path) -> Vec<String> {
    fn walk(base: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let p = e.path();
            if std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                out.push(format!("{rel}={}", text.trim()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn next(rx: &Receiver<Seen>) -> Seen {
    rx.recv_timeout(Duration::from_secs(20))
        .expect("a callback within 20 s")
}

#[test]
fn files_added_edited_and_removed_under_a_directory() {
    let dir = TempDir::new("plain");
    std::fs::write(dir.0.join("a.yaml"), "1").unwrap();
    std::fs::create_dir(dir.0.join("sub")).unwrap();
    let (_reloader, rx) = start(&dir.0);

    std::fs::write(dir.0.join("b.yaml"), "2").unwrap();
    let (changed, files) = next(&rx);
    assert_eq!(changed, std::slice::from_ref(&dir.0));
    assert_eq!(files, ["a.yaml=1", "b.yaml=2"]);

    std::fs::write(dir.0.join("sub/c.yaml"), "3").unwrap();
    assert_eq!(next(&rx).1, ["a.yaml=1", "b.yaml=2", "sub/c.yaml=3"]);

    std::fs::write(dir.0.join("a.yaml"), "4").unwrap();
    assert_eq!(next(&rx).1, ["a.yaml=4", "b.yaml=2", "sub/c.yaml=3"]);

    std::fs::remove_file(dir.0.join("b.yaml")).unwrap();
    assert_eq!(next(&rx).1, ["a.yaml=4", "sub/c.yaml=3"]);

    // A dot file is no change: the next callback is the sentinel's.
    std::fs::write(dir.0.join(".swap"), "x").unwrap();
    std::fs::write(dir.0.join("z.yaml"), "5").unwrap();
    assert_eq!(next(&rx).1, ["a.yaml=4", "sub/c.yaml=3", "z.yaml=5"]);
}

/// A ConfigMap volume as the kubelet writes it: `x.yaml -> ..data/x.yaml`
/// for every key, `..data -> ..<timestamp>`; an update that adds a key
/// writes a new timestamped directory, swaps `..data` and adds the new
/// key's link.
#[test]
fn a_configmap_swap_that_adds_a_file_is_seen() {
    let dir = TempDir::new("configmap");
    let v1 = dir.0.join("..2026_12_01_10_00_00.1");
    std::fs::create_dir(&v1).unwrap();
    std::fs::write(v1.join("a.yaml"), "1").unwrap();
    std::os::unix::fs::symlink("..2026_12_01_10_00_00.1", dir.0.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/a.yaml", dir.0.join("a.yaml")).unwrap();
    let (_reloader, rx) = start(&dir.0);

    let v2 = dir.0.join("..2026_12_01_10_05_00.2");
    std::fs::create_dir(&v2).unwrap();
    std::fs::write(v2.join("a.yaml"), "1").unwrap();
    std::fs::write(v2.join("b.yaml"), "2").unwrap();
    std::os::unix::fs::symlink("..2026_12_01_10_05_00.2", dir.0.join("..data_tmp")).unwrap();
    std::fs::rename(dir.0.join("..data_tmp"), dir.0.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/b.yaml", dir.0.join("b.yaml")).unwrap();
    std::fs::remove_dir_all(&v1).unwrap();
    // Three steps: a slow machine may see the swap before the new link
    // (one callback with a.yaml alone), never anything else.
    let (changed, mut files) = next(&rx);
    assert_eq!(changed, std::slice::from_ref(&dir.0));
    if files == ["a.yaml=1"] {
        files = next(&rx).1;
    }
    assert_eq!(files, ["a.yaml=1", "b.yaml=2"]);

    // The new target directory is watched: an edit there is seen.
    std::fs::write(v2.join("a.yaml"), "3").unwrap();
    assert_eq!(next(&rx).1, ["a.yaml=3", "b.yaml=2"]);
}
