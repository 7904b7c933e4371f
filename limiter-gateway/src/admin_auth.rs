//! Who may change the gateway through its admin listener: a bearer token
//! read from a file, required on every mutating call, and a loopback bind
//! unless a token guards the listener.
//!
//! # Guarantees
//!
//! * Reading (`GET`, `HEAD`, `OPTIONS`) needs no token: the admin listener
//!   already shows only what `/metrics` shows.
//! * Every other method needs `Authorization: Bearer <token>`: without the
//!   header (or with another scheme, or with two `Authorization` headers),
//!   `401 Unauthorized` with `WWW-Authenticate: Bearer realm="limiter-admin"`;
//!   with a token that is not the one in the file, `403 Forbidden`. Both
//!   as problem documents; the token is never echoed or logged.
//! * The comparison takes the same time whatever bytes match (it runs over
//!   the whole presented token and the whole expected one).
//! * The token file holds one line of at least [`MIN_TOKEN_LEN`] visible
//!   ASCII characters (a trailing newline is ignored); anything else is a
//!   typed [`AdminTokenError`] at start-up, never a silently weaker check.
//! * [`check_admin_bind`]: an admin listener on an address other than
//!   loopback is refused unless a token file is configured.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use http_body_util::Full;
use limiter_tower::problem::Problem;

/// The shortest token accepted (16 characters: 96 bits of base64).
pub const MIN_TOKEN_LEN: usize = 16;

/// The `WWW-Authenticate` challenge of a `401`.
pub const CHALLENGE: &str = "Bearer realm=\"limiter-admin\"";

/// The admin bearer token, read from a file.
///
/// `Debug` never shows it.
#[derive(Clone)]
pub struct AdminToken {
    token: Box<[u8]>,
    path: PathBuf,
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminToken")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why the token file could not be used. Each variant names what to fix.
#[derive(Debug)]
#[non_exhaustive]
pub enum AdminTokenError {
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        error: std::io::Error,
    },
    /// The token is shorter than [`MIN_TOKEN_LEN`].
    TooShort {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: usize,
    },
    /// The token holds a character outside visible ASCII (a space, a
    /// control character, a second line, non-ASCII).
    BadCharacter {
        /// The file.
        path: PathBuf,
    },
}

impl fmt::Display for AdminTokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminTokenError::Read { path, error } => {
                write!(
                    f,
                    "cannot read the admin token file {}: {error}",
                    path.display()
                )
            }
            AdminTokenError::TooShort { path, len } => write!(
                f,
                "the admin token in {} has {len} characters; use at least {MIN_TOKEN_LEN} (for example `openssl rand -base64 24`)",
                path.display()
            ),
            AdminTokenError::BadCharacter { path } => write!(
                f,
                "the admin token in {} must be one line of visible ASCII characters (no spaces)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for AdminTokenError {}

impl AdminToken {
    /// Reads the token from `path`: one line, a trailing `\n` or `\r\n`
    /// ignored.
    ///
    /// # Errors
    ///
    /// An [`AdminTokenError`] for an unreadable file or a token that is too
    /// short or not visible ASCII.
    pub fn from_file(path: impl AsRef<Path>) -> Result<AdminToken, AdminTokenError> {
        let path = path.as_ref().to_path_buf();
        let raw = std::fs::read(&path).map_err(|error| AdminTokenError::Read {
            path: path.clone(),
            error,
        })?;
        let token = raw
            .strip_suffix(b"\n")
            .map(|t| t.strip_suffix(b"\r").unwrap_or(t))
            .unwrap_or(&raw);
        if !token.iter().all(|b| b.is_ascii_graphic()) {
            return Err(AdminTokenError::BadCharacter { path });
        }
        if token.len() < MIN_TOKEN_LEN {
            return Err(AdminTokenError::TooShort {
                path,
                len: token.len(),
            });
        }
        Ok(AdminToken {
            token: token.into(),
            path,
        })
    }

    /// The file the token was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `presented` is the token, in time independent of where they
    /// differ.
    fn matches(&self, presented: &[u8]) -> bool {
        let mut diff = u8::from(presented.len() != self.token.len());
        for (i, &b) in presented.iter().enumerate() {
            diff |= b ^ self.token.get(i).copied().unwrap_or(!b);
        }
        for (i, &b) in self.token.iter().enumerate() {
            diff |= b ^ presented.get(i).copied().unwrap_or(!b);
        }
        diff == 0
    }
}

/// Why a mutating admin call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthDenied {
    /// No bearer token was presented: `401`, with [`CHALLENGE`].
    Missing,
    /// A token was presented and it is not the admin token: `403`.
    Wrong,
}

impl AuthDenied {
    /// The status to answer with.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            AuthDenied::Missing => StatusCode::UNAUTHORIZED,
            AuthDenied::Wrong => StatusCode::FORBIDDEN,
        }
    }

    /// The problem document's `detail`.
    pub(crate) fn detail(self) -> &'static str {
        match self {
            AuthDenied::Missing => {
                "this admin call changes the gateway; send `Authorization: Bearer <token>` with the token from the admin token file"
            }
            AuthDenied::Wrong => "the bearer token is not the admin token",
        }
    }

    /// The `WWW-Authenticate` header a `401` carries.
    pub(crate) fn challenge(self) -> Option<HeaderValue> {
        (self == AuthDenied::Missing).then(|| HeaderValue::from_static(CHALLENGE))
    }

    /// The answer: the problem document (the workspace's one writer) with
    /// its status, and the challenge on a `401`.
    pub(crate) fn into_response(self) -> Response<Full<Bytes>> {
        let mut response = Problem::new(self.status())
            .detail(self.detail())
            .into_response();
        if let Some(challenge) = self.challenge() {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        response
    }
}

/// Whether `method` only reads.
pub(crate) fn is_read_only(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Decides an admin request: read-only methods pass; every other one needs
/// the bearer token. With no token configured every mutating call is
/// [`AuthDenied::Missing`]: the admin API cannot be changed at all.
///
/// # Errors
///
/// [`AuthDenied`] as described in the module documentation.
pub(crate) fn authorize(
    token: Option<&AdminToken>,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), AuthDenied> {
    if is_read_only(method) {
        return Ok(());
    }
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(AuthDenied::Missing);
    };
    let bytes = value.as_bytes();
    // The scheme is case-insensitive (RFC 9110 §11.1); one space follows.
    let presented = match bytes.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case(b"bearer ") => &bytes[7..],
        _ => return Err(AuthDenied::Missing),
    };
    match token {
        None => Err(AuthDenied::Missing),
        Some(token) if token.matches(presented) => Ok(()),
        Some(_) => Err(AuthDenied::Wrong),
    }
}

/// Why the admin listener's address was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicAdminWithoutToken {
    /// The address asked for.
    pub addr: SocketAddr,
}

impl fmt::Display for PublicAdminWithoutToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the admin listener {} is not a loopback address; bind it to 127.0.0.1 or [::1], or set an admin token file",
            self.addr
        )
    }
}

impl std::error::Error for PublicAdminWithoutToken {}

/// Refuses an admin listener outside loopback unless a token guards it.
///
/// # Errors
///
/// [`PublicAdminWithoutToken`] for a non-loopback address without a token.
pub fn check_admin_bind(
    addr: SocketAddr,
    token: Option<&AdminToken>,
) -> Result<(), PublicAdminWithoutToken> {
    if addr.ip().is_loopback() || token.is_some() {
        Ok(())
    } else {
        Err(PublicAdminWithoutToken { addr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorize_reads_open_writes_need_the_token() -> Result<(), Box<dyn std::error::Error>> {
        use http::{HeaderMap, HeaderValue, Method};

        let dir = std::env::temp_dir().join(format!("admin-token-doc-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("token"), "s3cr3t-t0ken-0123456789\n")?;
        let token = AdminToken::from_file(dir.join("token"))?;

        let mut headers = HeaderMap::new();
        assert_eq!(authorize(Some(&token), &Method::GET, &headers), Ok(()));
        assert_eq!(
            authorize(Some(&token), &Method::PUT, &headers),
            Err(AuthDenied::Missing)
        );
        headers.insert(
            "authorization",
            HeaderValue::from_static("Bearer nope-nope-nope-nope"),
        );
        assert_eq!(
            authorize(Some(&token), &Method::PUT, &headers),
            Err(AuthDenied::Wrong)
        );
        headers.insert(
            "authorization",
            HeaderValue::from_static("Bearer s3cr3t-t0ken-0123456789"),
        );
        assert_eq!(authorize(Some(&token), &Method::DELETE, &headers), Ok(()));
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    /// Loads a token file holding `contents`; the file is gone afterwards.
    fn load(name: &str, contents: &[u8]) -> Result<AdminToken, AdminTokenError> {
        let dir = std::env::temp_dir().join(format!("admin-auth-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, contents).unwrap();
        let token = AdminToken::from_file(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        token
    }

    fn with_auth(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.append(header::AUTHORIZATION, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn missing_wrong_and_right_tokens() {
        let t = load("mwr", b"0123456789abcdef\r\n").unwrap();
        let put = Method::PUT;
        assert_eq!(
            authorize(Some(&t), &put, &HeaderMap::new()),
            Err(AuthDenied::Missing)
        );
        assert_eq!(
            authorize(Some(&t), &put, &with_auth("Basic Zm9vOmJhcg==")),
            Err(AuthDenied::Missing)
        );
        assert_eq!(
            authorize(Some(&t), &put, &with_auth("Bearer 0123456789abcdeF")),
            Err(AuthDenied::Wrong)
        );
        assert_eq!(
            authorize(Some(&t), &put, &with_auth("Bearer 0123456789abcde")),
            Err(AuthDenied::Wrong)
        );
        assert_eq!(
            authorize(Some(&t), &put, &with_auth("Bearer 0123456789abcdef0")),
            Err(AuthDenied::Wrong)
        );
        assert_eq!(
            authorize(Some(&t), &put, &with_auth("Bearer ")),
            Err(AuthDenied::Wrong)
        );
        assert_eq!(
            authorize(Some(&t), &put, &with_auth("bearer 0123456789abcdef")),
            Ok(())
        );
        assert_eq!(
            authorize(
                Some(&t),
                &Method::POST,
                &with_auth("Bearer 0123456789abcdef")
            ),
            Ok(())
        );
        // Two Authorization headers: ambiguous, refused as missing.
        let mut two = with_auth("Bearer 0123456789abcdef");
        two.append(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert_eq!(authorize(Some(&t), &put, &two), Err(AuthDenied::Missing));
        // Reads need nothing; without a token file nothing can be changed.
        assert_eq!(authorize(None, &Method::HEAD, &HeaderMap::new()), Ok(()));
        assert_eq!(
            authorize(None, &put, &with_auth("Bearer 0123456789abcdef")),
            Err(AuthDenied::Missing)
        );
        assert_eq!(AuthDenied::Missing.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(AuthDenied::Wrong.status(), StatusCode::FORBIDDEN);
        assert_eq!(AuthDenied::Missing.challenge().unwrap(), CHALLENGE);
        assert_eq!(AuthDenied::Wrong.challenge(), None);
        let missing = AuthDenied::Missing.into_response();
        assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(missing.headers()[header::WWW_AUTHENTICATE], CHALLENGE);
        assert_eq!(
            missing.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let wrong = AuthDenied::Wrong.into_response();
        assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
        assert!(!wrong.headers().contains_key(header::WWW_AUTHENTICATE));
        assert!(!format!("{t:?}").contains("0123"));
    }

    #[test]
    fn weak_or_malformed_token_files_are_refused() {
        let short = load("short", b"abc\n").unwrap_err();
        assert!(
            matches!(short, AdminTokenError::TooShort { len: 3, .. }),
            "{short}"
        );
        let spaced = load("space", b"0123456789 abcdef").unwrap_err();
        assert!(matches!(spaced, AdminTokenError::BadCharacter { .. }));
        let two_lines = load("lines", b"0123456789abcdef\nsecond\n");
        assert!(matches!(
            two_lines,
            Err(AdminTokenError::BadCharacter { .. })
        ));
        let missing = AdminToken::from_file("/nonexistent/limiter/token").unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("cannot read the admin token file /nonexistent/limiter/token")
        );
    }

    #[test]
    fn the_admin_listener_stays_on_loopback_without_a_token() {
        let t = load("bind", b"0123456789abcdef").unwrap();
        let public: SocketAddr = "0.0.0.0:9090".parse().unwrap();
        assert_eq!(
            check_admin_bind(public, None),
            Err(PublicAdminWithoutToken { addr: public })
        );
        assert_eq!(check_admin_bind(public, Some(&t)), Ok(()));
        assert_eq!(
            check_admin_bind("127.0.0.1:9090".parse().unwrap(), None),
            Ok(())
        );
        assert_eq!(
            check_admin_bind("[::1]:9090".parse().unwrap(), None),
            Ok(())
        );
    }
}
