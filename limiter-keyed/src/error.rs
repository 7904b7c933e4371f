//! [`KeyedError`]: why a keyed acquisition was refused.

use core::fmt;

use limiter_core::AcquireError;

/// Why permits for a key were not granted.
///
/// [`Limited`](KeyedError::Limited) is transparent: it displays the core's
/// message and its [`source`](std::error::Error::source) is that error's own
/// source (none), so an error chain tells the refusal once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedError {
    /// The key's own limiter refused (rate limited, more than the burst,
    /// time out of range); nothing was consumed.
    Limited(AcquireError),
    /// The key is new, the limiter already tracks `max_keys` keys, none of
    /// them is idle, and the policy is
    /// [`WhenFull::RejectNewKeys`](crate::WhenFull::RejectNewKeys). Existing
    /// keys are unaffected; retry later (a key becomes idle once its state
    /// is full again), or raise `max_keys`.
    TooManyKeys {
        /// The cap in force.
        max_keys: usize,
    },
}

impl From<AcquireError> for KeyedError {
    fn from(e: AcquireError) -> KeyedError {
        KeyedError::Limited(e)
    }
}

impl fmt::Display for KeyedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyedError::Limited(e) => e.fmt(f),
            KeyedError::TooManyKeys { max_keys } => write!(
                f,
                "new key refused: the limiter already tracks {max_keys} keys and none is idle; retry later or raise max_keys"
            ),
        }
    }
}

impl std::error::Error for KeyedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the message above is already the inner error's.
            KeyedError::Limited(e) => std::error::Error::source(e),
            KeyedError::TooManyKeys { .. } => None,
        }
    }
}
