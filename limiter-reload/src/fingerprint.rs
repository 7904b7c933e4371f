//! What a watched file looks like now, reduced to a value that changes
//! when its contents do.
//!
//! A fingerprint is read *through* symlinks (the bytes a reader of the path
//! gets), so a symlink swap that leaves the path's contents as they were is
//! no change, and an edit of a link's target is one. A missing or unreadable
//! file has a fingerprint too (the error kind), so a file that appears or
//! disappears is a change.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::ErrorKind;
use std::path::Path;

/// The contents of one path at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fingerprint {
    /// The file's length and a hash of its bytes.
    Contents {
        /// Bytes read.
        len: u64,
        /// SipHash of the bytes (collisions are not a concern: the input is
        /// not chosen to collide, and a miss costs one skipped reload).
        hash: u64,
    },
    /// The file could not be read.
    Unreadable(ErrorKind),
}

/// The files under a directory (recursively, through symlinks, names that
/// start with `.` skipped), sorted, each with its bytes' fingerprint.
pub(crate) fn files_under(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            // `metadata` follows symlinks (a ConfigMap's `a.yaml -> ..data/a.yaml`).
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => walk(&path, out)?,
                Ok(_) => out.push(path),
                // A dangling link: a file that cannot be read.
                Err(_) => out.push(path),
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    out.sort();
    Ok(out)
}

impl Fingerprint {
    /// Reads `path` now.
    pub(crate) fn of(path: &Path) -> Fingerprint {
        match std::fs::read(path) {
            Ok(bytes) => {
                let mut hasher = DefaultHasher::new();
                bytes.hash(&mut hasher);
                Fingerprint::Contents {
                    len: bytes.len() as u64,
                    hash: hasher.finish(),
                }
            }
            Err(e) => Fingerprint::Unreadable(e.kind()),
        }
    }

    /// Reads the directory `dir` now: which files are under it (see
    /// [`files_under`]) and their contents, so a file added, removed,
    /// renamed or edited anywhere under it changes the fingerprint.
    pub(crate) fn of_dir(dir: &Path) -> Fingerprint {
        match files_under(dir) {
            Ok(files) => {
                let mut hasher = DefaultHasher::new();
                for f in &files {
                    f.strip_prefix(dir).unwrap_or(f).hash(&mut hasher);
                    Fingerprint::of(f).hash(&mut hasher);
                }
                Fingerprint::Contents {
                    len: files.len() as u64,
                    hash: hasher.finish(),
                }
            }
            Err(e) => Fingerprint::Unreadable(e.kind()),
        }
    }
}

impl Hash for Fingerprint {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Fingerprint::Contents { len, hash } => (0u8, len, hash).hash(state),
            Fingerprint::Unreadable(kind) => (1u8, format!("{kind:?}")).hash(state),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_decide_not_the_path() {
        let dir = std::env::temp_dir().join(format!("limiter-reload-fp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "x: 1\n").unwrap();
        std::fs::write(&b, "x: 1\n").unwrap();
        assert_eq!(Fingerprint::of(&a), Fingerprint::of(&b));
        std::fs::write(&b, "x: 2\n").unwrap();
        assert_ne!(Fingerprint::of(&a), Fingerprint::of(&b));
        assert_eq!(
            Fingerprint::of(&dir.join("missing")),
            Fingerprint::Unreadable(ErrorKind::NotFound)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_changes_with_its_files_not_its_dot_files() {
        let dir = std::env::temp_dir().join(format!("limiter-reload-fd-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.yaml"), "a").unwrap();
        let first = Fingerprint::of_dir(&dir);
        std::fs::write(dir.join(".hidden"), "x").unwrap();
        assert_eq!(Fingerprint::of_dir(&dir), first, "dot files are skipped");
        std::fs::write(dir.join("sub/b.yaml"), "b").unwrap();
        let added = Fingerprint::of_dir(&dir);
        assert_ne!(added, first, "a file added in a subdirectory");
        std::fs::write(dir.join("sub/b.yaml"), "B").unwrap();
        assert_ne!(Fingerprint::of_dir(&dir), added, "an edit");
        std::fs::remove_file(dir.join("sub/b.yaml")).unwrap();
        assert_eq!(Fingerprint::of_dir(&dir), first, "removed again");
        assert_eq!(
            Fingerprint::of_dir(&dir.join("missing")),
            Fingerprint::Unreadable(ErrorKind::NotFound)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
