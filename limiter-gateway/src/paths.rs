//! Request paths normalised before any rule sees them, so that a rule
//! cannot be dodged by spelling its path differently, and the upstream is
//! sent the path the rule was decided on.
//!
//! # The rule
//!
//! [`normalize`] rewrites a path (the query is never touched) in this order:
//!
//! 1. **Percent-escapes**: an escape of an unreserved character
//!    (`A-Z a-z 0-9 - . _ ~`, RFC 3986 §2.3) is decoded (`/%70ay` is
//!    `/pay`, `%2e` and `%2E` are `.`); an escaped slash (`%2F`, `%2f`) is
//!    decoded to `/` and is a separator like any other, for matching and
//!    forwarding alike (an upstream that decodes it would otherwise serve a
//!    path the rule never saw); every other escape keeps its byte and gets
//!    upper-case hex digits (`%3b` is `%3B`, RFC 3986 §6.2.2.1). A `%` not
//!    followed by two hex digits is a bad request.
//! 2. **Dot segments** `.` and `..` are removed (RFC 3986 §5.2.4); a `..`
//!    above the root stays at the root. Encoded dots were decoded in step 1,
//!    so `/%2e%2e/` climbs like `/../`.
//! 3. **Repeated slashes** are merged (`//pay///x` is `/pay/x`).
//!
//! The result is what the gateway forwards. The path the *rules* match is
//! the same with each segment's `;` parameters removed (`/pay;v=1/x` and
//! `/pay/x;jsessionid=1` are matched as `/pay/x`, as servlet containers
//! route them), dot segments resolved again after that (`/pay/..;/admin` is
//! matched as `/admin`); the parameters themselves are forwarded.
//!
//! With [`PathMode::Reject`] a path that step 1-3 would change is answered
//! `400` instead of rewritten (parameters are not a change).
//!
//! A request target that is not a path (`*` for `OPTIONS`, an authority for
//! `CONNECT`) is left alone.

use std::borrow::Cow;

/// What the gateway does with a path that is not in normal form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathMode {
    /// Rewrite it to the normal form, match and forward that (default).
    #[default]
    Rewrite,
    /// Answer `400 Bad Request`.
    Reject,
}

/// A path that cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathError {
    /// A `%` not followed by two hex digits.
    BadEscape,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathError::BadEscape => write!(f, "a % in the path is not followed by two hex digits"),
        }
    }
}

impl std::error::Error for PathError {}

/// The two normal forms of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Normalized<'a> {
    /// What is forwarded to the upstream.
    pub forward: Cow<'a, str>,
    /// What the rules and the upstream routing match: `forward` without
    /// `;` parameters.
    pub matched: Cow<'a, str>,
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Step 1: escapes decoded or upper-cased.
fn decode(path: &str) -> Result<Cow<'_, str>, PathError> {
    let bytes = path.as_bytes();
    if !bytes.contains(&b'%') {
        return Ok(Cow::Borrowed(path));
    }
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            let next = bytes[i..]
                .iter()
                .position(|&b| b == b'%')
                .map_or(bytes.len(), |p| i + p);
            out.push_str(&path[i..next]);
            i = next;
            continue;
        }
        let (Some(hi), Some(lo)) = (
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) else {
            return Err(PathError::BadEscape);
        };
        let byte = hi << 4 | lo;
        if unreserved(byte) || byte == b'/' {
            out.push(char::from(byte));
        } else {
            const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(char::from(DIGITS[usize::from(hi)]));
            out.push(char::from(DIGITS[usize::from(lo)]));
        }
        i += 3;
    }
    Ok(Cow::Owned(out))
}

/// Steps 2 and 3 over segments, `strip` removing `;` parameters first.
fn resolve(path: &str, strip: bool) -> Cow<'_, str> {
    let segments = path.split('/').skip(1);
    let dirty = path.contains("//")
        || (strip && path.contains(';'))
        || path.split('/').skip(1).any(|s| s == "." || s == "..");
    let clean = !dirty;
    if clean {
        return Cow::Borrowed(path);
    }
    let mut out: Vec<&str> = Vec::new();
    let mut trailing = false;
    for segment in segments {
        let segment = if strip {
            segment.split(';').next().unwrap_or("")
        } else {
            segment
        };
        trailing = false;
        match segment {
            "" => trailing = true,
            "." => trailing = true,
            ".." => {
                out.pop();
                trailing = true;
            }
            s => out.push(s),
        }
    }
    let mut joined = String::with_capacity(path.len());
    for s in &out {
        joined.push('/');
        joined.push_str(s);
    }
    if trailing || out.is_empty() {
        joined.push('/');
    }
    Cow::Owned(joined)
}

/// The normal forms of `path` (module doc).
///
/// # Errors
///
/// [`PathError::BadEscape`]: a `%` not followed by two hex digits.
pub(crate) fn normalize(path: &str) -> Result<Normalized<'_>, PathError> {
    if !path.starts_with('/') {
        return Ok(Normalized {
            forward: Cow::Borrowed(path),
            matched: Cow::Borrowed(path),
        });
    }
    let forward = match decode(path)? {
        Cow::Borrowed(p) => resolve(p, false),
        Cow::Owned(p) => Cow::Owned(resolve(&p, false).into_owned()),
    };
    let matched = if forward.contains(';') {
        Cow::Owned(resolve(&forward, true).into_owned())
    } else {
        forward.clone()
    };
    Ok(Normalized { forward, matched })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_normalise_to_one_path() -> Result<(), Box<dyn std::error::Error>> {
        for spelling in [
            "/pay/x",
            "//pay/x",
            "/free/../pay/x",
            "/%70ay/x",
            "/./pay/x",
            "/pay;v=1/x",
        ] {
            assert_eq!(normalize(spelling)?.matched, "/pay/x", "{spelling}");
        }
        assert_eq!(normalize("/a%2fb/%7e")?.forward, "/a/b/~");
        assert_eq!(normalize("/a%3bb")?.forward, "/a%3Bb");
        assert!(normalize("/a%zz").is_err());
        Ok(())
    }

    fn both(path: &str) -> (String, String) {
        let n = normalize(path).unwrap();
        (n.forward.into_owned(), n.matched.into_owned())
    }

    #[test]
    fn dot_segments_as_rfc_3986_5_2_4() {
        // The examples of RFC 3986 §5.4 that reduce to a path alone.
        for (raw, want) in [
            ("/a/b/c/./../../g", "/a/g"),
            ("/mid/content=5/../6", "/mid/6"),
            ("/a/b/../../../g", "/g"),
            ("/..", "/"),
            ("/.", "/"),
            ("/a/.", "/a/"),
            ("/a/..", "/"),
            ("/a/b/", "/a/b/"),
            ("/a/.b/..c/", "/a/.b/..c/"),
            ("/", "/"),
        ] {
            assert_eq!(both(raw).0, want, "{raw}");
        }
    }

    #[test]
    fn escapes_slashes_and_parameters() {
        assert_eq!(both("/%2e%2e/pay/x").0, "/pay/x");
        assert_eq!(both("/free/%2E%2e/pay/x").0, "/pay/x");
        assert_eq!(both("/free%2F..%2Fpay/x").0, "/pay/x");
        assert_eq!(both("/%70%61%79/x").0, "/pay/x");
        assert_eq!(both("/a%3bb%3Bc").0, "/a%3Bb%3Bc");
        assert_eq!(both("/a%20b").0, "/a%20b");
        assert_eq!(both("///pay//x//").0, "/pay/x/");
        assert_eq!(
            both("/pay;a=b/x;c"),
            ("/pay;a=b/x;c".into(), "/pay/x".into())
        );
        assert_eq!(both("/pay/..;/admin").1, "/admin");
        assert_eq!(normalize("/%"), Err(PathError::BadEscape));
        assert_eq!(normalize("/%4"), Err(PathError::BadEscape));
        assert_eq!(normalize("/%g0"), Err(PathError::BadEscape));
        assert_eq!(both("*"), ("*".into(), "*".into()));
    }

    #[test]
    fn a_normal_path_is_borrowed() {
        let n = normalize("/pay/x").unwrap();
        assert!(matches!(n.forward, Cow::Borrowed(_)));
        assert!(matches!(n.matched, Cow::Borrowed(_)));
    }
}
