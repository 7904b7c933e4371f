//! [`KeyedError`]: why a keyed acquisition was refused.

use core::fmt;
use core::time::Duration;

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

impl KeyedError {
    /// How long to wait before the same request could succeed, when waiting
    /// is what helps: `Some` only for `Limited(RateLimited { wait })`, the
    /// exact wait (if nothing else is admitted for the key meanwhile).
    /// `None` for a request larger than the burst, a clock out of range, or
    /// too many keys, which no fixed wait cures.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use limiter_core::{ManualClock, Quota};
    /// use limiter_keyed::{KeyedLimiter, WhenFull};
    ///
    /// let limiter = KeyedLimiter::builder(Quota::per_second(10)?)
    ///     .max_keys(1)
    ///     .when_full(WhenFull::RejectNewKeys)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// limiter.try_acquire(&"alice")?;
    /// let limited = limiter.try_acquire(&"alice").unwrap_err();
    /// assert_eq!(limited.retry_after(), Some(Duration::from_millis(100)));
    /// let too_many = limiter.try_acquire_n(&"alice", 2).unwrap_err(); // burst is 1
    /// assert_eq!(too_many.retry_after(), None);
    /// let full = limiter.try_acquire(&"bob").unwrap_err();
    /// assert_eq!(full.retry_after(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            KeyedError::Limited(e) => e.retry_after(),
            KeyedError::TooManyKeys { .. } => None,
        }
    }
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
