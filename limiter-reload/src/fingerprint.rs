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
}
